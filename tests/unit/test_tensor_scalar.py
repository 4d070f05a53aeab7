"""keep-scalar-tensor (TM104) refused: the use it names is the first in the source, whatever order libcst's scope
analysis keeps the name's reads in (a set hashed by id)."""

from __future__ import annotations

from torchmend.analysis.source import Context
from torchmend.codemods.base import NoFix
from torchmend.codemods.engine import Session
from torchmend.codemods.examples import EXAMPLE_ROOT, findings_from_markers


def test_a_refusal_names_the_first_use_in_the_source() -> None:
    calls = "\n".join(f"    h = self.layer{i}(h)" for i in range(12))
    text = (
        "import torch\n\n\n"
        "def forward(self, x, mask):\n"
        "    n_real = int(mask.sum())  # tm: TM104\n"
        "    h = x * (mask.numel() / n_real)\n"
        f"{calls}\n"
        "    return h\n"
    )
    for _ in range(5):  # a fresh parse each time: fresh ids, so a set's order would change between them
        (result,) = Session(Context("/tm-example", lambda p: text)).propose(
            findings_from_markers("/tm-example/example.py", text, EXAMPLE_ROOT)
        )
        assert isinstance(result, NoFix), result
        assert "`h` is passed to `self.layer0()` at line 7" in result.reason, result.reason
