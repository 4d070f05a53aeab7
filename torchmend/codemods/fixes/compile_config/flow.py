"""Whether a config switch would remove a break or only move it: where the data-dependent value goes.

`capture_scalar_outputs` keeps `.item()` in the graph as a symbolic number, `capture_dynamic_output_shape_ops`
keeps `nonzero()` in the graph as a tensor of symbolic length. Either helps only while the value then feeds
tensor code (math, sizes, indexing). Python control flow on it (`if`, `and`/`or`, a `for` over its rows,
`len()`, `int()`) still needs the real value: dynamo breaks there instead, so the switch only moves the break.
"""

from __future__ import annotations

import libcst as cst

from torchmend.analysis import UseKind, python_use, reads
from torchmend.analysis.dynamo_tables import DYNAMIC_SHAPE_CALLS
from torchmend.analysis.source import SourceFile
from torchmend.codemods.fixes.expert_loop import loop_rewritten

# The uses of a number that need its real value, where dynamo breaks with the switch on too: control flow, an
# f-string, a Python number's attribute, a builtin, and a dimension or option of a size-taking op. An index and
# the size of a factory or a size keyword take the symbolic number as it is.
_NEEDS_VALUE = frozenset(UseKind) - {UseKind.INDEX, UseKind.FACTORY_SIZE, UseKind.SIZE_KEYWORD}
_PYTHON_CALLS = frozenset(
    {"len", "int", "float", "bool", "round", "list", "tuple", "range", "enumerate", "iter", "zip"}
)
_PYTHON_METHODS = frozenset({"tolist", "item", "__len__", "__iter__", "__bool__"})


def _target_names(stmt: cst.CSTNode) -> list[cst.Name]:
    if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
        return []
    small = stmt.body[0]
    targets: list[cst.BaseExpression] = []
    if isinstance(small, cst.Assign):
        targets = [t.target for t in small.targets]
    elif isinstance(small, cst.AnnAssign):
        targets = [small.target]
    names: list[cst.Name] = []
    for t in targets:
        if isinstance(t, cst.Name):
            names.append(t)
        elif isinstance(t, (cst.Tuple, cst.List)):
            names += [e.value for e in t.elements if isinstance(e.value, cst.Name)]
    return names


def scalar_moves(src: SourceFile, stmt: cst.CSTNode) -> str | None:
    """Where the number made at `stmt` (`flag = t.any().item()`) reaches Python control flow or a builtin,
    in words, or None when it feeds only tensor code as far as the function shows."""
    fn = src.enclosing(stmt, cst.FunctionDef)
    if fn is None:
        return None
    for name in _target_names(stmt):
        uses = [r for r in reads(src, fn, name.value) if src.line_of(r) > src.line_of(stmt)]
        for use in uses:  # inside Python-only code, however much arithmetic comes first (`int(p * n + eps)`)
            why = _python_context(src, use)
            if why:
                return f"`{name.value}` is {why} at line {src.line_of(use)}"
        hit = python_use(src, fn, uses, name.value)
        if hit is not None and hit.kind in _NEEDS_VALUE:
            return f"`{name.value}` is {hit.text} at line {hit.line}"
    return None


def _python_read(src: SourceFile, node: cst.Name) -> str | None:
    parent = src.parents.get(node)
    if isinstance(parent, cst.For) and parent.iter is node:
        return "iterated over by a `for` loop"
    if isinstance(parent, (cst.If, cst.While)) and parent.test is node:
        return "the condition of an `if`/`while`"
    if isinstance(parent, cst.IfExp) and parent.test is node:
        return "the condition of a conditional expression"
    if isinstance(parent, (cst.BooleanOperation, cst.Assert)) or (
        isinstance(parent, cst.UnaryOperation) and isinstance(parent.operator, cst.Not)
    ):
        return "used as a Python truth value"
    if isinstance(parent, cst.Arg):
        call = src.parents.get(parent)
        if isinstance(call, cst.Call) and isinstance(call.func, cst.Name) and call.func.value in _PYTHON_CALLS:
            return f"passed to {call.func.value}()"
    if isinstance(parent, cst.Attribute) and parent.value is node and parent.attr.value in _PYTHON_METHODS:
        return f"turned into Python values (`.{parent.attr.value}()`)"
    return None


def _python_context(src: SourceFile, node: cst.CSTNode) -> str | None:
    """The Python-only construct an expression sits in, up to its statement: a builtin that needs a real
    number (`int(...)`, `range(...)`), or a truth test (`if`, `and`/`or`, `not`)."""
    child = node
    for parent in src.ancestors(node):
        if isinstance(parent, (cst.BaseSmallStatement, cst.BaseCompoundStatement)) and not isinstance(
            parent, (cst.If, cst.While)
        ):
            return None
        if isinstance(parent, cst.Call) and isinstance(parent.func, cst.Name) and parent.func.value in _PYTHON_CALLS:
            return f"passed to {parent.func.value}()"
        if isinstance(parent, (cst.If, cst.While)):
            return "in the condition of an `if`/`while`" if parent.test is child else None
        if isinstance(parent, cst.IfExp) and parent.test is child:
            return "in the condition of a conditional expression"
        if isinstance(parent, cst.BooleanOperation) or (
            isinstance(parent, cst.UnaryOperation) and isinstance(parent.operator, cst.Not)
        ):
            return "used as a Python truth value"
        child = parent
    return None


def _dynamic_shape_value(src: SourceFile, value: cst.BaseExpression) -> bool:
    """`x.nonzero()`, `torch.nonzero(x)`, `torch.where(mask)` (one argument), `x.unique()` ... in `value`."""
    for call in src.nodes_in(value, cst.Call):
        func = call.func
        leaf = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
        if leaf in DYNAMIC_SHAPE_CALLS:
            return True
        if leaf == "where" and len(call.args) == 1:
            return True
    return False


def shape_moves(src: SourceFile, stmt: cst.CSTNode) -> str | None:
    """Where a tensor of data-dependent length made at `stmt` (`hit = mask.nonzero()`) meets Python control
    flow, or where `stmt` itself sits inside a loop over such a tensor, in words; None when neither."""
    fn = src.enclosing(stmt, cst.FunctionDef)
    if fn is None:
        return None
    for name in _target_names(stmt):
        for r in reads(src, fn, name.value):
            if src.line_of(r) < src.line_of(stmt):
                continue
            why = _python_read(src, r)
            if why:
                return f"`{name.value}` is {why} at line {src.line_of(r)}"
    for loop in src.ancestors(stmt):
        if isinstance(loop, cst.FunctionDef):
            break
        if not isinstance(loop, cst.For) or not isinstance(loop.iter, cst.Name):
            continue
        if loop_rewritten(src, loop):
            continue  # the loop over nonzero()'s rows becomes a loop over range(n) (fixes/expert_loop.py)
        for ref in src.referents(loop.iter):
            value = src.assigned_value(ref)
            if value is not None and _dynamic_shape_value(src, value):
                return (
                    f"line {src.line_of(stmt)} runs inside the `for` loop over `{loop.iter.value}` "
                    f"(line {src.line_of(loop)}), whose length depends on the data"
                )
    return None
