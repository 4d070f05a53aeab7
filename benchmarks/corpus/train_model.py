"""Generic corpus training script: one Hugging Face `transformers` model class, built from its config at a small
size (random weights, nothing downloaded), run a few steps under `torch.compile` in one of two modes:

    python train_model.py LongformerModel [--mode train|eval] [--steps 3] [--eager]

train (the default): `model.train()` (dropout on), forward, backward and an AdamW step per step.
eval: `model.eval()` and the forward alone under `torch.no_grad()`, as an evaluation loop runs it; each step prints
the mean square of the outputs (torchmend's verify compares what the compiled model returns, and the printed line).

The driver (run.py) copies this file into a scratch project beside a copy of the `transformers` package, so the
import below finds the copy (the script's folder comes first on sys.path) and the model files are project code.

Inputs follow the model's main input: token ids (plus decoder ids for encoder-decoders), raw audio, filterbank
features or pixels. Caches are off. The loss is the mean square of every floating output that carries a gradient
(hidden states, logits, router logits, ...), so every such output is trained (in eval mode: of every floating
output). Seeded: torch, random, numpy.
`--eager` runs without torch.compile (the driver's check that the model builds and runs with these inputs).
"""

from __future__ import annotations

import argparse
import inspect
import os
import random

import numpy as np
import torch
import transformers

# Attribute -> small value; set on a config (and its sub-configs) only where the config has that attribute.
# hidden 32 with 2 heads of 16; every odd size (37) catches shape bugs where two sizes are confused.
SMALL = {
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "intermediate_size": 37,
    "d_model": 32,
    "d_ff": 37,
    "d_kv": 16,
    "num_layers": 2,
    "num_decoder_layers": 2,
    "num_heads": 2,
    "encoder_layers": 2,
    "decoder_layers": 2,
    "encoder_attention_heads": 2,
    "decoder_attention_heads": 2,
    "encoder_ffn_dim": 37,
    "decoder_ffn_dim": 37,
    "n_embd": 32,
    "n_layer": 2,
    "n_head": 2,
    "n_inner": 37,
    "dim": 32,
    "hidden_dim": 37,
    "n_layers": 2,
    "n_heads": 2,
    "dff": 37,
    "ffn_dim": 37,
    "word_embed_proj_dim": 32,
    "rotary_dim": 8,
    "attention_types": [[["global", "local"], 1]],
    "vocab_size": 99,
    "max_position_embeddings": 128,
    "max_encoder_position_embeddings": 128,
    "max_decoder_position_embeddings": 128,
    "n_positions": 128,
    "type_vocab_size": 2,
    "embedding_size": 32,
    "use_cache": False,
    # sparse / local attention
    "attention_window": 8,
    "block_size": 4,
    "num_random_blocks": 2,
    # mixtures of experts
    "num_experts": 4,
    "num_local_experts": 4,
    "num_experts_per_tok": 2,
    "moe_intermediate_size": 37,
    "shared_expert_intermediate_size": 37,
    "expert_capacity": 8,
    "num_sparse_encoder_layers": 1,  # Switch: one sparse layer in two (3 of 2 layers would make none sparse)
    "num_sparse_decoder_layers": 1,
    "attn_layer_period": 2,  # Jamba: attention in layer 1, experts in layer 1, Mamba in layer 0
    "attn_layer_offset": 1,
    # audio
    "conv_dim": (16, 16),
    "conv_kernel": (3, 3),
    "conv_stride": (2, 2),
    "num_conv_pos_embeddings": 4,
    "num_conv_pos_embedding_groups": 2,
    "num_mel_bins": 16,
    "input_feat_size": 16,
    "max_source_positions": 32,
    "max_target_positions": 64,
    # vision
    "image_size": 32,
    "patch_size": 8,
    "num_channels": 3,
    "embed_dim": 16,
}
# Attributes whose default is one value per stage or block (vision backbones): the length is kept.
PER_STAGE = {
    "depths": lambda n: [1] * n,
    "num_heads": lambda n: [1] * n,
    "num_attention_heads": lambda n: [1] * n,
    "hidden_sizes": lambda n: [16 * 2**i for i in range(n)],
}
# Every how many layers a layer is sparse (mixtures of experts): at most 2 here, so that 2 layers hold one.
CAPPED = {"encoder_sparse_step": 2, "decoder_sparse_step": 2, "expert_layer_period": 2}
# Grouped matmuls of mixture-of-experts layers need 16-byte strides: an expert width of 37 floats has not.
EXPERT_WIDTH = {"intermediate_size": 48, "moe_intermediate_size": 48, "shared_expert_intermediate_size": 48}
BATCH, SEQ, AUDIO, FRAMES, PIXELS = 2, 20, 1600, 64, 32


def small_config(config_cls: type) -> transformers.PretrainedConfig:
    """The config with every SMALL attribute it has; sub-configs (text_config, ...) made small the same way."""
    base = config_cls()
    kw = {}
    for k, v in SMALL.items():
        if not hasattr(base, k) or isinstance(getattr(type(base), k, None), property):  # a derived value
            continue
        default = getattr(base, k)
        if isinstance(default, (list, tuple)) and not isinstance(v, (list, tuple)):
            continue  # a scalar where the model wants one per stage: PER_STAGE below, or left as it is
        kw[k] = v
    for k, cap in CAPPED.items():
        if isinstance(getattr(base, k, None), int) and getattr(base, k) > cap:
            kw[k] = cap
    stages = 2 if hasattr(base, "num_stages") else None  # ConvNeXt-like: two stages; else the default count
    if stages:
        kw["num_stages"] = stages
    for k, per_stage in PER_STAGE.items():
        if isinstance(getattr(base, k, None), (list, tuple)):
            kw[k] = per_stage(stages or len(getattr(base, k)))
    if any(getattr(base, k, None) for k in ("num_experts", "num_local_experts")):
        kw.update({k: v for k, v in EXPERT_WIDTH.items() if hasattr(base, k)})
    vocab = kw.get("vocab_size", getattr(base, "vocab_size", None))
    for k, v in vars(base).items():  # special token ids of the full vocabulary would index past the small one
        if k.endswith("_token_id") and isinstance(v, int) and isinstance(vocab, int) and v >= vocab:
            kw[k] = 1
    for name, sub in vars(base).items():
        if isinstance(sub, transformers.PretrainedConfig):
            kw[name] = small_config(type(sub)).to_dict()
    return config_cls(**kw)


def build(name: str, mode: str = "train") -> torch.nn.Module:
    model_cls = getattr(transformers, name)
    config = small_config(model_cls.config_class)
    model = model_cls(config)
    model.train(mode == "train")
    return model


def make_batch(model: torch.nn.Module, g: torch.Generator) -> dict[str, torch.Tensor]:
    """One batch for the model's main input, from the seeded generator."""
    config = model.config
    accepted = inspect.signature(model.forward).parameters
    main = model.main_input_name
    vocab = getattr(config, "vocab_size", None) or 99
    x: dict[str, torch.Tensor] = {}
    if main == "input_ids":
        x["input_ids"] = torch.randint(0, vocab, (BATCH, SEQ), generator=g)
        if "attention_mask" in accepted:
            # As a tokenizer returns it. Without it some models take another path under compile (Switch's
            # encoder skips building the mask when is_torchdynamo_compiling() and raises while traced).
            x["attention_mask"] = torch.ones(BATCH, SEQ, dtype=torch.long)
    elif main == "input_values":
        x["input_values"] = torch.randn(BATCH, AUDIO, generator=g)
    elif main == "input_features" and hasattr(config, "input_feat_size"):  # Speech2Text: (batch, time, feature)
        x["input_features"] = torch.randn(BATCH, FRAMES, config.input_feat_size, generator=g)
    elif main == "input_features":  # Whisper-like: (batch, mel bins, time)
        x["input_features"] = torch.randn(BATCH, getattr(config, "num_mel_bins", 80), FRAMES, generator=g)
    elif main == "pixel_values":
        size = getattr(config, "image_size", PIXELS)
        size = size if isinstance(size, int) else PIXELS
        x["pixel_values"] = torch.randn(BATCH, getattr(config, "num_channels", 3), size, size, generator=g)
    else:
        raise SystemExit(f"no generic input for main input {main!r} of {type(model).__name__}")
    if "decoder_input_ids" in accepted and getattr(config, "is_encoder_decoder", False):
        x["decoder_input_ids"] = torch.randint(0, vocab, (BATCH, SEQ), generator=g)
    if "use_cache" in accepted:
        x["use_cache"] = False  # type: ignore[assignment]
    return x


def floats(out: object, grad: bool = True) -> list[torch.Tensor]:
    """Every floating tensor (with a gradient, if `grad`) in a model output (ModelOutput, tuple, dict, nested)."""
    if isinstance(out, torch.Tensor):
        return [out] if out.is_floating_point() and (out.requires_grad or not grad) else []
    if isinstance(out, dict):  # ModelOutput is an OrderedDict of its non-None fields
        out = list(out.values())
    if isinstance(out, (list, tuple)):
        return [t for v in out for t in floats(v, grad)]
    return []


def loss_of(out: object, grad: bool = True) -> torch.Tensor:
    parts = floats(out, grad)
    if not parts:
        raise SystemExit("the model returned no floating output" + (" with a gradient" if grad else ""))
    return sum(t.float().pow(2).mean() for t in parts)  # type: ignore[return-value]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", help="a model class exported by transformers, e.g. BertModel")
    ap.add_argument("--mode", choices=("train", "eval"), default="train", help="training steps or an eval loop")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--eager", action="store_true", help="no torch.compile: check that the model builds and runs")
    a = ap.parse_args(argv)
    seed = int(os.environ.get("TORCHMEND_SEED", "0"))  # torchmend's seed for the run (0 outside torchmend)
    torch.manual_seed(seed)
    random.seed(seed)
    np.random.seed(seed)
    model = build(a.model, a.mode)
    step_fn = model if a.eager else torch.compile(model)
    g = torch.Generator().manual_seed(1)
    if a.mode == "eval":
        with torch.no_grad():
            for step in range(a.steps):
                out = loss_of(step_fn(**make_batch(model, g)), grad=False)
                print(f"step {step} output {out.item():.4f}", flush=True)
        return
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for step in range(a.steps):
        loss = loss_of(step_fn(**make_batch(model, g)))
        loss.backward()
        opt.step()
        opt.zero_grad()
        print(f"step {step} loss {loss.item():.4f}", flush=True)


if __name__ == "__main__":
    main()
