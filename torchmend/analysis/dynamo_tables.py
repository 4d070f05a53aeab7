"""Tables of the compiler's own API: the `is_compiling()` spellings, the `mark_dynamic` family, and the operators
dynamo traces only when configured to (data-dependent output shapes, scalar outputs).

Shared by the fixes and the analysis.
"""

from __future__ import annotations

IS_COMPILING = {
    "torch.compiler.is_compiling",
    "torch.compiler.is_dynamo_compiling",
    "torch._dynamo.is_compiling",
    "torch._utils.is_compiling",
}

MARK_DYNAMIC = {
    "torch._dynamo.mark_dynamic",
    "torch._dynamo.maybe_mark_dynamic",
    "torch._dynamo.mark_unbacked",
    "torch._dynamo.decorators.mark_dynamic",
    "torch._dynamo.decorators.maybe_mark_dynamic",
    "torch._dynamo.decorators.mark_unbacked",
}

# Operators whose output shape depends on the data (aten names, as PyTorch's "Dynamic shape operator" breaks and
# backend failures name them): traced only with `torch._dynamo.config.capture_dynamic_output_shape_ops = True`.
DYNAMIC_SHAPE_OPS = frozenset(
    {"nonzero", "masked_select", "unique", "_unique", "_unique2", "unique_dim", "unique_consecutive", "argwhere"}
)
# Operators that read a tensor's value into a Python number: traced with `capture_scalar_outputs = True`.
SCALAR_OUTPUT_OPS = frozenset({"item", "_local_scalar_dense"})
# Calls in Python source that make a tensor of data-dependent shape (`torch.where(mask)` with one argument too).
DYNAMIC_SHAPE_CALLS = frozenset({"nonzero", "masked_select", "unique", "unique_consecutive", "argwhere"})

# What a release's dynamo skips or breaks on that a later one compiles, with the first release that compiles it
# (`torchmend lint` judges the source for a release: analysis/source.py's `torch_version`). Recorded on 2.11 (the
# zoo's scans, benchmarks/results/zoo-*-torch2.11-*) and measured on 2.13.0, 2.14.1 and 2.15.0 (aot_eager, breaks
# counted); 2.12 was not measured and is taken to be 2.11.
# A function marked as skipped (GB0007, scan's TM105): 2.11 "intentionally marked that the function `copy` in file
# copy.py should not be traced"; `copy.copy` of a config object compiles in one graph from 2.13.
SKIPPED_BEFORE = {"copy.copy": (2, 13)}
# `self.buf = self.buf.to(device, dtype)` in forward, `buf` a registered buffer: 2.11 breaks inside
# `Module.register_buffer` (GB0170, scan's TM103); a submodule cast the same way (`self.m = self.m.to(dtype)`)
# breaks inside `Module._apply` (GB0264, TM199). From 2.13 neither breaks when the cast changes nothing.
MODULE_STATE_CAST_FROM = (2, 13)
