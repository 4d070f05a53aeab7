"""pipeline.verify_rounds on made-up runs (as tests/unit/test_pipeline_rounds.py: verify.runs.run_arms and run_one
replaced) for TM110's change: the original compiled run drew other random numbers than its eager run (dynamo's NumPy
stream), the patched compiled run draws the eager run's. Verified, with the cause named; a patched run that is
neither the original's compiled numbers nor its eager ones stays refused (the real runs:
tests/e2e/test_tensor_checks.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from torchmend import pipeline
from torchmend.model import EndedBy, Finding, Kind, Severity, Summary, Where
from torchmend.profiler.runner import RunOutcome, RunSpec
from torchmend.verify import runs
from torchmend.verify.reference import EAGER_COMPILE
from torchmend.verify.runs import ArmRun

SCRIPT = """import numpy as np
import torch


def span_mask(n, k):
    eps = np.random.rand(1).item()
    return np.random.choice(n, int(k + eps), replace=False)


@torch.compile
def step(x):
    return x[torch.as_tensor(span_mask(x.shape[0], 2))]
"""
EAGER, STREAM, OTHER = 1.0, 1.4, 1.2  # a parameter's sum: eagerly, compiled on dynamo's stream, something else


def _tm110(root: Path, line: int) -> Finding:
    return Finding(
        rule="TM110",
        kind=Kind.GRAPH_BREAK,
        title="host random",
        file="train.py",
        line=line,
        function="span_mask",
        path=str(root / "train.py"),
        where=Where.PROJECT,
        reason="GB0033",
        count=2,
        severity=Severity.FIX,
        gb_id="GB0033",
    )


def _run(arm: str, total: float, findings: list[Finding], breaks: int) -> ArmRun:
    summary = Summary(
        frames_compiled=1,
        compiles=1,
        graphs=breaks + 1,
        graph_breaks=breaks,
        recompiles=0,
        recompile_limit_hits=0,
        compile_seconds=1.0,
        steps=3,
        ended_by=EndedBy.STEPS,
        wall_seconds=2.0,
        torch_version="2.13",
    )
    param = {"shape": [8], "dtype": "float32", "sum": total, "abs": 10.0, "probe": total, "probe_abs": 10.0}
    end = {"losses": [1.0, 0.9 if total == EAGER else 0.8, 0.7], "params": [param]}
    return ArmRun(arm, 0, findings, summary, RunOutcome([], "steps", 0, 2.0, "", end))


def _verify(monkeypatch: pytest.MonkeyPatch, root: Path, patched: float) -> pipeline.Verified:
    (root / "train.py").write_text(SCRIPT)
    found = [_tm110(root, 6), _tm110(root, 7)]
    fixes = pipeline.propose(found, root)
    pipeline.accept_all(fixes, unsafe=True)
    assert [p.shape for p in fixes.accepted] == ["disable-host-random-helper"]

    def arms(before, after, root, repeat, on_run=None, reuse_before=()):
        return [_run("before", STREAM, found, 4)], [_run("after", patched, [], 1)]

    def one(spec: RunSpec, root: Path, arm: str, index: int = 0) -> ArmRun:
        assert spec.compile == EAGER_COMPILE
        return _run(arm, EAGER, [], 0)  # both scripts compute the same eagerly

    monkeypatch.setattr(runs, "run_arms", arms)
    monkeypatch.setattr(runs, "run_one", one)
    original = _run("before", STREAM, found, 4)
    scan = pipeline.Scan(found, original.summary, original.outcome, spec=RunSpec(script=root / "train.py"))
    events = list(pipeline.verify_rounds(scan, fixes, root))
    done = events[-1]
    assert isinstance(done, pipeline.Verified)
    return done


def test_the_patch_that_draws_the_eager_runs_numbers_again_is_verified_and_says_why(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    done = _verify(monkeypatch, tmp_path, patched=EAGER)
    assert done.ok, done.verification.reasons
    note = done.verification.notes[0]
    assert note.startswith("the patched compiled run equals the original eager run (3 losses, 1 parameters")
    assert "the original compiled run differed from it (loss at step 1: 0.8 compiled, 0.9 eagerly)" in note
    assert note.endswith(
        "dynamo's NumPy random stream (under compile `np.random` draws from torch's generator; "
        "the patched helper draws from NumPy's again, as eagerly)"
    )


def test_a_patch_that_is_neither_the_compiled_nor_the_eager_numbers_is_refused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    done = _verify(monkeypatch, tmp_path, patched=OTHER)
    assert done.outcome == pipeline.REFUSED
    reasons = " ".join(map(str, done.verification.reasons))
    assert "numerics differ" in reasons and "the compiler mis-compiled the rewritten code" in reasons
    assert any("no noise band" in n and "TM110" in n for n in done.verification.notes)


def test_a_restored_verdict_holds_the_patch_to_the_coverage_its_change_keeps() -> None:
    # Compile placement keeps no op count (the fragments between the whole model's breaks go eager); where its patched
    # run restores the eager numbers (Keypoint R-CNN: the original compiled run differed from its eager run), the
    # verdict judged again against the eager reference must hold it to the same counts, not to all of them (it was
    # refused "compiles less: ops compiled 984 before, 265 after").
    from dataclasses import replace

    from torchmend.verify.compare import REFUSED, restored_verdict
    from torchmend.verify.reference import RESTORED, reference

    def compiled(arm: str, total: float, ops: int) -> ArmRun:
        run = _run(arm, total, [], 0)
        return replace(run, summary=replace(run.summary, ops_compiled=ops, largest_graph_ops=ops // 4))

    before, after = compiled("before", STREAM, 984), compiled("after", EAGER, 265)
    ref = reference(before, _run("before", EAGER, [], 0), after, _run("after", EAGER, [], 0))
    assert ref.whose == RESTORED
    held = restored_verdict(ref, [before], [after], timed=False)
    assert held is not None and held.verdict == REFUSED and "compiles less" in str(held.reasons)
    kept = restored_verdict(ref, [before], [after], timed=False, kept=())
    assert kept is not None and kept.verdict != REFUSED, kept.reasons
