"""The TM108 rewrites under real torch, in a child process: the rewritten assert no longer breaks the graph
(aot_eager), passes on good input, and still raises on bad input, in eager mode and compiled."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "codemods" / "TM108"

# Runs one fixture file: `call(module, good)` / `call(module, bad)` eagerly and under torch.compile, and prints
# per mode the graph breaks dynamo counted and what a bad input raised.
CHILD = """\
import importlib.util, json, sys
import torch
import torch._dynamo as dynamo

spec = importlib.util.spec_from_file_location("fixture", sys.argv[1])
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
kind = sys.argv[2]
if kind == "range_tracker":
    fn = mod.RangeTracker().train()
    good, bad = (torch.randn(4, 3),), (torch.tensor([[1.0, float("nan")]]),)
else:
    fn = mod.normalise
    good = (torch.ones(2), torch.ones(2))
    bad = (torch.tensor([1e7, 1.0]), torch.ones(2))
out = {}
for mode in ("eager", "compiled"):
    dynamo.reset()
    f = fn if mode == "eager" else torch.compile(fn, backend="aot_eager")
    breaks = dynamo.explain(fn)(*good).graph_break_count if mode == "compiled" else 0
    dynamo.reset()
    f(*good)
    try:
        f(*bad)
        raised = None
    except Exception as e:
        raised = type(e).__name__
    out[mode] = {"breaks": breaks, "raised": raised}
print(json.dumps(out))
"""


def _run(tmp_path: Path, fixture: str, kind: str) -> dict:
    child = tmp_path / "child.py"
    child.write_text(CHILD)
    proc = subprocess.run(
        [sys.executable, str(child), str(FIXTURES / fixture), kind], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(
    "case, kind, compiled_error",
    [
        ("range_tracker_nan_check", "range_tracker", "RuntimeError"),  # assert kept, dynamo's _assert_async
        ("or_with_division", "normalise", "RuntimeError"),  # torch._assert_async written out
    ],
)
def test_rewritten_check_stays_in_graph_and_still_raises(tmp_path: Path, case: str, kind: str, compiled_error: str):
    before = _run(tmp_path, f"{case}.in.py", kind)
    after = _run(tmp_path, f"{case}.out.py", kind)
    assert before["compiled"]["breaks"] >= 1  # the original breaks the graph at the assert
    assert after["compiled"]["breaks"] == 0
    # the failing check raises in eager mode as before, and under compile too
    assert after["eager"]["raised"] == ("AssertionError" if kind == "range_tracker" else "RuntimeError")
    assert before["eager"]["raised"] == "AssertionError"
    assert after["compiled"]["raised"] == compiled_error


# The TM103 rewrite of buffers updated under a tensor test and a Python `elif` (fixtures/codemods/TM103/
# ema_range_buffers): same buffers and outputs as the original, step by step, for each momentum, with no break.
EMA_CHILD = """\
import importlib.util, json, sys
import torch
import torch._dynamo as dynamo


def load(path):
    spec = importlib.util.spec_from_file_location("fixture", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


before, after = load(sys.argv[1]), load(sys.argv[2])
out = {}
for momentum in (0.9, -1):
    ref = before.RangeObserver(momentum).train()
    new = after.RangeObserver(momentum).train()
    dynamo.reset()
    breaks = dynamo.explain(after.RangeObserver(momentum).train())(torch.randn(8)).graph_break_count
    dynamo.reset()
    compiled = torch.compile(new, backend="aot_eager")
    g = torch.Generator().manual_seed(0)
    worst = 0.0
    for step in range(4):
        x = torch.randn(8, generator=g) * (step + 1)
        worst = max(worst, (ref(x) - compiled(x)).abs().max().item())
        worst = max(worst, (ref.lo - new.lo).abs().max().item(), (ref.hi - new.hi).abs().max().item())
    out[str(momentum)] = {"breaks": breaks, "worst": worst}
print(json.dumps(out))
"""


def test_buffer_branch_rewrite_keeps_the_running_range(tmp_path: Path):
    child = tmp_path / "child.py"
    child.write_text(EMA_CHILD)
    folder = FIXTURES.parent / "TM103"
    proc = subprocess.run(
        [sys.executable, str(child), str(folder / "ema_range_buffers.in.py"), str(folder / "ema_range_buffers.out.py")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    for momentum, r in result.items():
        assert r["breaks"] == 0, momentum
        assert r["worst"] <= 1e-6, (momentum, r)


# TM109: the original trained eagerly against the gated rewrite compiled (aot_eager): equal losses and parameter
# gradients over three steps, and no graph break left.
LEAF_CHILD = """\
import importlib.util, json, sys
import torch
import torch._dynamo as dynamo


def load(path):
    spec = importlib.util.spec_from_file_location("fixture", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def train(module_cls, compiled):
    torch.manual_seed(0)
    model = module_cls().train()
    run = torch.compile(model, backend="aot_eager") if compiled else model
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(1)
    losses, grads = [], []
    for _ in range(3):
        loss = run(torch.randn(2, 64, generator=g)).pow(2).mean()
        loss.backward()
        losses.append(loss.item())
        grads.append(torch.cat([p.grad.flatten() for p in model.parameters()]))
        opt.step()
        opt.zero_grad()
    return losses, torch.stack(grads)


before, after = load(sys.argv[1]), load(sys.argv[2])
out = {}
for name, mod in (("before", before), ("after", after)):
    dynamo.reset()
    out[name + "_breaks"] = dynamo.explain(mod.ConvFrontEnd().train())(torch.randn(2, 64)).graph_break_count
ref_losses, ref_grads = train(before.ConvFrontEnd, compiled=False)
dynamo.reset()
losses, grads = train(after.ConvFrontEnd, compiled=True)
out["loss_diff"] = max(abs(a - b) for a, b in zip(losses, ref_losses))
out["grad_diff"] = (grads - ref_grads).abs().max().item()
print(json.dumps(out))
"""


def test_gated_requires_grad_keeps_losses_and_gradients(tmp_path: Path):
    child = tmp_path / "child.py"
    child.write_text(LEAF_CHILD)
    folder = FIXTURES.parent / "TM109"
    proc = subprocess.run(
        [
            sys.executable,
            str(child),
            str(folder / "conv_frontend_leaf.in.py"),
            str(folder / "conv_frontend_leaf.out.py"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["before_breaks"] >= 1 and result["after_breaks"] == 0, result
    assert result["loss_diff"] <= 1e-6 and result["grad_diff"] <= 1e-6, result


def test_fixture_fix_verifies_and_explains_what_it_leaves():
    """fixtures/scan/checks_and_random end to end: the assert, the buffer branch and the requires_grad line are
    rewritten, and the NumPy mask helper runs eagerly (TM110); the LayerDrop skip is a random-stream change (not
    accepted here). Under compile the original drew the mask from torch's generator (dynamo's NumPy stream), so the
    patched compiled run differs from the original compiled run and equals the original eager run: verified, with
    the eager reference saying so."""
    from conftest import ROOT, SCAN_FIXTURES, scan_events, scan_json

    from torchmend.analysis.source import Context
    from torchmend.codemods.base import NoFix, Proposal
    from torchmend.codemods.engine import Session
    from torchmend.model import Finding
    from torchmend.pipeline import verify
    from torchmend.profiler.events import END
    from torchmend.profiler.runner import RunOutcome, RunSpec
    from torchmend.sources import read_source
    from torchmend.values import Root
    from torchmend.verify.compare import NEUTRAL
    from torchmend.verify.reference import RESTORED
    from torchmend.verify.runs import from_outcome

    script = SCAN_FIXTURES / "checks_and_random" / "train.py"
    scan = scan_json(script)
    assert scan.returncode == 0, scan.stderr
    events = scan_events(script)
    end = next(e for e in reversed(events) if e.get("ev") == END)
    before = from_outcome("before", 0, RunOutcome(events, end["reason"], 0, 0.0, "", end), Root(ROOT))

    session = Session(Context(str(ROOT), read_source))
    results = session.propose([Finding.from_json(f) for f in scan.json["findings"]])
    # the LayerDrop skip is a random-stream change: fix --yes --unsafe leaves it (tests/e2e/test_layerdrop_random_stream)
    stream = [r for r in results if isinstance(r, Proposal) and r.safety == "random-stream"]
    assert [(p.finding.rule, p.finding.line) for p in stream] == [("TM103", 67)]
    accepted = [r for r in results if isinstance(r, Proposal) and r.safety != "random-stream"]
    for p in accepted:
        session.accept(p)
    assert sorted((f.rule, f.line) for p in accepted for f in p.findings) == [
        ("TM103", 33),
        ("TM108", 32),
        ("TM109", 57),
        ("TM110", 12),
        ("TM110", 15),
    ]
    assert not [r for r in results if isinstance(r, NoFix) and not r.skipped]

    overlay = tuple((path, new) for path, (_, new) in session.changed().items())
    spec = RunSpec(script=script, backend="aot_eager", cwd=ROOT)
    # untimed: this test is about the numbers; the helper that now runs eagerly may well make a 4-step toy slower
    verdict, _, a_runs = verify(
        spec, replace(spec, overlay=overlay), ROOT, reuse_before=(before,), reference=True, timed=False
    )
    left = sorted(f.rule for f in a_runs[0].findings if f.where == "project")  # lines below the rewrites moved
    assert left == ["TM103", "TM105"]  # the LayerDrop skip; one break at the call of the helper that runs eagerly
    assert verdict.verdict == NEUTRAL, verdict.reasons
    assert verdict.reference is not None and verdict.reference.whose == RESTORED, verdict.notes
    assert verdict.numerics is not None and verdict.numerics.equal and verdict.numerics.max_rel_diff == 0.0
    assert verdict.notes[0].startswith("the patched compiled run equals the original eager run (4 losses")
