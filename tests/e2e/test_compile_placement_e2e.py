"""End to end (issue 40, compile placement): a whole-model compile that breaks in a post-processing step
(fixtures/placement/detector). The scan names the submodules that compiled without a break; `fix --yes` compiles
those in place instead of the model; the patched run has no graph break, the two submodules compiled, the numbers
match."""

from __future__ import annotations

from pathlib import Path

from conftest import ROOT, fix_safe_copy, scan_json

FIXTURE = ROOT / "fixtures" / "placement" / "detector" / "train.py"


def test_scan_names_the_submodules_that_compiled_cleanly() -> None:
    report = scan_json(FIXTURE).json
    assert report["summary"]["graph_breaks"] > 0
    (p,) = report["placements"]
    assert (p["model"], p["path"], p["line"]) == ("Detector", str(FIXTURE), 49), p
    assert p["modules"] == ["backbone", "box_head"] and p["broken"] == ["postprocess"], p
    assert p["share"] == 1.0  # the post-processing holds no parameters


def test_fix_compiles_the_clean_submodules_in_place(tmp_path: Path) -> None:
    script, _, outcome = fix_safe_copy(FIXTURE, tmp_path)
    text = script.read_text()
    assert "    model.backbone.compile()\n    model.box_head.compile()\n    for _ in range(6):" in text, text
    assert "torch.compile(" not in text

    counts = {c["name"]: c for c in outcome["verification"]["counts"]}
    assert counts["graph_breaks"]["before"]["median"] > 0 and counts["graph_breaks"]["after"]["median"] == 0
    # the backbone and the head compiled (7 ops); the post-processing's fragments went eager
    ops = counts["ops_compiled"]
    assert ops["after"]["median"] == 7 < ops["before"]["median"], ops
    numerics = outcome["verification"]["numerics"]
    assert numerics["losses_equal"] and numerics["params_equal"], numerics
