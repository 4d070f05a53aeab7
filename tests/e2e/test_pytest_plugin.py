"""The pytest plugin (torchmend/plugin/) in a real pytest run of a small project (pytester, one subprocess for every
case: torch is imported and warmed up once), on aot_eager, the backend docs/pytest.md advises on a CPU."""

from __future__ import annotations

import json

import pytest

pytest_plugins = ["pytester"]

MODEL = """\
import torch
from torch import nn


class Printing(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        h = torch.relu(self.fc(x))
        print("hidden", h.shape)
        return h.sum(dim=1)


class Commented(Printing):
    def forward(self, x):
        h = torch.relu(self.fc(x))
        print("hidden", h.shape)  # torchmend: ignore[TM101]
        return h.sum(dim=1)


class Clean(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        return torch.relu(self.fc(x)).sum(dim=1)


def scaled(x, scale):
    return torch.tanh(x) * scale
"""

QUIET = """\
import torch


def noisy(x):
    print("noisy", x.shape)
    return x + 1
"""

TESTS = """\
import pytest
import torch
import torch._logging._internal as tlog

from model import Clean, Commented, Printing, scaled
from quiet import noisy

BEFORE = (tlog.trace_log.level, tlog._init_logs)


@pytest.mark.torchmend(graph_breaks=0, recompiles=0)
def test_print():
    torch.compile(Printing(), backend="aot_eager")(torch.randn(2, 8))


@pytest.mark.torchmend
def test_clean():
    model = torch.compile(Clean(), backend="aot_eager")
    for _ in range(3):
        model(torch.randn(2, 8))


@pytest.mark.torchmend
def test_float():
    f = torch.compile(scaled, backend="aot_eager")
    for scale in (0.5, 0.25, 0.125):
        f(torch.randn(4), scale)


@pytest.mark.torchmend
def test_comment():
    torch.compile(Commented(), backend="aot_eager")(torch.randn(2, 8))


@pytest.mark.torchmend
def test_per_file_ignores():
    torch.compile(noisy, backend="aot_eager")(torch.randn(3))


@pytest.mark.torchmend
def test_nothing():
    Clean()(torch.randn(2, 8))


def test_block(torchmend_compile):
    model = torch.compile(Printing(), backend="aot_eager")
    with torchmend_compile(graph_breaks=1, max_graphs=2):
        model(torch.randn(2, 8))


def test_warm_steady(torchmend_compile):
    model = torch.compile(Clean(), backend="aot_eager")
    model(torch.randn(2, 8))
    with torchmend_compile(reset=False):
        model(torch.randn(2, 8))


def test_warm_recompiles(torchmend_compile):
    f = torch.compile(scaled, backend="aot_eager")
    f(torch.randn(4), 2.0)
    with torchmend_compile(reset=False):
        f(torch.randn(4), 3.0)


@pytest.mark.torchmend(graph_break=0)
def test_misspelt():
    raise AssertionError("the body must not run")


def test_zz_state_restored():
    # torch's own LazyTraceHandler removes itself at the first record without TORCH_TRACE, plugin or not
    assert not [h for h in tlog.trace_log.handlers if type(h).__name__ == "TraceHandler"]
    assert (tlog.trace_log.level, tlog._init_logs) == BEFORE
"""

PYPROJECT = """\
[tool.torchmend]
per-file-ignores = { "quiet.py" = ["TM101"] }
"""


def test_plugin_in_a_pytest_run(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(model=MODEL, quiet=QUIET, test_models=TESTS)
    pytester.makefile(".toml", pyproject=PYPROJECT)
    report = pytester.path / "report.json"
    # -p torchmend.plugin: the entry point's own name, so an installed torchmend is not registered twice
    result = pytester.runpytest_subprocess(
        "-p", "torchmend.plugin", "--torchmend-report", "--torchmend-report-json", str(report), "--torchmend-fix-diff"
    )
    out = result.stdout.str()
    result.assert_outcomes(passed=6, failed=5)
    outcomes = {t["test"].split("::")[1]: t for t in json.loads(report.read_text())["tests"]}

    # A print in forward: TM101 at its line, with the fix and its diff (nothing written).
    assert "TM101 print() inside compiled code at model.py:12 in forward (1×)" in out
    assert "gate-print" in out and "+        if not torch.compiler.is_compiling():" in out
    assert "docs/rules/TM101.md" in out
    assert "print(" in (pytester.path / "model.py").read_text().splitlines()[11]
    assert outcomes["test_print"]["graph_breaks"] == 1 and not outcomes["test_print"]["passed"]

    # A float argument that changes: the recompile, its guard, the line that uses it and the call that passes it.
    assert "TM202 Python number argument that changes between calls at model.py:33 in scaled" in out
    assert "guard failed: scale == 0.5" in out
    assert "The compiled function is called from test_models.py:27." in out
    assert outcomes["test_float"]["recompiles"] >= 1

    # Clean, a suppression comment, per-file-ignores: pass; what was suppressed is counted.
    assert outcomes["test_clean"]["passed"] and outcomes["test_clean"]["graphs"] == 1
    assert outcomes["test_comment"]["passed"] and outcomes["test_comment"]["suppressed"] == 1
    assert outcomes["test_per_file_ignores"]["passed"] and outcomes["test_per_file_ignores"]["suppressed"] == 1

    # Compiling nothing is said, and fails: a limit of 0 breaks would otherwise pass with nothing checked.
    assert "this test compiled nothing" in out and outcomes["test_nothing"]["compiled_nothing"]
    # A misspelt argument fails the test before its body runs, and says which.
    assert "@pytest.mark.torchmend on test_models.py::test_misspelt: unknown argument graph_break" in out
    assert "the body must not run" not in out
    # --torchmend-report: one line per recorded test, and its findings
    result.stdout.fnmatch_lines(
        [
            "*torchmend report*",
            "test_models.py::test_print: 2 graphs, 1 graph breaks, 0 recompiles, 2 compiles, *: OVER THE LIMITS",
            "    TM101 model.py:12 (1x) print() inside compiled code",
            "test_models.py::test_clean: 1 graphs, 0 graph breaks, 0 recompiles, 1 compiles, *: ok",
            "test_models.py::test_nothing: 0 graphs, *: NOTHING COMPILED",
        ]
    )
    # The fixture records its block only: one break allowed there.
    assert outcomes["test_block"]["passed"] and outcomes["test_block"]["graph_breaks"] == 1
    # After a warm-up (reset=False) the block's steady state compiles nothing, and passes; a recompile fails.
    assert outcomes["test_warm_steady"]["passed"] and outcomes["test_warm_steady"]["compiles"] == 0
    assert not outcomes["test_warm_recompiles"]["passed"] and outcomes["test_warm_recompiles"]["recompiles"] == 1
