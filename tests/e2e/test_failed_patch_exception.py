"""A patched run that fails under torch.compile: the verdict shows the exception (the error dynamo wrapped) and the
user's line, not the last line of PyTorch's hint ("Set TORCHDYNAMO_VERBOSE=1 ...") nor "the runs recorded 3 and 0
losses". One before-run serves both patches."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from torchmend.profiler.runner import RunSpec, run
from torchmend.values import Root
from torchmend.verify.compare import REFUSED, judge
from torchmend.verify.runs import ArmRun, from_outcome

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
# A "fix" that marks a dimension dynamic inside compiled code (issue 26: the mark_dynamic fix did this in a
# function the model's forward calls): dynamo refuses to trace the call.
MARKED = SCRIPT.replace("    return (x @ w)", "    torch._dynamo.maybe_mark_dynamic(x, 0)\n    return (x @ w)")


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, ArmRun]:
    root = tmp_path_factory.mktemp("failed_patch")
    script = root / "train.py"
    script.write_text(SCRIPT)
    return root, from_outcome("before", 0, run(RunSpec(script=script, timeout=120, seed=0)), Root(root))


def _after(root: Path, text: str) -> ArmRun:
    script = root / "train.py"
    overlay = ((str(script), text),)
    return from_outcome("after", 0, run(RunSpec(script=script, timeout=120, seed=0, overlay=overlay)), Root(root))


def test_the_verdict_names_the_wrapped_error(project: tuple[Path, ArmRun]) -> None:
    root, before = project
    after = _after(root, PATCHED)
    assert not before.failed and after.failed
    assert "TORCHDYNAMO_VERBOSE" in after.outcome.end["error"]  # what torch 2.13 appends to the message
    v = judge([before], [after], root=Root(root))
    assert v.verdict == REFUSED
    said = next(r.text for r in v.reasons if r.text.startswith("the patched script failed"))
    assert "TORCHDYNAMO_VERBOSE" not in said and "from user code" not in said
    assert "RuntimeError(" in said and ("size mismatch" in said or "must have same" in said), said


def test_a_call_dynamo_forbids_is_named_with_its_line(project: tuple[Path, ArmRun]) -> None:
    root, before = project
    after = _after(root, MARKED)
    v = judge([before], [after], root=Root(root))
    assert v.verdict == REFUSED
    line = MARKED.splitlines().index("    torch._dynamo.maybe_mark_dynamic(x, 0)") + 1
    assert v.failure is not None and (v.failure.display, v.failure.line) == ("train.py", line)
    said = v.reasons[0].text
    assert "Attempt to trace forbidden callable" in said and f"train.py:{line}" in said, said
    assert not any("recorded 2 and 0 losses" in r.text for r in v.reasons)
    assert v.numerics_text().startswith("not compared past step 0"), v.numerics_text()
