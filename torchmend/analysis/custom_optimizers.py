"""Optimizers the project defines itself: a `torch.optim.Optimizer` subclass with a hand-written `step`.

Helpers for the tensor-learning-rate fix (this package). Such a step reads `group["lr"]` and does
arithmetic with it; compiled, a float lr that a schedule rewrites is guarded on by value and recompiles
up to the limit (pytorch#169634 on torch 2.11/2.12; on 2.13 too where the float reaches an op's scalar
argument, e.g. `p.add_(u, alpha=-lr)`). A 0-dim tensor lr works in the same arithmetic, but not where
the step needs a Python number: `float(lr)`, `if lr`, `lr > 0`, `range(...)`, `math.*`. Those lines make
the fix unsafe to propose, and are named.
"""

from __future__ import annotations

import libcst as cst

from torchmend.analysis import class_named
from torchmend.analysis.source import Context, SourceFile
from torchmend.analysis.torch_ops import NEEDS_NUMBER


def optimizer_classdef(
    src: SourceFile,
    call: cst.Call,
    ctx: Context | None = None,
) -> tuple[SourceFile, cst.ClassDef] | None:
    """The class statement (and its file) of the optimizer `call` builds, when it derives (through classes
    of the project) from torch.optim.Optimizer: defined in this file, or, with `ctx`, imported from another
    file of the project (`from mypkg.optim import Lion`, re-exports followed)."""
    if not isinstance(call.func, cst.Name):
        return None
    found = class_named(src, call.func.value, ctx)
    if found is None or not _is_optimizer(found[0], found[1], 0):
        return None
    return found


def _is_optimizer(src: SourceFile, cls: cst.ClassDef, depth: int) -> bool:
    if depth > 6:
        return False
    for base in cls.bases:
        if src.is_qualified(base.value, "torch.optim.Optimizer", "torch.optim.optimizer.Optimizer"):
            return True
        if isinstance(base.value, cst.Name):
            refs = src.referents(base.value)
            if len(refs) == 1 and isinstance(refs[0], cst.ClassDef) and _is_optimizer(src, refs[0], depth + 1):
                return True
    return False


def method(cls: cst.ClassDef, name: str) -> cst.FunctionDef | None:
    for stmt in cls.body.body:
        if isinstance(stmt, cst.FunctionDef) and stmt.name.value == name:
            return stmt
    return None


def default_lr(cls: cst.ClassDef) -> cst.BaseExpression | None:
    """The default of `lr` in the class's `__init__`, when it has one."""
    init = method(cls, "__init__")
    if init is None:
        return None
    for p in [*init.params.params, *init.params.kwonly_params]:
        if p.name.value == "lr" and p.default is not None:
            return p.default
    return None


def _is_lr_read(node: cst.CSTNode) -> bool:
    if not isinstance(node, cst.Subscript) or len(node.slice) != 1:
        return False
    index = node.slice[0].slice
    return (
        isinstance(index, cst.Index)
        and isinstance(index.value, cst.SimpleString)
        and index.value.evaluated_value == "lr"
    )


def lr_hazards(src: SourceFile, cls: cst.ClassDef) -> list[tuple[int, str]]:
    """(line, why) for every place in the class's methods where a tensor lr would not do: the value read
    from `group["lr"]` (directly or through names bound from it) reaching a Python-number use."""
    hazards: list[tuple[int, str]] = []
    tainted: set[str] = set()
    for fn in src.nodes_in(cls, cst.FunctionDef):
        assert isinstance(fn, cst.FunctionDef)
        if fn.name.value == "__init__":
            continue
        # Names bound from the lr: `lr = group["lr"]`, `lr, mom = group["lr"], group["momentum"]`,
        # `scaled = lr * 2` (one pass in source order is enough for straight-line steps).
        for assign in src.nodes_in(fn, cst.Assign):
            assert isinstance(assign, cst.Assign)
            for target in assign.targets:
                pairs = _pairs(target.target, assign.value)
                for name, value in pairs:
                    if _mentions_lr(src, value, tainted):
                        tainted.add(name)
        for node in src.nodes_in(
            fn, (cst.Call, cst.If, cst.While, cst.Comparison, cst.BooleanOperation, cst.IfExp, cst.Assert)
        ):
            why = _hazard(src, node, tainted)
            if why:
                hazards.append((src.line_of(node), why))
    first: dict[int, str] = {}
    for line, why in hazards:  # a comparison inside an `if` is one hazard, named by the `if`
        first.setdefault(line, why)
    return sorted(first.items())


def _pairs(target: cst.BaseExpression, value: cst.BaseExpression) -> list[tuple[str, cst.BaseExpression]]:
    if isinstance(target, cst.Name):
        return [(target.value, value)]
    if (
        isinstance(target, (cst.Tuple, cst.List))
        and isinstance(value, (cst.Tuple, cst.List))
        and len(target.elements) == len(value.elements)
    ):
        out: list[tuple[str, cst.BaseExpression]] = []
        for t, v in zip(target.elements, value.elements):
            out += _pairs(t.value, v.value)
        return out
    return []


def _mentions_lr(src: SourceFile, expr: cst.CSTNode, tainted: set[str]) -> bool:
    if _is_lr_read(expr) or (isinstance(expr, cst.Name) and expr.value in tainted):
        return True
    return any(
        _is_lr_read(n) or (isinstance(n, cst.Name) and n.value in tainted)
        for n in src.nodes_in(expr, (cst.Subscript, cst.Name))
    )


def _hazard(src: SourceFile, node: cst.CSTNode, tainted: set[str]) -> str:
    code = src.code(node).strip().splitlines()[0]
    if isinstance(node, cst.Call):
        names = src.qualified_names(node.func)
        if (names & NEEDS_NUMBER or any(n.startswith("math.") for n in names)) and any(
            _mentions_lr(src, a.value, tainted) for a in node.args
        ):
            return f"`{code}` needs the lr as a Python number"
        return ""
    if isinstance(node, (cst.If, cst.While, cst.IfExp)):
        return f"`{code}` branches on the lr" if _mentions_lr(src, node.test, tainted) else ""
    if isinstance(node, cst.Assert):
        return f"`{code}` checks the lr as a Python value" if _mentions_lr(src, node.test, tainted) else ""
    if isinstance(node, cst.Comparison):
        return f"`{code}` compares the lr as a Python number" if _mentions_lr(src, node, tainted) else ""
    if isinstance(node, cst.BooleanOperation):
        return f"`{code}` uses the lr as a truth value" if _mentions_lr(src, node.left, tainted) else ""
    return ""
