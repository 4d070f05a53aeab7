"""The eager reference and the noise band on hand-made END records (the real runs: tests/e2e/test_verify_judgement.py)."""

from __future__ import annotations

from dataclasses import replace

from torchmend.model import Summary
from torchmend.profiler.runner import RunOutcome
from torchmend.values import Tolerance
from torchmend.verify.reference import COMPILER, NEITHER, RESTORED, REWRITE, band_of, banded, reference
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
    fixed = Tolerance(1e-4, 1e-6)
    assert banded(fixed, band).rtol >= band and banded(fixed, None).rtol >= 1e-4 and banded(fixed, 1e-6).rtol < 1e-3
    assert banded(fixed, band).atol == fixed.atol


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


def _drew_host_random(run: ArmRun) -> ArmRun:
    """The run as one whose compiled code drew NumPy random numbers through dynamo (a TM110 finding)."""
    from torchmend.model import Finding, Kind, Severity, Where

    tm110 = Finding(
        rule="TM110",
        kind=Kind.GRAPH_BREAK,
        title="",
        file="train.py",
        line=12,
        function="span_mask",
        path="/p/train.py",
        where=Where.PROJECT,
        reason="GB0033",
        count=2,
        severity=Severity.FIX,
    )
    run.findings.append(tm110)
    return run


def test_a_patch_that_restores_the_eager_program_is_said_to_and_needs_no_band() -> None:
    # dynamo's NumPy stream: the original compiled run drew other numbers (gain 1.4) than its eager run (1.0); the
    # patched compiled run draws the eager run's again, bit for bit
    original_c = _drew_host_random(_run("bc", gain=1.4, losses=[1.0, 0.7, 0.65]))
    ref = reference(original_c, _run("be"), _run("ac"), _run("ae"))
    assert ref.whose == RESTORED and ref.restored is not None and ref.restored.equal
    assert ref.band is None and ref.stream  # another random stream, not noise
    assert "TM110" in ref.band_text() and "fixed tolerance 0.0001" in ref.band_text()
    said = replace(ref, cause="dynamo's NumPy random stream").describe()
    assert said.startswith("the patched compiled run equals the original eager run (3 losses, 2 parameters")
    assert "the original compiled run differed from it (loss at step 1: 0.7 compiled, 0.9 eagerly)" in said
    assert said.endswith(": dynamo's NumPy random stream")


def test_restoring_the_eager_program_is_judged_with_the_fixed_tolerance_only() -> None:
    original_c = _drew_host_random(_run("bc", gain=1.4, losses=[1.0, 0.7, 0.65]))
    # 0.002 relative off the original eager run: neither equal to it nor within a band (none is measured)
    ref = reference(original_c, _run("be"), _run("ac", gain=1.02), _run("ae"))
    assert ref.whose == COMPILER and ref.band is None
    # the patched script computes something else eagerly too: the rewrite's, even if compiled it matches
    ref = reference(original_c, _run("be"), _run("ac"), _run("ae", gain=1.02))
    assert ref.whose == REWRITE
    # the original compiled run already equals its eager run: nothing was restored (within the band as before)
    ref = reference(_run("bc"), _run("be"), _run("ac", gain=1.00001), _run("ae", gain=1.00001))
    assert ref.whose == NEITHER and not ref.stream


def test_the_verdict_accepts_the_restored_eager_program_and_keeps_the_count_gate() -> None:
    from dataclasses import replace

    from torchmend.verify.compare import NEUTRAL, REFUSED, restored_verdict
    from torchmend.verify.reference import KNOWN_DIVERGENCES

    def breaks(run: ArmRun, n: int) -> ArmRun:
        run.summary = replace(run.summary, graph_breaks=n)
        return run

    original_c = breaks(_drew_host_random(_run("bc", gain=1.4, losses=[1.0, 0.7, 0.65])), 6)
    ref = reference(original_c, _run("be"), _run("ac"), _run("ae"))
    v = restored_verdict(ref, [original_c], [breaks(_run("ac"), 1)])
    assert v is not None and v.verdict == NEUTRAL and not v.reasons
    assert v.numerics is not None and v.numerics.equal and v.numerics.max_rel_diff == 0.0  # against the eager run
    assert v.notes[0] == ref.describe() and v.reference is ref
    assert v.numerics_text().startswith("against the original eager run, numerics match (3 losses")
    # more breaks than the original: refused, restored or not
    v = restored_verdict(ref, [original_c], [breaks(_run("ac"), 7)])
    assert (
        v is not None
        and v.verdict == REFUSED
        and [r.text for r in v.reasons] == ["more graph breaks: 6 before, 7 after"]
    )
    # anything but a restored eager program: the gate as it was (None: the caller goes on with the band)
    other = reference(original_c, _run("be"), _run("ac", gain=1.02), _run("ae"))
    assert restored_verdict(other, [original_c], [_run("ac", gain=1.02)]) is None
    assert "NumPy random stream" in replace(ref, cause=KNOWN_DIVERGENCES["disable-host-random-helper"]).describe()


def test_a_rewrite_is_blamed_only_far_beyond_the_originals_own_eager_noise() -> None:
    # the original does not compute the same twice: its two eager runs are 0.0003 apart (gain 1.0 vs 1.003)
    original_c, original_e, again = _run("bc"), _run("be"), _run("be2", gain=1.003)
    # one eager run each way: 0.0002 apart, beyond rtol 1e-4, and it reads as the rewrite's
    ref = reference(original_c, original_e, _run("ac", gain=1.002), _run("ae", gain=1.002))
    assert ref.whose == REWRITE and ref.noise is None
    # the original's second eager run says that is its own noise: no blame, the band at least the noise, and why
    ref = reference(original_c, original_e, _run("ac", gain=1.002), _run("ae", gain=1.002), eager_again=again)
    assert ref.whose == NEITHER and ref.noise is not None and abs(ref.noise - 0.0003) < 1e-9
    assert ref.band is not None and ref.band >= ref.noise and ref.tolerance >= ref.noise
    assert "does not compute the same twice" in ref.band_text() and "does not compute the same twice" in ref.describe()
    assert "torch.use_deterministic_algorithms(True)" in ref.describe()
    # a patch that scales the output: far beyond the noise, still the rewrite's
    ref = reference(original_c, original_e, _run("ac", gain=1.5), _run("ae", gain=1.5), eager_again=again)
    assert ref.whose == REWRITE and ref.to_json()["noise"] is not None


def test_the_originals_repeated_compiled_runs_measure_its_noise_too() -> None:
    ref = reference(_run("bc"), _run("be"), _run("ac"), _run("ae"), compiled_again=[_run("bc2", gain=1.004)])
    assert ref.noise is not None and abs(ref.noise - 0.0004) < 1e-9 and ref.band == ref.noise
    # runs that compute the same twice: noise 0, nothing widened
    ref = reference(_run("bc"), _run("be"), _run("ac"), _run("ae"), compiled_again=[_run("bc2")], eager_again=_run("e"))
    assert ref.noise == 0.0 and ref.band == 0.0 and not ref.noisy
    # a repeat that failed or went another way measures nothing
    ref = reference(_run("bc"), _run("be"), _run("ac"), _run("ae"), compiled_again=[_run("x", losses=LOSSES[:1])])
    assert ref.noise is None


def test_a_patched_run_still_drawing_host_random_numbers_is_no_miscompile() -> None:
    # both scripts compute the same eagerly; compiled, the patched run (still a TM110 draw through dynamo) differs
    # from its eager run: another random stream, not the compiler's fault
    ref = reference(_run("bc"), _run("be"), _drew_host_random(_run("ac", gain=1.5)), _run("ae"))
    assert ref.whose == NEITHER and ref.patched_stream
    assert "still draws NumPy or Python random numbers through dynamo" in ref.describe()
    # the same difference without the draw: the compiler's
    assert reference(_run("bc"), _run("be"), _run("ac", gain=1.5), _run("ae")).whose == COMPILER
