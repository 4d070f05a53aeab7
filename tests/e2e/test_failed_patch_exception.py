"""A patched run that fails under torch.compile: the verdict shows the exception (the error dynamo wrapped), not
the last line of PyTorch's hint ("Set TORCHDYNAMO_VERBOSE=1 for the internal stack trace ...")."""

from __future__ import annotations

import textwrap
from pathlib import Path

from torchmend.profiler.runner import RunSpec, run
from torchmend.verify.compare import REFUSED, judge
from torchmend.verify.runs import from_outcome

SCRIPT = textwrap.dedent(
    """
    import torch

    @torch.compile(backend="aot_eager")
    def step(x, w):
        return (x @ w).relu().sum()

    w = torch.randn(4, 4, requires_grad=True)
    opt = torch.optim.SGD([w], lr=0.1)
    for i in range(2):
        loss = step(torch.randn(3, 4), w)
        loss.backward()
        opt.step()
        opt.zero_grad()
    """
)
# A "fix" that gets a shape wrong: dynamo fails on the fake-tensor run and wraps the RuntimeError.
PATCHED = SCRIPT.replace("(x @ w)", "(x @ w.t()[:3])")


def test_the_verdict_names_the_wrapped_error(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    before = from_outcome("before", 0, run(RunSpec(script=script, timeout=120, seed=0)), tmp_path)
    overlay = ((str(script), PATCHED),)
    after = from_outcome("after", 0, run(RunSpec(script=script, timeout=120, seed=0, overlay=overlay)), tmp_path)
    assert not before.failed and after.failed
    assert "TORCHDYNAMO_VERBOSE" in after.outcome.end["error"]  # what torch 2.13 appends to the message
    v = judge([before], [after])
    assert v.verdict == REFUSED
    said = next(r for r in v.reasons if r.startswith("the patched script failed"))
    assert "TORCHDYNAMO_VERBOSE" not in said and "from user code" not in said
    assert "RuntimeError(" in said and ("size mismatch" in said or "must have same" in said), said
