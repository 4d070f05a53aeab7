"""Operators whose output depends on a tensor's data (TM111), and what dynamo does around them.

Without `capture_dynamic_output_shape_ops` (the default through 2.15) dynamo breaks the graph at an operator whose
output *shape* depends on the data: `nonzero()`, `torch.where(mask)` of one argument, `unique()`,
`masked_select()`, `argwhere()`, `repeat_interleave` with a tensor of repeats, and reading a tensor through a
boolean mask (`x[mask]`, `x[mask] += y`); and at `.tolist()`, which reads a tensor into Python numbers inside an
operator (scan files all of these as TM111, by PyTorch's GB0036 / GB0033). Measured on 2.13.0, 2.14.1 and 2.15.0
(breaks counted): every one of them breaks, while `repeat_interleave(2)` does not; a plain store `x[mask] = y`
is traced by dynamo (a backend may still fail on it, TM106, which only a run shows) and is not reported.

A tensor method called on an argument that breaks (`h.masked_scatter(m, norm(h[m]))`) breaks a second time: dynamo
loads the bound method before its arguments, and the frame it resumes in after the break holds it as a builtin it
skips (GB0007, scan's TM105), on 2.11 (recorded) and 2.13–2.15 (measured); a `torch.` function in the same place
does not (`torch.cat([x, x[m]])`)."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from torchmend.analysis import match as m
from torchmend.analysis import values
from torchmend.analysis.dynamo_tables import DYNAMIC_SHAPE_CALLS
from torchmend.analysis.source import SourceFile
from torchmend.model import Confidence

LIKELY = Confidence.LIKELY
_MASK_FUNCS = {"isnan", "isinf", "isfinite", "isneginf", "isposinf", "logical_and", "logical_or", "logical_not"}
_MASK_FUNCS |= {"logical_xor", "eq", "ne", "gt", "lt", "ge", "le", "greater", "less", "isin", "bool"}
# methods that keep a mask a mask: its shape or device changes, not its dtype
_KEEPS_MASK = {"to", "unsqueeze", "squeeze", "view", "reshape", "expand", "expand_as", "contiguous", "detach"}
_KEEPS_MASK |= {"flatten", "transpose", "permute", "clone", "cuda", "cpu"}
_RICH = (cst.LessThan, cst.GreaterThan, cst.LessThanEqual, cst.GreaterThanEqual, cst.Equal, cst.NotEqual)
_MAX_DEPTH = 6
_DYNAMIC = DYNAMIC_SHAPE_CALLS | {"bincount"}  # bincount: its length is the data's maximum (GB0036 on 2.13)


def dynamic_call(src: SourceFile, call: cst.Call) -> str | None:
    """What makes `call` an operator of data-dependent output (for the finding's reason), or None."""
    v = values(src)
    func = call.func
    torch_names = sorted(q for q in src.qualified_names(func) if q.startswith("torch."))
    if torch_names and _dotted(func):
        leaf = torch_names[0].rsplit(".", 1)[-1]
        if leaf in _DYNAMIC and call.args:
            return f"`{leaf}` gives a tensor whose shape depends on the data"
        if leaf == "where" and len(call.args) == 1 and call.args[0].keyword is None:
            return "`torch.where(mask)` of one argument gives indices whose number depends on the data"
        if leaf == "repeat_interleave" and len(call.args) >= 2 and v.is_tensor(call.args[1].value):
            return "`repeat_interleave` with a tensor of repeats gives a shape that depends on the data"
        return None
    if not isinstance(func, cst.Attribute) or not v.is_tensor(func.value):
        return None
    attr = func.attr.value
    if attr in _DYNAMIC:
        return f"`.{attr}()` gives a tensor whose shape depends on the data"
    if attr == "tolist" and not call.args:
        return "`.tolist()` reads a tensor into Python numbers"
    if attr == "repeat_interleave" and call.args and v.is_tensor(call.args[0].value):
        return "`repeat_interleave` with a tensor of repeats gives a shape that depends on the data"
    return None


def _dotted(func: cst.BaseExpression) -> bool:
    """`torch.where`, `F.unique`: a name or a chain of attributes of one (not a method of a call's result, which
    libcst names `torch.greater.nonzero` for `torch.greater(a, b).nonzero`)."""
    while isinstance(func, cst.Attribute):
        func = func.value
    return isinstance(func, cst.Name)


def masked_read(src: SourceFile, sub: cst.Subscript) -> bool:
    """`x[mask]` (read, or the target of `x[mask] += y`) with a boolean mask: dynamo turns it into `nonzero`. A
    plain store `x[mask] = y` compiles without a break (2.13–2.15) and is not one."""
    if len(sub.slice) != 1 or not isinstance(sub.slice[0].slice, cst.Index):
        return False
    parent = src.parents.get(sub)
    if isinstance(parent, cst.AssignTarget):
        return False
    v = values(src)
    return (v.is_tensor(sub.value) or v.maybe_tensor(sub.value)) and bool_mask(src, sub.slice[0].slice.value)


def bool_mask(src: SourceFile, expr: cst.BaseExpression, depth: int = 0, seen: frozenset[int] = frozenset()) -> bool:
    """A boolean tensor, as the source shows it: a comparison with a tensor, `~mask`, `a & b` of masks,
    `torch.isnan(x)`, `x.bool()`, a mask moved or reshaped (`mask.to(device)`), a parameter annotated
    `torch.BoolTensor`, or a name every assignment of which is one of these (`m = m.to(device)` among them: an
    assignment the name is already being followed through is no evidence either way)."""
    if depth > _MAX_DEPTH:
        return False
    v = values(src)
    if isinstance(expr, cst.Comparison):
        rich = all(isinstance(c.operator, _RICH) for c in expr.comparisons)
        operands = [expr.left, *(c.comparator for c in expr.comparisons)]
        return rich and any(v.is_tensor(x) for x in operands)
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.BitInvert):
        return bool_mask(src, expr.expression, depth + 1, seen)
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, (cst.BitAnd, cst.BitOr, cst.BitXor)):
        return bool_mask(src, expr.left, depth + 1, seen) and bool_mask(src, expr.right, depth + 1, seen)
    if isinstance(expr, cst.Call):
        func = expr.func
        names = src.qualified_names(func)
        if any(q.startswith("torch.") and q.rsplit(".", 1)[-1] in _MASK_FUNCS for q in names):
            return True
        if not isinstance(func, cst.Attribute):
            return False
        if func.attr.value in _MASK_FUNCS and (v.is_tensor(func.value) or v.maybe_tensor(func.value)):
            return True
        return func.attr.value in _KEEPS_MASK and not _casts(expr) and bool_mask(src, func.value, depth + 1, seen)
    if isinstance(expr, cst.Name):
        refs = src.referents(expr)
        if not refs:
            return False
        followed = [r for r in refs if id(r) not in seen]
        if not followed:  # a cycle: the assignments are judged where they were first followed
            return True
        seen = seen | {id(r) for r in refs}
        for ref in followed:
            if isinstance(ref, cst.Param):
                if ref.annotation is None or "BoolTensor" not in src.code(ref.annotation.annotation):
                    return False
                continue
            value = src.assigned_value(ref)
            if value is None or not bool_mask(src, value, depth + 1, seen):
                return False
        return True
    return False


def _casts(call: cst.Call) -> bool:
    """`mask.to(torch.float)`, `mask.to(dtype=...)`: no longer a mask (a device, `x.device`, keeps it one)."""
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == "dtype":
            return True
        if m.matches(arg.value, m.Attribute(value=m.Name("torch"))) and not m.matches(
            arg.value, m.Attribute(attr=m.Name("device"))
        ):
            return True
    return False


def breaks_in(src: SourceFile, expr: cst.CSTNode) -> bool:
    """Whether evaluating `expr` runs an operator of data-dependent output."""
    if isinstance(expr, cst.Call) and dynamic_call(src, expr) is not None:
        return True
    if isinstance(expr, cst.Subscript) and masked_read(src, expr):
        return True
    return any(dynamic_call(src, c) is not None for c in src.nodes_in(expr, cst.Call)) or any(
        masked_read(src, s) for s in src.nodes_in(expr, cst.Subscript)
    )


def skipped_method(src: SourceFile, call: cst.Call) -> Iterator[str]:
    """`h.masked_scatter(m, norm(h[m]))`: a tensor method whose arguments break; dynamo skips the method in the
    frame it resumes in (GB0007)."""
    func, v = call.func, values(src)
    if not isinstance(func, cst.Attribute) or not (v.is_tensor(func.value) or v.maybe_tensor(func.value)):
        return
    if any(breaks_in(src, a.value) for a in call.args):
        yield (
            f"`.{func.attr.value}(...)` is called on an argument that breaks the graph: dynamo resumes with the"
            " method already loaded, and skips it"
        )
