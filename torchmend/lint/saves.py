"""TM107 without a run: `torch.save` of a compiled model (`model = torch.compile(model)`), or of its `state_dict()`.
The first pickles the OptimizedModule wrapper, which `torch.load(weights_only=True)` refuses; the second saves keys
that all start with `_orig_mod.`, which the plain module's `load_state_dict` rejects. Scan sees it only when the
same run loads the checkpoint back and fails; the source shows it at the save."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst
import libcst.matchers as m

from torchmend.analysis.names import binding_statement, referents
from torchmend.analysis.source import SourceFile
from torchmend.lint.hits import LIKELY, Hit

_KEYS = (
    "saves the state dict of a compiled model (`{name}` is torch.compile's result): every key starts with "
    "`_orig_mod.`, and loading it into the plain module fails with unexpected keys"
)
_PICKLED = (
    "saves the compiled model itself (`{name}` is torch.compile's result): it pickles the OptimizedModule wrapper, "
    "which torch.load(weights_only=True) refuses"
)


def _compiled_name(src: SourceFile, expr: cst.BaseExpression, before: int) -> str | None:
    """`expr`'s name when it is bound to a `torch.compile(...)` result by the last assignment of it above line
    `before` (a later `model = model._orig_mod` takes it back), else None."""
    if not isinstance(expr, cst.Name):
        return None
    last: tuple[int, cst.BaseExpression | None] = (0, None)
    for b in referents(src, expr):
        stmt = binding_statement(src, b)
        if stmt is None or isinstance(stmt, cst.AugAssign):
            continue
        line = src.line_of(stmt)
        if last[0] < line < before:
            last = (line, stmt.value)
    value = last[1]
    if isinstance(value, cst.Call) and src.is_qualified(value.func, "torch.compile"):
        return expr.value
    return None


def compiled_saves(src: SourceFile) -> Iterator[Hit]:
    """Each `torch.save(X, ...)` whose X is a compiled model, or holds a compiled model's `state_dict()` (in a
    checkpoint dict too: `torch.save({"model": model.state_dict(), ...}, path)`)."""
    for call in src.nodes_in(src.module, cst.Call):
        if not call.args or not src.is_qualified(call.func, "torch.save"):
            continue
        saved, line = call.args[0].value, src.line_of(call)
        name = _compiled_name(src, saved, line)
        if name is not None:
            yield Hit("TM107", call, LIKELY, _PICKLED.format(name=name))
            continue
        for inner in src.nodes_in(saved, cst.Call):
            if m.matches(inner.func, m.Attribute(attr=m.Name("state_dict"))) and not inner.args:
                assert isinstance(inner.func, cst.Attribute)
                name = _compiled_name(src, inner.func.value, line)
                if name is not None:
                    yield Hit("TM107", call, LIKELY, _KEYS.format(name=name))
                    break
