"""What to do by hand for a graph break PyTorch names by its GB id (when no codemod fixes the finding's rule)."""

from __future__ import annotations

# What to do by hand for a graph break PyTorch names by its GB id, when no codemod fixes the finding's rule: more
# precise than the rule's advice for shapes real model code has (issue 26).
GB_ADVICE: dict[str, str] = {
    "GB0264": (
        "a `torch.nn.Parameter` (or a module such as nn.Linear, which makes them) is built while forward runs, for "
        "example when a model switches its attention implementation on the fly; build it in `__init__` (or once, "
        "before torch.compile) and only use it in forward: a parameter made in forward is also new on every call "
        "and the optimizer never sees it"
    ),
    # By the library function the break is in, where one id has several shapes: `Module._apply` (a submodule cast
    # or moved in forward) and a module's `__init__` (a module built in forward).
    "GB0264 _apply": (
        "forward casts or moves a submodule (`self.m = self.m.to(dtype)`, `.float()`): where that changes a parameter, "
        "nn.Module._apply builds a new nn.Parameter for it, which dynamo cannot trace; cast the model once before "
        "torch.compile (`model.to(dtype)`) and drop the line from forward, or gate it with "
        "`if not torch.compiler.is_compiling():` when the model is already cast"
    ),
    "GB0264 __init__": (
        "forward builds a module (nn.Linear and the like make new nn.Parameters), for example when a model switches "
        "its attention implementation on the fly (a `set_attention_type(...)` call in forward): choose that path "
        "before torch.compile, by calling the switch once on the model or setting the config value that selects it "
        "(e.g. `attention_type`), so that forward finds the layers built; a parameter made in forward is also new "
        "on every call and the optimizer never sees it"
    ),
    "GB0098": (
        "the called function is wrapped in torch.compiler.disable, so it runs in Python between two graphs on every "
        "call: remove the decorator if dynamo can trace the function, or move the call out of the compiled region. "
        "Keep it on a helper that draws NumPy or Python random numbers (a SpecAugment mask helper such as "
        "`_compute_mask_indices`; torchmend's TM110 fix puts it there): traced, the draws come from torch's "
        "generator and break the graph more. No rewrite torchmend can make keeps NumPy's stream and removes this "
        "break: what does (measured on torch 2.13, wav2vec2 and SEW-D models, losses and weights equal to the eager "
        "run's) is to make the mask outside the compiled model, in the data collator or the training loop, and pass "
        "it in (transformers' wav2vec2-family models take `mask_time_indices=`), or, where the helper is your code, "
        "to wrap it in a `torch.library.custom_op` whose fake returns a tensor of the mask's shape; either way with "
        "`torch._dynamo.config.capture_dynamic_output_shape_ops = True` before the compile call, since the boolean-"
        "mask assignment that applies it (`h[mask] = v`) needs nonzero in its backward once the mask is a tensor the "
        "graph receives"
    ),
    "GB4347": (
        "next() on a dict key iterator that dynamo did not create: a comprehension (`{k: ... for k in d}`) compiled "
        "as a frame of its own, handed the iterator by its enclosing function, which dynamo skipped because of "
        "another graph break in it ('Skipping the function and falling back to eager'); fix that break first and "
        "the comprehension is traced inline again"
    ),
    "GB8985": (
        "a tensor made an autograd leaf with requires_grad_() inside compiled code is returned: if the caller "
        "only needs its values, drop requires_grad_() or `.detach()` it; if it needs the gradient, create the "
        "tensor outside the compiled region and pass it in"
    ),
}


def gb_advice(gb_id: str | None, function: str = "") -> str | None:
    """The advice for a graph break by its GB id, by the library function it is in first (GB_ADVICE's "ID function"
    keys), else by the id alone."""
    return GB_ADVICE.get(f"{gb_id} {function}") or GB_ADVICE.get(gb_id or "")
