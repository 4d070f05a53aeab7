"""TM107 without a run: `torch.save` of a compiled model (`model = torch.compile(model)`), or of its `state_dict()`.
The first pickles the OptimizedModule wrapper, which `torch.load(weights_only=True)` refuses; the second saves keys
that all start with `_orig_mod.`, which the plain module's `load_state_dict` rejects. Scan sees it only when the
same run loads the checkpoint back and fails; the source shows it at the save (analysis/compiled_saves.py, which
the fix shares)."""

from __future__ import annotations

from collections.abc import Iterator

from torchmend.analysis.compiled_saves import compiled_saves as _saves
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


def compiled_saves(src: SourceFile) -> Iterator[Hit]:
    """Each `torch.save(X, ...)` whose X is a compiled model, or holds a compiled model's `state_dict()` (in a
    checkpoint dict too: `torch.save({"model": model.state_dict(), ...}, path)`)."""
    for found in _saves(src):
        text = _PICKLED if found.use.whole else _KEYS
        yield Hit("TM107", found.save, LIKELY, text.format(name=found.use.name.value))
