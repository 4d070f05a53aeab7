"""End to end (issue 40, compile placement): a whole-model compile that breaks in a post-processing step
(fixtures/placement/detector). The scan names the submodules that compiled without a break; `fix --yes` compiles
those in place instead of the model; the patched run has no graph break, the two submodules compiled, the numbers
match."""

from __future__ import annotations

from pathlib import Path

from conftest import ROOT, fix_safe_copy, scan_json

FIXTURE = ROOT / "fixtures" / "placement" / "detector" / "train.py"
INFERENCE = FIXTURE.with_name("infer.py")


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


def test_fix_compares_an_inference_loop_by_the_models_own_calls(tmp_path: Path) -> None:
    # No loss: the outputs of the compiled callables are the evidence. The original compiled the Detector, the patch
    # compiles its backbone and head; both runs are compared on the Detector's calls (it was refused before: "outputs
    # of compiled functions diverge at call 0 (Detector): Detector was called before, Backbone after").
    script, out, outcome = fix_safe_copy(INFERENCE, tmp_path, beside=("train.py",))
    text = script.read_text()
    assert "    model.backbone.compile()\n    model.box_head.compile()\n" in text, out
    numerics = outcome["verification"]["numerics"]
    assert numerics["outputs_equal"] and numerics["outputs_compared"] == 4, numerics
    assert (numerics["outputs_before"], numerics["outputs_after"]) == (4, 4), numerics
