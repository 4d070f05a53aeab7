"""Numerics capture (losses, final-parameter fingerprints) in real child runs, and compare() on its own."""

from __future__ import annotations

import math
import random
import subprocess
import sys
from pathlib import Path

import pytest

from torchmend.profiler.runner import RunOutcome, RunSpec, run
from torchmend.values import Tolerance
from torchmend.verify.numerics import capture_of, compare

RTOL, ATOL = Tolerance().rtol, Tolerance().atol

# One worker runs this whole file under pytest-xdist: its module-scoped runs are shared by its tests.
pytestmark = pytest.mark.xdist_group("numerics")

# Seeds nothing itself: RunSpec(seed=...) must make two runs alike.
TRAIN = """\
import argparse
import torch
from torch import nn


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--crash-at", type=int, default=-1)
    args = parser.parse_args()
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1))
    compiled = torch.compile(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    for step in range(10):
        x = torch.randn(16, 8)
        y = x.sum(1, keepdim=True).sin()
        loss = nn.functional.mse_loss(compiled(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        if step == args.crash_at:
            raise RuntimeError("boom")


if __name__ == "__main__":
    main()
"""

CHANGED = TRAIN.replace(
    "        loss.backward()\n", "        if step >= 5:\n            loss = loss * 1.01\n        loss.backward()\n"
)


def _run(script: Path, **kw) -> RunOutcome:
    outcome = run(RunSpec(script=script, backend="aot_eager", seed=kw.pop("seed", 0), timeout=120, **kw))
    assert outcome.end, outcome.output_tail
    return outcome


@pytest.fixture(scope="module")
def script(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("numerics") / "train.py"
    path.write_text(TRAIN)
    return path


@pytest.fixture(scope="module")
def baseline(script) -> RunOutcome:
    return _run(script)


def test_capture_is_in_the_end_event(baseline):
    assert baseline.ended_by == "finished"
    cap = capture_of(baseline.end)
    assert len(cap["losses"]) == 10 and all(isinstance(x, float) and math.isfinite(x) for x in cap["losses"])
    # main() has returned: the parameters were read when its optimizer was freed
    shapes = [p["shape"] for p in cap["params"]]
    assert shapes == [[16, 8], [16], [1, 16], [1]]
    assert all(p["dtype"] == "float32" and p["abs"] > 0 and p["probe_abs"] > 0 for p in cap["params"])
    assert cap["numerics"]["losses_seen"] == 10 and cap["numerics"]["errors"] == []


def test_same_script_twice_gives_equal_captures(script, baseline):
    again = _run(script)
    assert again.end["losses"] == baseline.end["losses"]  # same seed, same machine: bit for bit
    assert again.end["params"] == baseline.end["params"]
    result = compare(baseline.end, again.end)
    assert result.equal and result.losses_equal and result.params_equal
    assert result.steps_compared == 10 and result.params_compared == 4
    assert result.first_divergence is None and result.max_abs_diff == 0.0


def test_changed_math_diverges_at_the_step_it_changed(script, baseline):
    # the patched text is served from memory, as `fix` verifies its changes
    changed = _run(script, overlay=((str(script), CHANGED),))
    result = compare(baseline.end, changed.end)
    assert not result.equal and not result.losses_equal
    d = result.first_divergence
    assert d is not None and d.step == 5
    assert d.after == pytest.approx(d.before * 1.01, rel=1e-6)
    assert result.params_equal is False and result.worst_param is not None
    assert "diverge at step 5" in result.describe()


def test_steps_budget_keeps_losses_and_params(script, baseline):
    stopped = _run(script, steps=4)
    assert stopped.ended_by == "steps"
    assert len(stopped.end["losses"]) == 4 and len(stopped.end["params"]) == 4
    assert stopped.end["losses"] == baseline.end["losses"][:4]
    result = compare(baseline.end, stopped.end)
    assert not result.losses_equal and result.steps_compared == 4
    assert result.first_divergence.step == 4 and result.first_divergence.after is None


def test_crash_keeps_losses_and_params(script, baseline):
    crashed = _run(script, args=("--crash-at", "2"))
    assert crashed.ended_by == "error" and "boom" in crashed.end["error"]
    assert crashed.end["losses"] == baseline.end["losses"][:3]
    assert [p["shape"] for p in crashed.end["params"]] == [[16, 8], [16], [1, 16], [1]]


def test_no_optimizer_means_no_params_and_every_backward_is_seen(tmp_path):
    path = tmp_path / "eval_only.py"
    path.write_text(
        "import random\nimport torch\nw = torch.ones(3, requires_grad=True)\n"
        "(w * 2).sum().backward()\ntorch.autograd.backward([(w * 3).sum(), (w * 4).sum()])\n"
        "w.sum().backward(inputs=[w])\ntorch.autograd.grad((w * 5).sum(), w)\n"
        "torch.Tensor.backward((w * random.random()).sum())\n"
    )
    outcome = run(RunSpec(script=path, timeout=60, seed=7))
    assert outcome.ended_by == "finished"
    random.seed(7)  # RunSpec.seed seeds `random` too
    expected = [6.0, 9.0, 12.0, 3.0, pytest.approx(3 * random.random(), rel=1e-6)]  # autograd.grad is no backward
    assert outcome.end["losses"] == expected
    assert outcome.end["params"] is None and "no optimizer" in outcome.end["numerics"]["params"]


def test_comparison_helpers_import_without_torch():
    code = "import sys, torchmend.verify.numerics as n; n.compare({}, {}); assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


# ------------------------------------------------------------------------------------------ compare()


def _p(total=1.0, absolute=2.0, probe=3.0, probe_abs=4.0, shape=(2, 2), dtype="float32"):
    return {"shape": list(shape), "dtype": dtype, "sum": total, "abs": absolute, "probe": probe, "probe_abs": probe_abs}


def test_compare_tolerance():
    a = [1.0, 0.5, 0.25]
    assert compare({"losses": a}, {"losses": [x * (1 + 0.5 * RTOL) for x in a]}).losses_equal
    far = compare({"losses": a}, {"losses": [1.0, 0.5 * (1 + 2 * RTOL), 0.25]})
    assert not far.losses_equal and far.first_divergence.step == 1
    assert far.max_rel_diff == pytest.approx(2 * RTOL / (1 + 2 * RTOL))
    assert compare({"losses": [0.0]}, {"losses": [ATOL / 2]}).losses_equal  # atol near zero
    assert not compare({"losses": [0.0]}, {"losses": [ATOL * 2]}).losses_equal
    assert compare({"losses": a}, {"losses": [1.0, 0.5, 0.26]}, Tolerance(rtol=0.1)).losses_equal


def test_compare_float32_drift_passes_a_real_change_fails():
    drift = [1.0 * (1 + 1e-7) ** i for i in range(300)]  # reordered float32 arithmetic, compounding
    assert compare({"losses": [1.0] * 300}, {"losses": drift}).equal
    assert not compare({"losses": [1.0] * 300}, {"losses": [1.0] * 5 + [1.01] * 295}).equal


def test_compare_lengths():
    short = compare({"losses": [1.0, 2.0, 3.0]}, {"losses": [1.0, 2.0]})
    assert not short.losses_equal and short.steps_compared == 2
    assert (short.losses_before, short.losses_after) == (3, 2)
    assert (short.first_divergence.step, short.first_divergence.before, short.first_divergence.after) == (2, 3.0, None)
    early = compare({"losses": [1.0, 2.0]}, {"losses": [1.0, 5.0, 3.0]})
    assert early.first_divergence.step == 1  # a divergence inside the common prefix comes first
    empty = compare({"losses": []}, {"losses": []})
    assert empty.losses_equal and empty.steps_compared == 0


def test_compare_nan_and_inf():
    nan, inf = math.nan, math.inf
    assert compare({"losses": [1.0, nan]}, {"losses": [1.0, nan]}).losses_equal
    one = compare({"losses": [1.0, nan, 2.0]}, {"losses": [1.0, 2.0, nan]})
    assert not one.losses_equal and one.first_divergence.step == 1 and one.max_abs_diff == inf
    assert math.isnan(one.first_divergence.before)
    assert compare({"losses": [inf]}, {"losses": [inf]}).losses_equal
    assert not compare({"losses": [inf]}, {"losses": [-inf]}).losses_equal


def test_compare_params():
    same = compare({"params": [_p(), _p(shape=(2,))]}, {"params": [_p(), _p(shape=(2,))]})
    assert same.params_equal and same.params_compared == 2
    # a sum that cancels to ~0 is judged against the parameter's magnitude, not against itself
    assert compare(
        {"params": [_p(total=1e-9, absolute=10.0)]}, {"params": [_p(total=2e-9, absolute=10.0)]}
    ).params_equal
    worst = compare({"params": [_p(), _p(probe=3.0)]}, {"params": [_p(), _p(probe=3.1)]})
    assert worst.params_equal is False and worst.equal is False
    assert (worst.worst_param.index, worst.worst_param.field, worst.worst_param.shape) == (1, "probe", [2, 2])
    assert worst.worst_param.rel_diff == pytest.approx(0.1 / 4.0)
    shape = compare({"params": [_p()]}, {"params": [_p(shape=(4,))]})
    assert shape.params_equal is False and shape.worst_param.field == "shape"
    count = compare({"params": [_p()]}, {"params": [_p(), _p()]})
    assert count.params_equal is False and "1 parameters before, 2 after" in count.params_note
    missing = compare({"losses": [1.0], "params": None}, {"losses": [1.0], "params": [_p()]})
    assert missing.params_equal is None and missing.equal  # nothing to compare is not a difference
    assert "before" in missing.params_note
    assert compare({"params": [_p(total=math.nan)]}, {"params": [_p(total=math.nan)]}).params_equal
    assert compare({"params": [_p(total=math.nan)]}, {"params": [_p()]}).params_equal is False


def test_comparison_serialises():
    import json

    result = compare({"losses": [1.0, 2.0], "params": [_p()]}, {"losses": [1.0, 2.5], "params": [_p()]})
    data = json.loads(json.dumps(result.to_json()))
    assert data["first_divergence"] == {"step": 1, "before": 2.0, "after": 2.5}
    assert data["rtol"] == RTOL and data["atol"] == ATOL
