"""End to end (issue 40, TM114): a ProbAttention-style layer that sizes its sparse attention with NumPy on the
sequence length (fixtures/numpy_scalar/prob_attention). `fix --yes` (safe fixes only, aot_eager) rewrites the NumPy
arithmetic to `math`: the graph breaks are gone, fewer graphs are compiled, and the losses and weights match."""

from __future__ import annotations

from pathlib import Path

from conftest import ROOT, fix_safe_copy

FIXTURE = ROOT / "fixtures" / "numpy_scalar" / "prob_attention" / "train.py"


def test_numpy_on_the_sequence_length_becomes_math(tmp_path: Path) -> None:
    script, out, outcome = fix_safe_copy(FIXTURE, tmp_path)

    assert {(w["rule"], w["safety"]) for w in outcome["written"]} == {("TM114", "safe")}, outcome["written"]
    counts = {c["name"]: c for c in outcome["verification"]["counts"]}
    breaks, graphs = counts["graph_breaks"], counts["graphs"]
    assert breaks["before"]["median"] > 0 and breaks["after"]["median"] == 0, breaks
    assert graphs["after"]["median"] < graphs["before"]["median"], graphs
    numerics = outcome["verification"]["numerics"]
    assert numerics["losses_equal"] and numerics["params_equal"] and numerics["steps_compared"] > 0, numerics
    # the break at the NumPy call, and the one where `int(n_top)` reads NumPy's value back a line later
    assert "change removed TM114 at train.py:22" in out and "change removed TM114 at train.py:24" in out

    text = script.read_text()
    assert "n_sample = self.factor * math.ceil(math.log(L))\n" in text
    assert "n_top = max(L // 4, 1)\n" in text
    assert "import math\n" in text and "np." not in text
