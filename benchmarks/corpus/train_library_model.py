"""Generic corpus training script of the second zoo: one model of a library other than `transformers`, built from
its constructor or config at a tiny size (random weights, nothing downloaded), run a few steps under
`torch.compile` in one of two modes:

    python train_library_model.py torchvision:resnet18 [--mode train|eval] [--steps 3] [--eager]

The model is named `LIBRARY:NAME`, LIBRARY the package's import name (torchvision, timm, torch_geometric,
diffusers, vit_pytorch, x_transformers, torchaudio) and NAME what that library calls it: a torchvision or timm
model name, a torch_geometric class (`GCN`, `GATConv`), a diffusers class, a vit_pytorch `module.Class`
(`cait.CaiT`), or one of the x_transformers configurations named in X_TRANSFORMERS below.

train (the default): `model.train()`, forward, backward and an AdamW step per step. eval: `model.eval()` and the
forward alone under `torch.no_grad()`; each step prints the mean square of the outputs. The loss is the mean
square of every floating output that carries a gradient (a detection model's loss dict in train mode, a diffusion
model's sample, a graph net's node embeddings), so every such output is trained.

Like train_model.py, the driver (run.py) copies this file into a scratch project, beside copies of the libraries
in the vendored use, so the import finds the copy (the script's folder comes first on sys.path).

Exit 3 with "library not installed" when LIBRARY cannot be imported: run.py records that apart from a driver error
(torchaudio, for one, is not installable beside every torch). Seeded: torch, random, numpy. Downloads are refused
(torch.hub raises), so a builder that would fetch pretrained weights fails loudly instead of downloading.
`--eager` runs without torch.compile (the driver's check that the model builds and runs with these inputs).
"""

from __future__ import annotations

import argparse
import importlib
import os
import random
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

NOT_INSTALLED = 3  # run.py's "library not installed" (torchmend's own exit codes are 0, 1, 2, 4, 5, 8, 9, 10)
BATCH, CLASSES = 2, 10
NODES, EDGES, FEATURES, EDGE_FEATURES = 20, 60, 16, 4  # one small random graph


@dataclass
class Case:
    """A built model and how to call it: `inputs(g, train)` gives (args, kwargs) of one step."""

    model: nn.Module
    inputs: Callable[[torch.Generator, bool], tuple[tuple, dict]]


def images(size: int, channels: int = 3) -> Callable[[torch.Generator, bool], tuple[tuple, dict]]:
    return lambda g, train: ((torch.randn(BATCH, channels, size, size, generator=g),), {})


def _no_download(*_: object, **__: object) -> None:
    raise RuntimeError("train_library_model.py builds models with random weights: nothing is downloaded")


# ------------------------------------------------------------------------------------------------- torchvision

# Input size per model where 64 pixels do not fit (Inception's stem, MaxViT's 7x7 partitions, SSDlite's fixed 320).
# RAFT's correlation pyramid wants feature maps of 16 at 1/8 of the input.
TV_SIZE = {
    "inception_v3": 96,
    "maxvit_t": 224,
    "ssdlite320_mobilenet_v3_large": 320,
    "ssd300_vgg16": 300,
    "raft_small": 128,
}
TV_KW: dict[str, dict] = {
    "inception_v3": {"aux_logits": False, "init_weights": True},
    "googlenet": {"init_weights": True},
    "vit_b_16": {"image_size": 64},
}


def torchvision_case(name: str) -> Case:
    import torchvision

    kind = {
        m: k
        for k in ("detection", "segmentation", "video", "optical_flow")
        for m in torchvision.models.list_models(getattr(torchvision.models, k))
    }.get(name, "classification")
    size = TV_SIZE.get(name, 64)
    kw = dict(TV_KW.get(name, {}), weights=None)
    if kind in ("detection", "segmentation"):
        kw.update(weights_backbone=None, num_classes=3)  # their backbones default to ImageNet weights
        if kind == "detection" and not name.startswith("ssd"):
            kw.update(min_size=size, max_size=size)  # R-CNN, RetinaNet, FCOS resize to 800 by default
        if kind == "segmentation" and not name.startswith("lraspp"):
            kw["aux_loss"] = False
    elif kind != "optical_flow":
        kw["num_classes"] = CLASSES
    model = torchvision.models.get_model(name, **kw)
    if kind == "detection":

        def detection(g: torch.Generator, train: bool) -> tuple[tuple, dict]:
            imgs = [torch.rand(3, size, size, generator=g) for _ in range(BATCH)]
            if not train:
                return (imgs,), {}
            targets = []
            for _ in range(BATCH):
                lo = torch.rand(1, 2, generator=g) * size / 2
                t = {"boxes": torch.cat([lo, lo + size / 4], dim=1), "labels": torch.tensor([1])}
                if "mask" in name:
                    t["masks"] = torch.zeros(1, size, size, dtype=torch.uint8)
                    t["masks"][0, size // 4 : size // 2, size // 4 : size // 2] = 1
                if "keypoint" in name:
                    t["keypoints"] = torch.cat([lo.repeat(17, 1) + size / 8, torch.ones(17, 1)], dim=1)[None]
                targets.append(t)
            return (imgs, targets), {}

        return Case(model, detection)
    if kind == "video":  # (batch, channels, frames, height, width)
        return Case(model, lambda g, train: ((torch.randn(BATCH, 3, 8, size, size, generator=g),), {}))
    if kind == "optical_flow":  # RAFT: two frames; 2 refinement steps instead of 12
        two = lambda g, train: (  # noqa: E731
            (torch.randn(BATCH, 3, size, size, generator=g), torch.randn(BATCH, 3, size, size, generator=g)),
            {"num_flow_updates": 2},
        )
        return Case(model, two)
    return Case(model, images(size))


# ------------------------------------------------------------------------------------------------- timm

# timm's test_* models are tiny by design (its own test suite's); the others get a small image where they take one.
TIMM_KW: dict[str, dict] = {
    "vit_tiny_patch16_224": {"img_size": 64},
    "deit_tiny_patch16_224": {"img_size": 64},
    "swin_tiny_patch4_window7_224": {"img_size": 64, "window_size": 2},
    "levit_128s": {"img_size": 64},
    "xcit_nano_12_p16_224": {"img_size": 64},
    "mobilevit_xxs": {},
    "efficientvit_m0": {"img_size": 64},
    "pit_ti_224": {"img_size": 64},
    "crossvit_tiny_240": {"img_size": [48, 64]},
    "beit_base_patch16_224": {"img_size": 64, "depth": 2},
    "eva02_tiny_patch14_224": {"img_size": 56},
    "mixer_s16_224": {"img_size": 64},
}


def timm_case(name: str) -> Case:
    import timm

    model = timm.create_model(name, pretrained=False, num_classes=CLASSES, **TIMM_KW.get(name, {}))
    kw = TIMM_KW.get(name, {})
    size = kw.get("img_size") or (160 if name.startswith("test_") else 64)
    size = max(size) if isinstance(size, list) else size
    return Case(model, images(size))


# ------------------------------------------------------------------------------------------------- torch_geometric


def graph(g: torch.Generator) -> dict[str, torch.Tensor]:
    """A random graph of NODES nodes (two graphs of a batch: the halves), edges within each half."""
    half = NODES // 2
    src = torch.randint(0, half, (EDGES,), generator=g) + torch.arange(EDGES) % 2 * half
    dst = torch.randint(0, half, (EDGES,), generator=g) + torch.arange(EDGES) % 2 * half
    return {
        "x": torch.randn(NODES, FEATURES, generator=g),
        "edge_index": torch.stack([src, dst]),
        "edge_attr": torch.randn(EDGES, EDGE_FEATURES, generator=g),
        "batch": torch.arange(NODES) // half,
        "z": torch.randint(1, 10, (NODES,), generator=g),
        "pos": torch.randn(NODES, 3, generator=g),
    }


def mlp(i: int, o: int) -> nn.Module:
    return nn.Sequential(nn.Linear(i, 37), nn.ReLU(), nn.Linear(37, o))


HIDDEN = 32
BASIC = {"in_channels": FEATURES, "hidden_channels": HIDDEN, "num_layers": 2, "out_channels": 7}
# name -> (constructor kwargs, the graph's fields its forward takes, in order). A callable builds what a plain
# dict cannot (an inner network, a degree histogram).
PYG: dict[str, tuple[Callable[[Any], dict] | dict, tuple[str, ...]]] = {
    "GCN": (BASIC, ("x", "edge_index")),
    "GraphSAGE": (BASIC, ("x", "edge_index")),
    "GIN": (BASIC, ("x", "edge_index")),
    "GAT": (BASIC, ("x", "edge_index")),
    "EdgeCNN": (BASIC, ("x", "edge_index")),
    "PNA": (
        lambda nnm: dict(
            BASIC, aggregators=["mean", "max"], scalers=["identity", "amplification"], deg=torch.tensor([0, 4, 8, 6, 2])
        ),
        ("x", "edge_index"),
    ),
    "AttentiveFP": (
        {
            "in_channels": FEATURES,
            "hidden_channels": HIDDEN,
            "out_channels": 7,
            "edge_dim": EDGE_FEATURES,
            "num_layers": 2,
            "num_timesteps": 2,
        },
        ("x", "edge_index", "edge_attr", "batch"),
    ),
    "GraphUNet": (
        {"in_channels": FEATURES, "hidden_channels": HIDDEN, "out_channels": 7, "depth": 2},
        ("x", "edge_index"),
    ),
    "LINKX": (
        {"num_nodes": NODES, "in_channels": FEATURES, "hidden_channels": HIDDEN, "out_channels": 7, "num_layers": 2},
        ("x", "edge_index"),
    ),
    "MLP": ({"channel_list": [FEATURES, HIDDEN, 7]}, ("x",)),
    "PMLP": (
        {"in_channels": FEATURES, "hidden_channels": HIDDEN, "out_channels": 7, "num_layers": 2},
        ("x", "edge_index"),
    ),
    "SGFormer": (
        {"in_channels": FEATURES, "hidden_channels": HIDDEN, "out_channels": 7, "gnn_num_layers": 2},
        ("x", "edge_index", "batch"),
    ),
    "Polynormer": (
        {"in_channels": FEATURES, "hidden_channels": HIDDEN, "out_channels": 7, "local_layers": 2, "global_layers": 1},
        ("x", "edge_index", "batch"),
    ),
    "RECT_L": ({"in_channels": FEATURES, "hidden_channels": HIDDEN}, ("x", "edge_index")),
    "SchNet": (
        {"hidden_channels": HIDDEN, "num_filters": HIDDEN, "num_interactions": 2, "num_gaussians": 10, "cutoff": 5.0},
        ("z", "pos", "batch"),
    ),
    "ViSNet": (
        {"hidden_channels": HIDDEN, "num_layers": 2, "num_rbf": 8, "num_heads": 2, "cutoff": 5.0},
        ("z", "pos", "batch"),
    ),
    "GCNConv": ({"in_channels": FEATURES, "out_channels": HIDDEN}, ("x", "edge_index")),
    "SAGEConv": ({"in_channels": FEATURES, "out_channels": HIDDEN}, ("x", "edge_index")),
    "GATConv": ({"in_channels": FEATURES, "out_channels": HIDDEN, "heads": 2}, ("x", "edge_index")),
    "GATv2Conv": (
        {"in_channels": FEATURES, "out_channels": HIDDEN, "heads": 2, "edge_dim": EDGE_FEATURES},
        ("x", "edge_index", "edge_attr"),
    ),
    "TransformerConv": ({"in_channels": FEATURES, "out_channels": HIDDEN, "heads": 2}, ("x", "edge_index")),
    "GINConv": (lambda nnm: {"nn": mlp(FEATURES, HIDDEN)}, ("x", "edge_index")),
    "GINEConv": (
        lambda nnm: {"nn": mlp(FEATURES, HIDDEN), "edge_dim": EDGE_FEATURES},
        ("x", "edge_index", "edge_attr"),
    ),
    "EdgeConv": (lambda nnm: {"nn": mlp(2 * FEATURES, HIDDEN)}, ("x", "edge_index")),
    "NNConv": (
        lambda nnm: {"in_channels": FEATURES, "out_channels": 8, "nn": mlp(EDGE_FEATURES, FEATURES * 8)},
        ("x", "edge_index", "edge_attr"),
    ),
    "ChebConv": ({"in_channels": FEATURES, "out_channels": HIDDEN, "K": 2}, ("x", "edge_index")),
    "GENConv": ({"in_channels": FEATURES, "out_channels": HIDDEN}, ("x", "edge_index")),
    "TAGConv": ({"in_channels": FEATURES, "out_channels": HIDDEN, "K": 2}, ("x", "edge_index")),
    "ResGatedGraphConv": ({"in_channels": FEATURES, "out_channels": HIDDEN}, ("x", "edge_index")),
    "CGConv": ({"channels": FEATURES, "dim": EDGE_FEATURES}, ("x", "edge_index", "edge_attr")),
}


def torch_geometric_case(name: str) -> Case:
    import torch_geometric.nn as pyg_nn

    spec, fields = PYG[name]
    kw = spec(pyg_nn) if callable(spec) else spec
    model = getattr(pyg_nn, name)(**kw)
    return Case(model, lambda g, train: (tuple(graph(g)[f] for f in fields), {}))


# ------------------------------------------------------------------------------------------------- diffusers

_BLOCKS = {"block_out_channels": (32, 64), "norm_num_groups": 32, "layers_per_block": 1}
_VAE = dict(
    _BLOCKS,
    in_channels=3,
    out_channels=3,
    down_block_types=["DownEncoderBlock2D"] * 2,
    up_block_types=["UpDecoderBlock2D"] * 2,
)


def _t(g: torch.Generator) -> torch.Tensor:
    return torch.randint(0, 1000, (BATCH,), generator=g)


def _r(g: torch.Generator, *shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=g)


# name -> (config kwargs, inputs(g) -> forward kwargs); the small configs of diffusers' own model tests.
DIFFUSERS: dict[str, tuple[dict, Callable[[torch.Generator], dict]]] = {
    "UNet2DModel": (
        dict(
            _BLOCKS,
            sample_size=16,
            in_channels=3,
            out_channels=3,
            attention_head_dim=8,
            down_block_types=("DownBlock2D", "AttnDownBlock2D"),
            up_block_types=("AttnUpBlock2D", "UpBlock2D"),
        ),
        lambda g: {"sample": _r(g, BATCH, 3, 16, 16), "timestep": _t(g)},
    ),
    "UNet2DConditionModel": (
        dict(
            _BLOCKS,
            sample_size=16,
            in_channels=4,
            out_channels=4,
            cross_attention_dim=32,
            attention_head_dim=8,
            down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
            up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"),
        ),
        lambda g: {"sample": _r(g, BATCH, 4, 16, 16), "timestep": _t(g), "encoder_hidden_states": _r(g, BATCH, 7, 32)},
    ),
    "ControlNetModel": (
        dict(
            _BLOCKS,
            in_channels=4,
            cross_attention_dim=32,
            attention_head_dim=8,
            conditioning_embedding_out_channels=(16, 32),
            down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
        ),
        lambda g: {
            "sample": _r(g, BATCH, 4, 16, 16),
            "timestep": _t(g),
            "encoder_hidden_states": _r(g, BATCH, 7, 32),
            "controlnet_cond": _r(g, BATCH, 3, 32, 32),
        },
    ),
    "AutoencoderKL": (dict(_VAE, latent_channels=4), lambda g: {"sample": _r(g, BATCH, 3, 32, 32)}),
    "VQModel": (dict(_VAE, latent_channels=3), lambda g: {"sample": _r(g, BATCH, 3, 32, 32)}),
    "AutoencoderTiny": (
        {
            "encoder_block_out_channels": (32, 32),
            "decoder_block_out_channels": (32, 32),
            "num_encoder_blocks": (1, 2),
            "num_decoder_blocks": (2, 1),
        },
        lambda g: {"sample": _r(g, BATCH, 3, 32, 32)},
    ),
    "DiTTransformer2DModel": (
        {
            "num_attention_heads": 2,
            "attention_head_dim": 16,
            "in_channels": 4,
            "out_channels": 8,
            "num_layers": 2,
            "sample_size": 8,
            "patch_size": 2,
            "num_embeds_ada_norm": 1000,
        },
        lambda g: {
            "hidden_states": _r(g, BATCH, 4, 8, 8),
            "timestep": _t(g),
            "class_labels": torch.randint(0, 10, (BATCH,), generator=g),
        },
    ),
    "PixArtTransformer2DModel": (
        {
            "sample_size": 8,
            "num_layers": 2,
            "patch_size": 2,
            "attention_head_dim": 8,
            "num_attention_heads": 3,
            "caption_channels": 32,
            "in_channels": 4,
            "cross_attention_dim": 24,
            "out_channels": 8,
            "attention_bias": True,
            "num_embeds_ada_norm": 8,
            "use_additional_conditions": False,
        },
        lambda g: {
            "hidden_states": _r(g, BATCH, 4, 8, 8),
            "timestep": _t(g),
            "encoder_hidden_states": _r(g, BATCH, 7, 32),
        },
    ),
    "SD3Transformer2DModel": (
        {
            "sample_size": 8,
            "patch_size": 1,
            "in_channels": 4,
            "num_layers": 1,
            "attention_head_dim": 8,
            "num_attention_heads": 4,
            "caption_projection_dim": 32,
            "joint_attention_dim": 32,
            "pooled_projection_dim": 64,
            "out_channels": 4,
        },
        lambda g: {
            "hidden_states": _r(g, BATCH, 4, 8, 8),
            "timestep": _t(g),
            "encoder_hidden_states": _r(g, BATCH, 7, 32),
            "pooled_projections": _r(g, BATCH, 64),
        },
    ),
    "FluxTransformer2DModel": (
        {
            "patch_size": 1,
            "in_channels": 4,
            "num_layers": 1,
            "num_single_layers": 1,
            "attention_head_dim": 16,
            "num_attention_heads": 2,
            "joint_attention_dim": 32,
            "pooled_projection_dim": 32,
            "axes_dims_rope": [4, 4, 8],
        },
        lambda g: {
            "hidden_states": _r(g, BATCH, 16, 4),
            "timestep": _t(g).float() / 1000,
            "encoder_hidden_states": _r(g, BATCH, 7, 32),
            "pooled_projections": _r(g, BATCH, 32),
            "img_ids": torch.randn(16, 3, generator=g),
            "txt_ids": torch.randn(7, 3, generator=g),
        },
    ),
    "PriorTransformer": (
        {
            "num_attention_heads": 2,
            "attention_head_dim": 4,
            "num_layers": 2,
            "embedding_dim": 8,
            "num_embeddings": 7,
            "additional_embeddings": 4,
        },
        lambda g: {
            "hidden_states": _r(g, BATCH, 8),
            "timestep": _t(g),
            "proj_embedding": _r(g, BATCH, 8),
            "encoder_hidden_states": _r(g, BATCH, 7, 8),
        },
    ),
}


def diffusers_case(name: str) -> Case:
    import diffusers

    config, inputs = DIFFUSERS[name]
    model = getattr(diffusers, name)(**config)
    return Case(model, lambda g, train: ((), inputs(g)))


# ------------------------------------------------------------------------------------------------- vit_pytorch

_VIT = {"image_size": 32, "patch_size": 8, "num_classes": CLASSES, "dim": 32, "depth": 2, "heads": 2, "mlp_dim": 37}
# `module.Class` of vit_pytorch -> kwargs (the small ViT's where the class takes them).
VIT_PYTORCH: dict[str, dict] = {
    "vit.ViT": dict(_VIT, dim_head=16, dropout=0.1, emb_dropout=0.1),
    "simple_vit.SimpleViT": dict(_VIT, dim_head=16),
    "simple_vit_with_register_tokens.SimpleViT": dict(_VIT, dim_head=16, num_register_tokens=2),
    "simple_vit_with_patch_dropout.SimpleViT": dict(_VIT, dim_head=16, patch_dropout=0.5),
    "vit_with_patch_dropout.ViT": dict(_VIT, dim_head=16, patch_dropout=0.25),
    "deepvit.DeepViT": dict(_VIT, dropout=0.1, emb_dropout=0.1),
    "cait.CaiT": dict(_VIT, cls_depth=1, dropout=0.1, emb_dropout=0.1, layer_dropout=0.1),
    "pit.PiT": dict(_VIT, depth=(1, 1), dim_head=16),
    "t2t.T2TViT": {
        "dim": 32,
        "image_size": 32,
        "depth": 2,
        "heads": 2,
        "mlp_dim": 37,
        "num_classes": CLASSES,
        "t2t_layers": ((7, 4), (3, 2), (3, 2)),
    },
    "cct.CCT": {
        "img_size": 32,
        "embedding_dim": 32,
        "n_conv_layers": 1,
        "kernel_size": 3,
        "stride": 2,
        "padding": 1,
        "pooling_kernel_size": 3,
        "pooling_stride": 2,
        "pooling_padding": 1,
        "num_layers": 2,
        "num_heads": 2,
        "mlp_ratio": 1.0,
        "num_classes": CLASSES,
    },
    "max_vit.MaxViT": {
        "num_classes": CLASSES,
        "dim_conv_stem": 16,
        "dim": 16,
        "dim_head": 8,
        "depth": (1, 1),
        "window_size": 4,
    },
    "nest.NesT": {
        "image_size": 32,
        "patch_size": 4,
        "dim": 32,
        "heads": 2,
        "num_hierarchies": 2,
        "block_repeats": (1, 1),
        "num_classes": CLASSES,
    },
    "levit.LeViT": {
        "image_size": 64,
        "num_classes": CLASSES,
        "stages": 2,
        "dim": (32, 48),
        "depth": 1,
        "heads": (2, 2),
        "mlp_mult": 2,
    },
    "vit_for_small_dataset.ViT": dict(_VIT, dim_head=16),
    "local_vit.LocalViT": dict(_VIT, dim_head=16),
    "xcit.XCiT": dict(_VIT, cls_depth=1, dim_head=16, local_patch_kernel_size=3, layer_dropout=0.1),
}
VIT_SIZE = {"max_vit.MaxViT": 64, "levit.LeViT": 64}


def vit_pytorch_case(name: str) -> Case:
    module, cls = name.rsplit(".", 1)
    model = getattr(importlib.import_module(f"vit_pytorch.{module}"), cls)(**VIT_PYTORCH[name])
    return Case(model, images(VIT_SIZE.get(name, 32)))


# ------------------------------------------------------------------------------------------------- x_transformers

VOCAB, SEQ = 99, 20


def _tokens(g: torch.Generator, train: bool) -> tuple[tuple, dict]:
    return (torch.randint(0, VOCAB, (BATCH, SEQ), generator=g),), {}


def _x_transformers(name: str) -> Case:
    import x_transformers as xt

    layers = {"dim": 32, "depth": 2, "heads": 2, "attn_dim_head": 16}
    wrap = {"num_tokens": VOCAB, "max_seq_len": 64}
    variants = {
        "decoder": {},
        "decoder_rotary": {"rotary_pos_emb": True},
        "decoder_alibi": {"alibi_pos_bias": True},
        "decoder_ff_glu_macaron": {"ff_glu": True, "macaron": True},
        "decoder_residual_attn": {"residual_attn": True, "pre_norm": False},
        "decoder_shift_tokens": {"shift_tokens": 1},
        "decoder_layer_dropout": {"layer_dropout": 0.2},
    }
    if name in variants:
        return Case(xt.TransformerWrapper(**wrap, attn_layers=xt.Decoder(**layers, **variants[name])), _tokens)
    if name == "encoder":
        return Case(xt.TransformerWrapper(**wrap, attn_layers=xt.Encoder(**layers)), _tokens)
    if name == "decoder_memory_tokens":
        return Case(xt.TransformerWrapper(**wrap, num_memory_tokens=2, attn_layers=xt.Decoder(**layers)), _tokens)
    if name == "autoregressive":  # the wrapper's forward returns the language-model loss
        return Case(xt.AutoregressiveWrapper(xt.TransformerWrapper(**wrap, attn_layers=xt.Decoder(**layers))), _tokens)
    if name == "xtransformer":  # encoder-decoder
        model = xt.XTransformer(
            dim=32,
            enc_num_tokens=VOCAB,
            enc_depth=2,
            enc_heads=2,
            enc_max_seq_len=64,
            dec_num_tokens=VOCAB,
            dec_depth=2,
            dec_heads=2,
            dec_max_seq_len=64,
        )
        two = lambda g, train: ((_tokens(g, train)[0][0], _tokens(g, train)[0][0]), {})  # noqa: E731
        return Case(model, two)
    if name == "continuous":
        model = xt.ContinuousTransformerWrapper(
            dim_in=FEATURES, dim_out=FEATURES, max_seq_len=64, attn_layers=xt.Encoder(**layers)
        )
        return Case(model, lambda g, train: ((torch.randn(BATCH, SEQ, FEATURES, generator=g),), {}))
    if name == "vit":
        model = xt.ViTransformerWrapper(
            image_size=32, patch_size=8, num_classes=CLASSES, attn_layers=xt.Encoder(**layers)
        )
        return Case(model, images(32))
    raise KeyError(name)


X_TRANSFORMERS = (
    "decoder",
    "decoder_rotary",
    "decoder_alibi",
    "decoder_ff_glu_macaron",
    "decoder_residual_attn",
    "decoder_shift_tokens",
    "decoder_layer_dropout",
    "encoder",
    "decoder_memory_tokens",
    "autoregressive",
    "xtransformer",
    "continuous",
    "vit",
)


def x_transformers_case(name: str) -> Case:
    if name not in X_TRANSFORMERS:
        raise KeyError(name)
    return _x_transformers(name)


# ------------------------------------------------------------------------------------------------- torchaudio

AUDIO = 1600


def torchaudio_case(name: str) -> Case:
    """Written for the GPU machine's torchaudio 2.11 (not installable beside torch 2.14.1 here): not run here."""
    from torchaudio import models as am

    wave = lambda g, train: ((torch.randn(BATCH, AUDIO, generator=g),), {})  # noqa: E731
    lengths = torch.full((BATCH,), 20)
    if name == "wav2vec2_model":
        model = am.wav2vec2_model(
            extractor_mode="group_norm",
            extractor_conv_layer_config=[(16, 3, 2), (16, 3, 2)],
            extractor_conv_bias=False,
            encoder_embed_dim=32,
            encoder_projection_dropout=0.1,
            encoder_pos_conv_kernel=4,
            encoder_pos_conv_groups=2,
            encoder_num_layers=2,
            encoder_num_heads=2,
            encoder_attention_dropout=0.1,
            encoder_ff_interm_features=37,
            encoder_ff_interm_dropout=0.1,
            encoder_dropout=0.1,
            encoder_layer_norm_first=False,
            encoder_layer_drop=0.1,
            aux_num_out=CLASSES,
        )
        return Case(model, wave)
    if name == "Conformer":
        model = am.Conformer(input_dim=FEATURES, num_heads=2, ffn_dim=37, num_layers=2, depthwise_conv_kernel_size=3)
        return Case(model, lambda g, train: ((torch.randn(BATCH, 20, FEATURES, generator=g), lengths), {}))
    if name == "Emformer":
        model = am.Emformer(
            input_dim=FEATURES, num_heads=2, ffn_dim=37, num_layers=2, segment_length=4, right_context_length=1
        )
        return Case(model, lambda g, train: ((torch.randn(BATCH, 21, FEATURES, generator=g), lengths), {}))
    if name == "ConvTasNet":
        model = am.ConvTasNet(
            num_sources=2,
            enc_kernel_size=16,
            enc_num_feats=32,
            msk_kernel_size=3,
            msk_num_feats=16,
            msk_num_hidden_feats=32,
            msk_num_layers=2,
            msk_num_stacks=1,
        )
        return Case(model, lambda g, train: ((torch.randn(BATCH, 1, AUDIO, generator=g),), {}))
    if name == "DeepSpeech":
        model = am.DeepSpeech(n_feature=FEATURES, n_hidden=32, n_class=CLASSES)
        return Case(model, lambda g, train: ((torch.randn(BATCH, 1, 20, FEATURES, generator=g),), {}))
    if name == "Wav2Letter":
        model = am.Wav2Letter(num_classes=CLASSES, input_type="mfcc", num_features=FEATURES)
        return Case(model, lambda g, train: ((torch.randn(BATCH, FEATURES, 64, generator=g),), {}))
    if name == "WaveRNN":
        model = am.WaveRNN(
            upsample_scales=[2, 2],
            n_classes=16,
            hop_length=4,
            n_res_block=1,
            n_rnn=32,
            n_fc=32,
            kernel_size=5,
            n_freq=FEATURES,
            n_hidden=16,
            n_output=16,
        )
        return Case(
            model,
            lambda g, train: (
                (torch.randn(BATCH, 1, 24, generator=g), torch.randn(BATCH, 1, FEATURES, 10, generator=g)),
                {},
            ),
        )
    raise KeyError(name)


# ------------------------------------------------------------------------------------------------- the script

CASES: dict[str, Callable[[str], Case]] = {
    "torchvision": torchvision_case,
    "timm": timm_case,
    "torch_geometric": torch_geometric_case,
    "diffusers": diffusers_case,
    "vit_pytorch": vit_pytorch_case,
    "x_transformers": x_transformers_case,
    "torchaudio": torchaudio_case,
}


def build(spec: str, mode: str = "train") -> Case:
    library, _, name = spec.partition(":")
    if library not in CASES or not name:
        raise SystemExit(f"{spec!r}: expected LIBRARY:NAME with LIBRARY one of {', '.join(CASES)}")
    try:  # the library itself; what fails after this import is the driver's (or the model's) doing
        importlib.import_module(library)
    except (ImportError, OSError) as e:  # absent, or installed against another torch (a missing symbol)
        print(f"library not installed: {library} ({type(e).__name__}: {e})", file=sys.stderr)
        raise SystemExit(NOT_INSTALLED) from None
    case = CASES[library](name)
    case.model.train(mode == "train")
    return case


def floats(out: object, grad: bool = True) -> list[torch.Tensor]:
    """Every floating tensor (with a gradient, if `grad`) in an output: tensors, tuples, lists, dicts (diffusers'
    outputs and torchvision's loss dicts are dicts), dataclass-like outputs with a to_tuple()."""
    if isinstance(out, torch.Tensor):
        return [out] if out.is_floating_point() and (out.requires_grad or not grad) else []
    if isinstance(out, dict):
        out = list(out.values())
    elif hasattr(out, "to_tuple"):
        out = out.to_tuple()
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
    ap.add_argument("model", help="LIBRARY:NAME, e.g. torchvision:resnet18, torch_geometric:GCN")
    ap.add_argument("--mode", choices=("train", "eval"), default="train", help="training steps or an eval loop")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--eager", action="store_true", help="no torch.compile: check that the model builds and runs")
    a = ap.parse_args(argv)
    torch.hub.load_state_dict_from_url = _no_download  # type: ignore[assignment]
    torch.hub.download_url_to_file = _no_download  # type: ignore[assignment]
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # timm and diffusers ask the hub only for pretrained weights
    seed = int(os.environ.get("TORCHMEND_SEED", "0"))  # torchmend's seed for the run (0 outside torchmend)
    torch.manual_seed(seed)
    random.seed(seed)
    np.random.seed(seed)
    case = build(a.model, a.mode)
    step_fn = case.model if a.eager else torch.compile(case.model)
    g = torch.Generator().manual_seed(1)
    if a.mode == "eval":
        with torch.no_grad():
            for step in range(a.steps):
                args, kwargs = case.inputs(g, False)
                out = loss_of(step_fn(*args, **kwargs), grad=False)
                print(f"step {step} output {out.item():.4f}", flush=True)
        return
    opt = torch.optim.AdamW(case.model.parameters(), lr=1e-3)
    for step in range(a.steps):
        args, kwargs = case.inputs(g, True)
        loss = loss_of(step_fn(*args, **kwargs))
        loss.backward()
        opt.step()
        opt.zero_grad()
        print(f"step {step} loss {loss.item():.4f}", flush=True)


if __name__ == "__main__":
    main()
