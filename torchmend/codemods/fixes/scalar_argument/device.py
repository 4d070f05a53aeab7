"""Where the tensor made from the number takes its device: the tensor it meets in the function, seen at
the call site."""

from __future__ import annotations

import libcst as cst

from torchmend.analysis import match as m
from torchmend.analysis import ordered_names, values
from torchmend.analysis.source import SourceFile
from torchmend.analysis.torch_ops import NOT_TENSOR_ATTRS, SAME_DEVICE_METHODS
from torchmend.codemods.fixes.scalar_argument.sites import params_of


def cheap(expr: cst.BaseExpression) -> bool:
    """A name, an attribute of one, or one indexed by a literal: evaluating it again costs nothing."""
    if isinstance(expr, cst.Name):
        return True
    if isinstance(expr, cst.Attribute):
        return cheap(expr.value)
    if isinstance(expr, cst.Subscript) and len(expr.slice) == 1 and isinstance(expr.slice[0].slice, cst.Index):
        index = expr.slice[0].slice.value
        return cheap(expr.value) and isinstance(index, (cst.Integer, cst.SimpleString, cst.Name))
    return False


def device_source(expr: cst.BaseExpression, scalar: cst.BaseExpression) -> cst.BaseExpression | None:
    """An expression with the same device as `expr` that is safe to evaluate again: `expr` itself when
    cheap; for a call (`model(x)`), a plain-name argument of it or the receiver of `x.float()`."""
    if cheap(expr):
        return expr
    if isinstance(expr, cst.Call):
        for a in expr.args:
            if (
                a.keyword is None
                and not a.star
                and isinstance(a.value, cst.Name)
                and a.value is not scalar
                and not m.matches(a.value, m.Name(getattr(scalar, "value", "")))
            ):
                return a.value
        func = expr.func
        if isinstance(func, cst.Attribute) and func.attr.value in SAME_DEVICE_METHODS and cheap(func.value):
            return func.value
    return None


def meets_of(src: SourceFile, uses: list[cst.Name], scalar: str) -> list[cst.BaseExpression]:
    """What the number meets where it is used, nearest first: the other operand of each operation it is
    in (until one is a tensor), or the receiver and other arguments of the call it is passed to."""
    found: list[cst.BaseExpression] = []
    for use in uses:
        node: cst.CSTNode = use
        while True:
            parent = src.parents.get(node)
            if isinstance(parent, cst.BinaryOperation):
                other = parent.right if parent.left is node else parent.left
                found.append(other)
                if values(src).maybe_tensor(other, exclude=(scalar,)):
                    break
            elif isinstance(parent, cst.Comparison):
                others = [parent.left, *(c.comparator for c in parent.comparisons)]
                found.extend(o for o in others if o is not node and o is not getattr(node, "comparator", None))
            elif isinstance(parent, cst.Arg):
                call = src.parents.get(parent)
                if isinstance(call, cst.Call):
                    if isinstance(call.func, cst.Attribute) and not any(
                        q.startswith("torch.") for q in src.qualified_names(call.func)
                    ):
                        found.append(call.func.value)  # x.mul_(scale)
                    found.extend(a.value for a in call.args if a is not parent)
                break
            elif not isinstance(parent, (cst.UnaryOperation, cst.ComparisonTarget)):
                break
            node = parent
    return found


Path = tuple[tuple[str, object], ...]  # ("attr", "inputs") / ("index", SubscriptElement): batch["x"], batch.inputs


def _access_path(src: SourceFile, name: cst.Name) -> Path:
    """How the callee reaches into a parameter before using it: `batch["x"]`, `batch.inputs`, `pair[0]`
    (literal indexes and plain attributes only, so the caller can repeat it)."""
    path: list[tuple[str, object]] = []
    node: cst.CSTNode = name
    while True:
        parent = src.parents.get(node)
        if (
            isinstance(parent, cst.Subscript)
            and parent.value is node
            and len(parent.slice) == 1
            and isinstance(parent.slice[0].slice, cst.Index)
            and isinstance(parent.slice[0].slice.value, (cst.Integer, cst.SimpleString))
        ):
            path.append(("index", parent.slice[0]))
        elif (
            isinstance(parent, cst.Attribute)
            and parent.value is node
            and parent.attr.value not in NOT_TENSOR_ATTRS | {"grad"}
            and not isinstance(src.parents.get(parent), cst.Call)
        ):  # batch.to(...) is a method call
            path.append(("attr", parent.attr.value))
        else:
            return tuple(path)
        node = parent


def apply(expr: cst.BaseExpression, path: Path) -> cst.BaseExpression:
    out = expr.deep_clone()
    for kind, item in path:
        if kind == "attr":
            out = cst.Attribute(out, cst.Name(str(item)))
        else:
            assert isinstance(item, cst.SubscriptElement)
            out = cst.Subscript(out, [item.deep_clone().with_changes(comma=cst.MaybeSentinel.DEFAULT)])
    return out


def params_reached(
    src: SourceFile, fn: cst.FunctionDef, expr: cst.CSTNode, skip: set[str], seen: set[str]
) -> list[tuple[str, Path]]:
    """Parameters of `fn` an expression is computed from (through local assignments, in source order),
    each with how the expression reaches into it."""
    params = {p.name.value for p in [*params_of(fn)[0], *params_of(fn)[1]]}
    out: list[tuple[str, Path]] = []
    for n in ordered_names(expr):
        if n.value in seen or n.value in skip:
            continue
        seen.add(n.value)
        if n.value in params:
            out.append((n.value, _access_path(src, n)))
            continue
        for stmt in src.nodes_in(fn, (cst.Assign, cst.AugAssign, cst.AnnAssign)):
            value = getattr(stmt, "value", None)
            targets = (
                [t.target for t in stmt.targets] if isinstance(stmt, cst.Assign) else [getattr(stmt, "target", None)]
            )
            if value is not None and any(m.matches(t, m.Name(n.value)) for t in targets if t is not None):
                out += params_reached(src, fn, value, skip, seen)
    return out
