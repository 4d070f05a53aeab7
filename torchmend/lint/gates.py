"""Tests that decide what runs. One that asks whether it runs compiled: lint neither checks nor follows what it
guards, since which branch dynamo takes is not for a static reading to guess (transformers' `if not is_tracing(x)
and ...:` is skipped under compile by design). One that reads a setting (`if self.layerdrop > 0.0:`): what it
guards is reported as possible, since many configurations never run it."""

from __future__ import annotations

import libcst as cst

from torchmend.analysis import Kind, builtin_or_math, values
from torchmend.analysis.source import SourceFile

_GATES = ("is_compiling", "is_dynamo_compiling", "is_torchdynamo_compiling", "is_tracing", "is_fx_tracing")


def is_compiling(src: SourceFile, call: cst.Call) -> bool:
    """A call that tells compiled code from eager (`torch.compiler.is_compiling()`, transformers'
    `is_torchdynamo_compiling()` and `is_tracing(x)`); torch.jit.is_tracing() is False under dynamo."""
    names = src.qualified_names(call.func) or {src.code(call.func)}
    return any(q.rsplit(".", 1)[-1] in _GATES and q != "torch.jit.is_tracing" for q in names)


def compile_gated(src: SourceFile, node: cst.CSTNode) -> bool:
    """Inside an `if` (or a conditional expression, or an `and`/`or`) of the same def whose test asks whether it
    runs compiled: which branch dynamo takes is not for lint to guess, so neither is checked."""
    for anc in src.ancestors(node):
        if isinstance(anc, cst.FunctionDef):
            return False
        test = anc.test if isinstance(anc, (cst.If, cst.IfExp, cst.While)) else None
        if isinstance(anc, cst.BooleanOperation):
            test = anc
        if test is not None and any(is_compiling(src, c) for c in src.nodes_in(test, cst.Call)):
            return True
    return False


def setting(src: SourceFile, node: cst.CSTNode) -> cst.BaseExpression | None:
    """The test of an enclosing `if` (same def) that reads a setting: plain attributes and numbers, no tensor,
    no call but a builtin's, and something other than `self.training` (which holds all through training)."""
    for anc in src.ancestors(node):
        if isinstance(anc, cst.FunctionDef):
            return None
        if not isinstance(anc, cst.If) or node is anc:
            continue
        test = anc.test
        attrs = [a.attr.value for a in src.nodes_in(test, cst.Attribute)]
        calls = src.nodes_in(test, cst.Call)
        if (
            attrs
            and set(attrs) != {"training"}
            and not any(builtin_or_math(src, c.func) is None for c in calls)
            and not src.nodes_in(test, cst.Subscript)
            and values(src).kind(test) is not Kind.TENSOR
        ):
            return test
    return None
