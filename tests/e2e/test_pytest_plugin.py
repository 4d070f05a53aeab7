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

BEFORE = (tlog.trace_log.level, tlog.trace_log.propagate, tlog._init_logs)


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
    assert (tlog.trace_log.level, tlog.trace_log.propagate, tlog._init_logs) == BEFORE
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


EDGE_MODEL = """\
import torch


def shout(x):
    print("shout")
    return x + 1


def whisper(x):
    print("whisper")
    return x * 2
"""

EDGE_TESTS = """\
import pytest
import torch

from edge_model import shout, whisper


@pytest.mark.torchmend
def test_first():
    torch.compile(shout, backend="eager")(torch.randn(3))


@pytest.mark.torchmend
def test_second():
    torch.compile(whisper, backend="eager")(torch.randn(3))


@pytest.mark.torchmend
def test_skipped():
    pytest.skip("no GPU here")


@pytest.mark.torchmend(ignore=None)
def test_ignore_none():
    raise AssertionError("the body must not run")


@pytest.mark.torchmend(ignore=5)
def test_ignore_int():
    raise AssertionError("the body must not run")


def test_reset_word(torchmend_compile):
    with torchmend_compile(reset="no"):
        raise AssertionError("the block must not run")
"""


def test_plugin_edge_cases(pytester: pytest.Pytester) -> None:
    """Two tests that each need a setting before their compile, a test that skips itself, and arguments of the
    wrong type (issue 41). One subprocess; backend="eager": the print breaks in dynamo, before any backend."""
    pytester.makepyfile(edge_model=EDGE_MODEL, test_edges=EDGE_TESTS)
    report = pytester.path / "report.json"
    result = pytester.runpytest_subprocess(
        "-p", "torchmend.plugin", "--torchmend-report-json", str(report), "--torchmend-fix-diff"
    )
    out = result.stdout.str()
    result.assert_outcomes(failed=5, skipped=1)
    data = json.loads(report.read_text())

    # Each test's diff puts the setting before that test's own compile, not the file's first one.
    added = "+    torch._dynamo.config.reorderable_logging_functions.add(print)"
    # Only the failures section: on CI (the CI variable set) pytest's short summary repeats each failure's whole
    # message, diff included, where on a terminal it cuts it to one line.
    lines = out.split("short test summary info")[0].splitlines()
    after = [lines[i + 1] for i, line in enumerate(lines) if line == added]
    assert after == [
        '     torch.compile(shout, backend="eager")(torch.randn(3))',
        '     torch.compile(whisper, backend="eager")(torch.randn(3))',
    ], out

    # A test that skips itself is reported as skipped, in the terminal and the JSON, not as a failure.
    assert "test_edges.py::test_skipped: SKIPPED (no GPU here): nothing checked" in out
    assert "NOTHING COMPILED" not in out and "compiled nothing" not in out
    assert [t["test"] for t in data["tests"]] == ["test_edges.py::test_first", "test_edges.py::test_second"]
    assert data["skipped"] == [{"test": "test_edges.py::test_skipped", "reason": "no GPU here"}]

    # Wrong types: the argument, what it takes and what it got, and no traceback; the body never runs.
    assert (
        "@pytest.mark.torchmend on test_edges.py::test_ignore_none: ignore must be a list of rule codes or "
        "prefixes (['TM104', 'TM2']), not None" in out
    )
    assert "test_edges.py::test_ignore_int: ignore must be a list of rule codes or prefixes" in out
    assert "not 5 (int)" in out
    assert "torchmend_compile in test_edges.py::test_reset_word: reset must be True or False, not 'no' (str)" in out
    assert "must not run" not in out
    assert "TypeError" not in out and "Traceback" not in out and "verdict.py" not in out
    # The trace logger's DEBUG records reach the recorder only, not pytest's log capture of each failure.
    assert "torch.__trace" not in out


PLAIN_TEST = """\
import pathlib

import pytest


@pytest.mark.torchmend
def test_marked():
    pathlib.Path("ran").write_text("")
"""


@pytest.mark.parametrize(
    "where, error",
    [
        ("missing/report.json", "--torchmend-report-json missing/report.json: the folder * does not exist*"),
        (".", "--torchmend-report-json .: is a folder; give the path of a file to write, e.g. ./report.json"),
    ],
)
def test_report_json_path_is_checked_before_the_tests(pytester: pytest.Pytester, where: str, error: str) -> None:
    pytester.makepyfile(test_plain=PLAIN_TEST)
    result = pytester.runpytest_inprocess("-p", "torchmend.plugin", "--torchmend-report-json", where)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: torchmend: {error}"])
    assert not (pytester.path / "ran").exists()


def test_report_json_whose_folder_goes_during_the_run(pytester: pytest.Pytester) -> None:
    """Checked at configure; removed by a test since: one line saying so, exit 3, no traceback."""
    (pytester.path / "out").mkdir()
    pytester.makepyfile(test_rm="import shutil\n\ndef test_rm():\n    shutil.rmtree('out')\n")
    result = pytester.runpytest_inprocess("-p", "torchmend.plugin", "--torchmend-report-json", "out/r.json")
    assert result.ret == pytest.ExitCode.INTERNAL_ERROR
    result.stdout.fnmatch_lines(["torchmend: --torchmend-report-json: cannot write */out/r.json: No such file*"])
    assert "Traceback" not in result.stdout.str() + result.stderr.str()


@pytest.mark.parametrize("folder", [".", "sub"])
def test_invalid_config_is_a_usage_error_before_the_tests(pytester: pytest.Pytester, folder: str) -> None:
    """[tool.torchmend] at the rootdir (pytest_configure), or beside a marked test below it (at collection)."""
    sub = pytester.path / folder
    sub.mkdir(exist_ok=True)
    (sub / "pyproject.toml").write_text('[tool.torchmend]\nselct = ["TM1"]\n')
    (sub / "test_plain.py").write_text(PLAIN_TEST)
    result = pytester.runpytest_inprocess("-p", "torchmend.plugin")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    wrong = f"ERROR: torchmend: {sub.resolve() / 'pyproject.toml'}:2: unknown key `selct` in [tool.torchmend]; did"
    assert wrong + " you mean `select`?" in result.stderr.lines
    assert not (pytester.path / "ran").exists() and not (sub / "ran").exists()
