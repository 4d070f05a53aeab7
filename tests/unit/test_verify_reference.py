"""The eager reference and the noise band on hand-made END records (the real runs: tests/e2e/test_verify_judgement.py)."""

from __future__ import annotations

from torchmend.model import Summary
from torchmend.profiler.runner import RunOutcome
from torchmend.verify.reference import COMPILER, NEITHER, REWRITE, band_of, reference, tolerance
from torchmend.verify.runs import ArmRun

LOSSES = [1.0, 0.9, 0.8]


def _param(total: float) -> dict[str, object]:
    return {"shape": [8], "dtype": "float32", "sum": total, "abs": 10.0, "probe": total, "probe_abs": 10.0}


def _run(arm: str, gain: float = 1.0, losses: list[float] = LOSSES, ended_by: str = "finished") -> ArmRun:
    summary = Summary(
        frames_compiled=1,
        compiles=1,
        graphs=1,
        graph_breaks=0,
        recompiles=0,
        recompile_limit_hits=0,
        compile_seconds=1.0,
        steps=len(losses),
        ended_by=ended_by,
        wall_seconds=1.0,
        torch_version="2.13",
    )
    end = {"ev": "end", "losses": list(losses), "params": [_param(2.0), _param(gain)]}
    return ArmRun(arm, 0, [], summary, RunOutcome([], ended_by, 0, 1.0, "", end))


def test_the_band_is_the_originals_own_compiled_vs_eager_spread() -> None:
    band = band_of(_run("c", gain=1.0), _run("e", gain=1.012))
    assert band is not None and abs(band - 0.0012) < 1e-9  # |1.0 - 1.012| against the parameter's abs sum 10
    assert band_of(_run("c"), _run("e", losses=LOSSES[:2])) is None  # not noise: the runs went different ways
    assert band_of(_run("c"), _run("e", ended_by="error")) is None
    assert tolerance(1e-4, band) >= band and tolerance(1e-4, None) >= 1e-4 and tolerance(1e-4, 1e-6) < 1e-3


def test_whose_difference_it_is() -> None:
    original_c, original_e = _run("bc"), _run("be")
    # eagerly the same, compiled different: the compiler
    ref = reference(original_c, original_e, _run("ac", gain=1.5), _run("ae"))
    assert ref.whose == COMPILER and ref.describe().startswith("the compiler mis-compiled the rewritten code")
    # eagerly different already: the rewrite
    ref = reference(original_c, original_e, _run("ac", gain=1.5), _run("ae", gain=1.5))
    assert ref.whose == REWRITE and ref.describe().startswith("the rewrite changed the math")
    # an eager run that fails settles nothing, and says which
    ref = reference(original_c, original_e, _run("ac", gain=1.5), _run("ae", ended_by="error"))
    assert ref.whose == NEITHER and "the patched eager run failed" in ref.describe()
    assert ref.band == 0.0 and "differs from its eager run by 0 relative" in ref.band_text()


def test_the_patched_run_is_judged_against_its_own_eager_run_within_the_band() -> None:
    # the original's compiled run is 0.0012 off its eager run; the patched compiled run 0.001 off its eager run
    ref = reference(_run("bc", gain=1.0), _run("be", gain=1.012), _run("ac", gain=1.002), _run("ae", gain=1.012))
    assert ref.whose == NEITHER and ref.band is not None
    assert "the gate allows max(rtol 0.0001, band) = 0.0012" in ref.band_text()


def test_eager_runs_that_record_nothing_settle_nothing() -> None:
    empty = _run("ae", losses=[])
    empty.outcome.end["params"] = None
    ref = reference(_run("bc"), empty, _run("ac", gain=1.5), empty)
    assert ref.whose == NEITHER and ref.describe().endswith("the eager runs recorded nothing to compare")
