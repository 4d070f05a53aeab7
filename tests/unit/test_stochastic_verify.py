"""verify/stochastic.py: losses and parameter sums of several seeds per arm compared as distributions (Welch's t
against T_MAX), on recorded-shaped END events."""

from __future__ import annotations

import math

import pytest

from torchmend.profiler.runner import RunSpec
from torchmend.verify.stochastic import SEEDS, T_MAX, VERDICT, compare_distributions, seeds_for, welch

SEEDS4 = (0, 1, 2, 3)


def _end(losses: list[float], sums: list[float] | None = None) -> dict:
    params = [{"sum": s, "abs": abs(s), "probe": 0.0} for s in sums] if sums is not None else None
    return {"losses": losses, "params": params}


def test_welch_zero_for_equal_samples_and_large_for_shifted_ones():
    assert welch([1.0, 1.1, 0.9, 1.0], [1.0, 1.1, 0.9, 1.0]) == 0.0
    assert welch([1.0, 1.1, 0.9, 1.0], [2.0, 2.1, 1.9, 2.0]) > 10
    # a zero spread on both sides: the floor (atol + rtol * |mean|) decides, not a division by zero
    assert welch([1.0] * 4, [1.0] * 4) == 0.0 and welch([1.0] * 4, [1.01] * 4) > T_MAX
    assert welch([math.nan] * 4, [math.nan] * 4) == 0.0 and welch([1.0] * 4, [math.nan] * 4) == math.inf


def test_same_distribution_from_other_draws_is_equivalent():
    before = [_end([1.0, 0.80], [3.0]), _end([1.2, 0.90], [3.1]), _end([0.9, 0.70], [2.9]), _end([1.1, 0.85], [3.0])]
    after = [_end([1.1, 0.82], [3.05]), _end([0.95, 0.75], [2.95]), _end([1.15, 0.88], [3.1]), _end([1.0, 0.8], [3.0])]
    d = compare_distributions(SEEDS4, before, after)
    assert d.equivalent and d.steps == 2 and d.params == 1
    assert d.describe().startswith(VERDICT) and "4 seeds per arm (0, 1, 2, 3)" in d.describe()


def test_a_shifted_loss_is_not_equivalent_and_names_the_step():
    before = [_end([1.0, 0.80]), _end([1.2, 0.90]), _end([0.9, 0.70]), _end([1.1, 0.85])]
    after = [_end([1.0, 1.80]), _end([1.2, 1.90]), _end([0.9, 1.70]), _end([1.1, 1.85])]
    d = compare_distributions(SEEDS4, before, after)
    assert not d.equivalent and d.worst is not None and d.worst.what == "loss at step 1"
    assert d.describe().startswith("not equivalent in distribution")


def test_a_shifted_parameter_is_not_equivalent():
    before = [_end([1.0], [3.0]), _end([1.2], [3.1]), _end([0.9], [2.9]), _end([1.1], [3.0])]
    after = [_end([1.0], [9.0]), _end([1.2], [9.1]), _end([0.9], [8.9]), _end([1.1], [9.0])]
    d = compare_distributions(SEEDS4, before, after)
    assert not d.equivalent and d.worst is not None and d.worst.what == "parameter 0 (sum)"


def test_a_script_that_seeds_itself_cannot_be_compared_in_distribution():
    same = [_end([1.0, 0.8]) for _ in SEEDS4]
    d = compare_distributions(SEEDS4, same, same)
    assert d.identical_seeds and not d.equivalent and "seeds itself" in d.describe()


@pytest.mark.parametrize(
    ("after", "problem"),
    [([_end([]) for _ in SEEDS4], "no loss"), ([_end([1.0]) for _ in SEEDS4], "different numbers of losses")],
)
def test_runs_without_comparable_losses_are_not_equivalent(after, problem):
    before = [_end([1.0 + i, 0.5]) for i in range(4)]
    d = compare_distributions(SEEDS4, before, after)
    assert not d.equivalent and problem in d.describe()


def test_the_seeds_start_at_the_runs_own():
    assert seeds_for(RunSpec(script="t.py", seed=7)) == tuple(range(7, 7 + SEEDS))
    assert seeds_for(RunSpec(script="t.py")) == tuple(range(SEEDS))


def test_pr_body_and_report_say_the_random_stream_changed():
    from conftest import ROOT

    from torchmend.codemods.examples import fix_text, proposals
    from torchmend.vcs.body import fix_report
    from torchmend.verify.compare import Verification

    source = (ROOT / "fixtures" / "codemods" / "TM103" / "layerdrop_random_skip.in.py").read_text()
    _, results = fix_text(source, name="encoder.py", random_stream=False)
    (p,) = proposals(results)
    before = [_end([1.0, 0.80]), _end([1.2, 0.90]), _end([0.9, 0.70]), _end([1.1, 0.85])]
    d = compare_distributions(SEEDS4, before, before)
    v = Verification(1, [], [], None, "improved", distribution=d)
    body = fix_report([p], v, "torchmend fix train.py --yes --allow-random-stream")
    assert "(**random stream changed**)" in body and "### Changes of the random stream" in body
    assert f"Numerics, in distribution (the random stream changed): {VERDICT}: 4 seeds per arm" in body
    assert v.to_json()["distribution"]["equivalent"] is True


def test_the_counts_tolerance_ignores_numbers_even_of_a_zero_magnitude_probe():
    """_Judge._in_distribution judges counts with a huge finite tolerance: with inf, inf * 0 is nan and a parameter
    whose probe magnitude is 0 (as one of SeamlessM4TModel's) was refused for its numbers."""
    from torchmend.values import Tolerance
    from torchmend.verify.numerics import compare

    def fp(x: float) -> dict:
        return {"sum": x, "abs": abs(x) + 1, "probe": 0.0, "probe_abs": 0.0, "shape": [32], "dtype": "float32"}

    b, a = {"losses": [1.0, 0.5], "params": [fp(3.0)]}, {"losses": [1.3, 0.2], "params": [fp(1.0)]}
    assert compare(b, a, Tolerance(1e300, 1e300)).equal
    assert not compare(b, a, Tolerance(math.inf, math.inf)).equal  # why inf is not used


def test_a_run_that_fails_on_a_later_seed_is_named_with_its_seed_and_exception():
    """A LayerDrop skip that sets the hidden states to None crashes the original on the seeds that skip (PegasusX with
    layerdrop on): the refusal names the arm, the seed and the exception, not "a run recorded no loss"."""
    from torchmend.profiler.runner import RunOutcome
    from torchmend.verify.runs import ArmRun
    from torchmend.verify.stochastic import failed_seeds

    def arm(name: str, ok: bool) -> ArmRun:
        end = {"ev": "end", "losses": [1.0, 0.9] if ok else [], "params": None}
        if not ok:
            end["error"] = "TypeError: 'NoneType' object is not subscriptable"
        outcome = RunOutcome([], "steps" if ok else "error", 0 if ok else 1, 2.0, "", end)
        return ArmRun(name, 0, [], None, outcome)  # type: ignore[arg-type]

    before = [arm("before", True), arm("before", True), arm("before", False), arm("before", True)]
    after = [arm("after", True)] * 4
    text = failed_seeds(SEEDS4, before, after, None)
    assert text.startswith("the original failed with seed 2: TypeError: 'NoneType' object is not subscriptable")
    assert text.endswith("a failure of the program itself on a random path, which the patched script only shares")
    assert failed_seeds(SEEDS4, after, after, None) == ""
    # the patched script failing the same way on another seed is still the program's failure; failing alone is not
    text = failed_seeds(SEEDS4, before, [*after[:3], arm("after", False)], None)
    assert "the patched script failed with seed 3" in text and text.endswith("which the patched script only shares")
    text = failed_seeds(SEEDS4, after, [*after[:3], arm("after", False)], None)
    assert text.startswith("the patched script failed with seed 3") and "program itself" not in text
