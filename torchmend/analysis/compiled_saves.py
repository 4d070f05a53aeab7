"""Checkpoints taken from a compiled model (TM107), as the source shows them: lint reports them, the codemod that
saves the plain module instead finds them here too.

A name bound to `torch.compile(...)` holds an OptimizedModule: `torch.save(name)` pickles the wrapper, and
`name.state_dict()` has every key prefixed with `_orig_mod.`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import libcst as cst

from torchmend.analysis import match as m
from torchmend.analysis.names import binding_statement, referents
from torchmend.analysis.source import SourceFile


@dataclass(frozen=True, eq=False)
class CompiledUse:
    """A compiled model read where a checkpoint is taken: `name` (the Name node read) is bound to `call`
    (`torch.compile(...)`) by `binding`, the last assignment of it above the read."""

    name: cst.Name
    binding: cst.Assign | cst.AnnAssign
    call: cst.Call
    whole: bool  # the model itself is saved (pickled), not its state_dict()


@dataclass(frozen=True, eq=False)
class CompiledSave:
    """A `torch.save(...)` call that saves a compiled model, or a compiled model's `state_dict()`."""

    save: cst.Call
    use: CompiledUse


def compiled_binding(src: SourceFile, expr: cst.BaseExpression, before: int) -> CompiledUse | None:
    """`expr` as a compiled model: a Name bound to a `torch.compile(...)` result by the last assignment of it above
    line `before` (a later `model = model._orig_mod` takes it back), else None."""
    if not isinstance(expr, cst.Name):
        return None
    last: tuple[int, cst.Assign | cst.AnnAssign | None] = (0, None)
    for b in referents(src, expr):
        stmt = binding_statement(src, b)
        if stmt is None or isinstance(stmt, cst.AugAssign):
            continue
        line = src.line_of(stmt)
        if last[0] < line < before:
            last = (line, stmt)
    stmt = last[1]
    value = stmt.value if stmt is not None else None
    if stmt is not None and isinstance(value, cst.Call) and src.is_qualified(value.func, "torch.compile"):
        return CompiledUse(expr, stmt, value, whole=False)
    return None


def compiled_state_dicts(src: SourceFile, root: cst.CSTNode) -> Iterator[CompiledUse]:
    """Each `X.state_dict()` under `root` whose X is a compiled model where it is read."""
    for inner in src.nodes_in(root, cst.Call):
        if m.matches(inner.func, m.Attribute(attr=m.Name("state_dict"))) and not inner.args:
            assert isinstance(inner.func, cst.Attribute)
            use = compiled_binding(src, inner.func.value, src.line_of(inner))
            if use is not None:
                yield use


def compiled_saves(src: SourceFile) -> Iterator[CompiledSave]:
    """Each `torch.save(X, ...)` whose X is a compiled model, or holds a compiled model's `state_dict()` (in a
    checkpoint dict too: `torch.save({"model": model.state_dict(), ...}, path)`); one per call."""
    for call in src.nodes_in(src.module, cst.Call):
        if not call.args or not src.is_qualified(call.func, "torch.save"):
            continue
        saved = call.args[0].value
        use = compiled_binding(src, saved, src.line_of(call))
        if use is not None:
            yield CompiledSave(call, CompiledUse(use.name, use.binding, use.call, whole=True))
            continue
        first = next(compiled_state_dicts(src, saved), None)
        if first is not None:
            yield CompiledSave(call, first)
