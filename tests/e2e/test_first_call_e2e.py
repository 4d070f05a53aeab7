"""End to end: a normalizing flow whose ActNorm layer initializes itself from the first batch
(fixtures/first_call/actnorm). The flag it flips makes the second call recompile once; the finding's own rule has no
fix for a bool, so the last resort runs the first call eagerly (`torch.compiler.set_stance("force_eager")` before the
compile call, `set_stance("default")` after the call), verified by the recompile being gone and the losses matching."""

from __future__ import annotations

from pathlib import Path

from conftest import ROOT, fix_a_copy

FIXTURE = ROOT / "fixtures" / "first_call" / "actnorm" / "train.py"


NOT_CONFIRMED = (
    "not written: a global compiler setting is written only when the script's own backend measures the run faster; "
    "these runs used aot_eager"
)


def test_state_the_first_call_sets_is_settled_eagerly(tmp_path: Path) -> None:
    script, out = fix_a_copy(FIXTURE, tmp_path)
    assert "TM201 change removed TM201 at train.py:15" in out
    assert "numerics match" in out
    text = script.read_text()
    # a compiler stance is a global setting: judged on aot_eager (not the script's own backend), it is not written
    assert NOT_CONFIRMED in out and "set_stance" not in text
