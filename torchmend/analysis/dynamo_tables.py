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
