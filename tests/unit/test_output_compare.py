"""compare() on the outputs of compiled functions, on hand-made captures (the real runs are in
tests/e2e/test_output_numerics.py), and the verdict judge() gives a run without losses."""

from __future__ import annotations

import math

from torchmend.model import Summary
from torchmend.profiler.runner import RunOutcome
from torchmend.values import Tolerance
from torchmend.verify.compare import NEUTRAL, REFUSED, judge
from torchmend.verify.numerics import compare
from torchmend.verify.runs import ArmRun

RTOL = Tolerance().rtol


def _fp(total: float = 1.0, scale: float = 1.0, shape=(4, 8), dtype: str = "float32") -> dict:
    return {
        "shape": list(shape),
        "dtype": dtype,
        "sum": total * scale,
        "abs": 2.0 * scale,
        "probe": 3.0 * scale,
        "probe_abs": 4.0 * scale,
    }


def _calls(n: int, fn: str = "next_logits", **changed: dict) -> list[dict]:
    """n calls of `fn`, each returning one tensor; changed={"k": row} replaces call k's tensor."""
    return [{"fn": fn, "tensors": [changed.get(str(k), _fp(total=float(k)))], "more": 0} for k in range(n)]


def _capture(outputs, losses=()) -> dict:
    return {"losses": list(losses), "params": None, "outputs": outputs}


def test_equal_outputs_are_compared_and_said_so():
    result = compare(_capture(_calls(12)), _capture(_calls(12)))
    assert result.equal and result.compared and result.outputs_equal
    assert (result.outputs_before, result.outputs_after, result.outputs_compared) == (12, 12, 12)
    assert result.steps_compared == 0 and result.output_divergence is None
    assert result.describe().startswith("numerics match (12 outputs of compiled functions;")


def test_within_tolerance_is_equal_and_the_largest_difference_is_kept():
    near = _calls(5, **{"2": _fp(total=2.0 + 0.5 * RTOL * 2.0)})  # sums are measured against the sum of |x| (2)
    result = compare(_capture(_calls(5)), _capture(near))
    assert result.equal and 0 < result.max_output_rel_diff < RTOL


def test_diverging_at_call_k_names_the_call_the_function_and_the_field():
    far = _calls(6, **{"3": _fp(total=3.0, scale=1.01)})
    result = compare(_capture(_calls(6)), _capture(far))
    assert not result.equal and result.compared and result.outputs_equal is False
    d = result.output_divergence
    assert (d.call, d.fn, d.tensor) == (3, "next_logits", 0) and d.field in ("sum", "abs", "probe")
    assert math.isfinite(d.rel_diff) and d.rel_diff > RTOL
    assert result.outputs_compared == 6  # the whole common prefix, past the first divergence
    assert "outputs of compiled functions diverge at call 3 (next_logits): returned tensor 0" in result.describe()


def test_different_numbers_of_calls_are_not_equal():
    result = compare(_capture(_calls(8)), _capture(_calls(5)))
    assert not result.equal and result.outputs_compared == 5
    d = result.output_divergence
    assert (d.call, d.field, d.before, d.after) == (5, "missing", 8, 5)
    assert (
        "the runs made 8 and 5 calls to compiled functions (their outputs equal over the first 5)" in result.describe()
    )
    assert not compare(_capture([]), _capture(_calls(1))).equal  # one run never called its compiled function


def test_shape_dtype_tensor_count_and_function_changes():
    base = _capture(_calls(3))
    shape = compare(base, _capture(_calls(3, **{"1": _fp(total=1.0, shape=(4, 9))})))
    assert shape.output_divergence.field == "shape" and "returned tensor 0 shape [4, 8] before" in shape.describe()
    dtype = compare(base, _capture(_calls(3, **{"0": _fp(total=0.0, dtype="float16")})))
    assert (dtype.output_divergence.call, dtype.output_divergence.field) == (0, "dtype")
    two = _calls(3)
    two[2] = {**two[2], "tensors": two[2]["tensors"] * 2}
    assert "call 2 (next_logits): it returned 1 tensors before, 2 after" in compare(base, _capture(two)).describe()
    other = compare(base, _capture(_calls(3, fn="step")))
    assert "call 0 (next_logits): next_logits was called before, step after" in other.describe()


def test_nan_only_equals_nan_and_unread_subclasses_are_passed_over():
    nan = _fp(total=math.nan)
    assert compare(_capture(_calls(2, **{"1": nan})), _capture(_calls(2, **{"1": dict(nan)}))).equal
    assert not compare(_capture(_calls(2)), _capture(_calls(2, **{"1": nan}))).equal
    unread = {"shape": [2], "dtype": "float32"}  # a DTensor's row: named, not read
    assert compare(_capture(_calls(2, **{"0": unread})), _capture(_calls(2, **{"0": dict(unread)}))).equal


def test_nothing_recorded_is_not_compared():
    for before, after in ((_capture([]), _capture([])), ({}, {}), (_capture(None), _capture(_calls(2)))):
        result = compare(before, after)
        assert result.equal and not result.compared and result.outputs_equal is None
        assert result.describe().startswith("numerics not compared")


def test_with_losses_the_losses_are_compared_not_the_outputs():
    result = compare(_capture(_calls(4), losses=[1.0, 0.5]), _capture(_calls(3, fn="step"), losses=[1.0, 0.5]))
    assert result.equal and result.outputs_equal is None and result.outputs_note == "losses compared instead"
    assert result.describe().startswith("numerics match (2 losses")


def _arm(arm: str, outputs: list[dict], recompiles: int) -> ArmRun:
    summary = Summary(
        frames_compiled=1,
        compiles=1 + recompiles,
        graphs=1 + recompiles,
        graph_breaks=0,
        recompiles=recompiles,
        recompile_limit_hits=0,
        compile_seconds=1.0,
        steps=0,
        ended_by="finished",
        wall_seconds=5.0,
        torch_version="2.13",
        first_step_s=None,
        steady_step_s=None,
    )
    end = {"ev": "end", "reason": "finished", "losses": [], "params": None, "outputs": outputs}
    return ArmRun(arm, 0, [], summary, RunOutcome([], "finished", 0, 5.0, "", end))


def test_judge_on_a_sampling_script():
    fixed = judge([_arm("before", _calls(10), recompiles=1)], [_arm("after", _calls(10), recompiles=0)])
    assert fixed.verdict == NEUTRAL and not fixed.reasons
    assert fixed.numerics.describe().startswith("numerics match (10 outputs of compiled functions")
    wrong = _calls(10, **{"4": _fp(total=4.0, scale=1.01)})
    refused = judge([_arm("before", _calls(10), recompiles=1)], [_arm("after", wrong, recompiles=0)])
    assert refused.verdict == REFUSED
    assert "numerics differ: outputs of compiled functions diverge at call 4 (next_logits)" in refused.reasons[0].text
