"""TM112: a script dynamo itself crashed on (InternalTorchDynamoError while tracing the user's code) is a finding at
the user's line with the remedy, not only exit 8. Real event streams of `torchmend scan --backend aot_eager
--keep-events` on fixtures/dynamo_crash/train.py (a Lightning-style `training_step` whose `self.log` checks the
step's signature with inspect.getfullargspec): torch 2.13 crashes, 2.14 compiles it (torch 2.11 had no 2.11 machine
here). The live scan: tests/e2e/test_compile_failures.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import ROOT

from torchmend.profiler import pathmap
from torchmend.profiler.events import read_events
from torchmend.profiler.failures import dynamo_crash, dynamo_crash_finding
from torchmend.profiler.findings import Places, analyse

FIXTURE = ROOT / "fixtures" / "dynamo_crash"
RECORDED_IN = "/work/wt/example"  # the checkout the recordings were made in


def _findings(version: str):
    events = read_events(FIXTURE / f"torch-{version}.jsonl")
    events = pathmap.apply(events, [pathmap.Mapping(RECORDED_IN, str(ROOT))])
    end = next(e for e in reversed(events) if e.get("ev") == "end")
    return analyse(events, FIXTURE, end["reason"])[0], end


def test_the_crash_on_torch_2_13_is_a_finding_at_the_users_line_with_the_remedy():
    findings, end = _findings("2.13")
    assert end["reason"] == "error"
    (f,) = findings
    assert (f.rule, f.file, f.line, f.function, f.count) == ("TM112", "train.py", 18, "step_takes", 1)
    assert f.kind == "script_failure" and f.severity == "fix"
    assert f.code == "return name in inspect.getfullargspec(fn).args"
    assert "AttributeError: 'method' object has no attribute '__dict__'" in f.reason
    assert "reached from training_step (line 35) -> log (line 28)" in f.reason
    # the helper the compiled step reaches is decorated where it is defined
    assert "`getfullargspec` (inspect.py)" in f.reason
    assert "decorate `step_takes` with @torch.compiler.disable where it is defined" in f.reason


def test_torch_2_14_compiles_the_same_code_and_reports_no_crash():
    findings, end = _findings("2.14")
    assert end["reason"] != "error"
    assert [f.rule for f in findings] == ["TM299"]  # `self.logged` filled after the first call: one recompile


LIGHTNING_SHAPE = """InternalTorchDynamoError: AttributeError: 'method' object has no attribute '__dict__'

from user code:
   File "{root}/model.py", line 41, in training_step
    self.log("train_loss", loss, prog_bar=True)
  File "/venv/lib/python3.11/site-packages/lightning/pytorch/core/module.py", line 507, in log
    is_param_in_hook_signature(self.training_step, "dataloader_iter", explicit=True)
  File "/venv/lib/python3.11/site-packages/lightning/pytorch/utilities/signature_utils.py", line 30, in is_param_in_hook_signature
    parameters = inspect.getfullargspec(hook_fx)
  File "/usr/lib/python3.11/inspect.py", line 1369, in getfullargspec
    sig = _signature_from_callable(func,

Set TORCHDYNAMO_VERBOSE=1 for the internal stack trace
"""


def test_a_crash_inside_a_library_is_filed_at_the_call_in_the_compiled_function(tmp_path: Path):
    """Lightning's own `log` is not the user's to decorate: the finding is at their `self.log(...)` line, and the
    remedy moves the call into a disabled helper."""
    (tmp_path / "model.py").write_text("\n" * 40 + '        self.log("train_loss", loss, prog_bar=True)\n')
    f = dynamo_crash_finding(Places(tmp_path, []), {"error": LIGHTNING_SHAPE.format(root=tmp_path)})
    assert f is not None
    assert (f.rule, f.file, f.line, f.function) == ("TM112", "model.py", 41, "training_step")
    assert f.code == 'self.log("train_loss", loss, prog_bar=True)'
    assert "reached from" not in f.reason  # nothing of the user's between the compiled function and the line
    assert "`log` (module.py)" in f.reason
    assert "move the call into a helper decorated with @torch.compiler.disable" in f.reason


@pytest.mark.parametrize(
    "error",
    [
        # the user's own exception, which dynamo re-raises as it would run eagerly: not dynamo's crash
        'ValueError: bad shape\n\nfrom user code:\n   File "/p/train.py", line 3, in f\n    raise ValueError\n',
        # dynamo's crash with no user stack to place it at
        "InternalTorchDynamoError: AttributeError: boom\n",
        "",
    ],
)
def test_other_errors_are_not_a_dynamo_crash(error: str):
    assert dynamo_crash({"error": error}) is None


def test_the_qualified_exception_name_is_read_too():
    text = LIGHTNING_SHAPE.format(root="/p").replace(
        "InternalTorchDynamoError:", "torch._dynamo.exc.InternalTorchDynamoError:", 1
    )
    crash = dynamo_crash({"error": text})
    assert crash is not None and crash.error == "AttributeError: 'method' object has no attribute '__dict__'"
    assert [fr.function for fr in crash.frames] == [
        "training_step",
        "log",
        "is_param_in_hook_signature",
        "getfullargspec",
    ]
