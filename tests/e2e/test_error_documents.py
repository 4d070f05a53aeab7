"""A machine format gets a document on every error (torchmend/cli/failure.py, docs/formats.md "On an error"): with
`--format json`, `sarif` or `github`, a command that fails prints on stdout a document that parses and carries the
error and the exit code, whichever way it failed: a missing script or path, a syntax error, an invalid
configuration, a command line click refuses, a script that crashes, a run that compiles nothing. The real CLI in a
subprocess; only the last two run a script (no torch.compile: a few seconds each)."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from conftest import ROOT, torchmend

SCHEMA = json.loads((ROOT / "fixtures" / "sarif" / "sarif-schema-2.1.0.json").read_text())


def error_json(stdout: str, code: int) -> dict:
    doc = json.loads(stdout)  # the whole of stdout is one document
    assert doc["schema"] == "torchmend.error/1"
    assert doc["exit_code"] == code
    return doc


def error_sarif(stdout: str, code: int) -> dict:
    log = json.loads(stdout)
    jsonschema.validators.validator_for(SCHEMA)(SCHEMA).validate(log)
    (run,) = log["runs"]
    assert run["results"] == []
    (invocation,) = run["invocations"]
    assert invocation["executionSuccessful"] is False
    assert invocation["exitCode"] == code
    (note,) = invocation["toolExecutionNotifications"]
    assert note["level"] == "error"
    return note


def test_scan_json_of_a_missing_script_names_it(tmp_path: Path):
    r = torchmend("scan", "nosuch.py", "--format", "json", cwd=tmp_path)
    assert r.returncode == 3, r.stderr
    doc = error_json(r.stdout, 3)
    assert doc["command"] == "scan"
    assert doc["exit_name"] == "SCRIPT_NOT_FOUND"
    assert doc["error"]["message"] == "script not found: nosuch.py"


def test_scan_sarif_of_a_syntax_error_is_a_valid_log_with_the_error(tmp_path: Path):
    (tmp_path / "broken.py").write_text("def f(:\n    pass\n")
    r = torchmend("scan", "broken.py", "-f", "sarif", cwd=tmp_path)
    assert r.returncode == 4, r.stderr
    note = error_sarif(r.stdout, 4)
    assert "syntax error at" in note["message"]["text"] and "broken.py:1" in note["message"]["text"]
    assert note["descriptor"]["id"] == "SCRIPT_FAILED"


def test_fix_check_sarif_and_lint_json_of_a_missing_path(tmp_path: Path):
    r = torchmend("fix", "--check", "-f", "sarif", "gone.py", cwd=tmp_path)
    assert r.returncode == 3, r.stderr
    assert "gone.py" in error_sarif(r.stdout, 3)["message"]["text"]
    r = torchmend("lint", "gone.py", "--format", "json", cwd=tmp_path)
    assert r.returncode == 3, r.stderr
    assert error_json(r.stdout, 3)["command"] == "lint"


def test_lint_sarif_and_github_of_an_invalid_configuration(tmp_path: Path):
    (tmp_path / "pyproject.toml").write_text("[tool.torchmend]\nno-such-key = 1\n")
    (tmp_path / "train.py").write_text("x = 1\n")
    r = torchmend("lint", "train.py", "-f", "sarif", cwd=tmp_path)
    assert r.returncode == 24, r.stderr
    assert "no-such-key" in error_sarif(r.stdout, 24)["message"]["text"]
    r = torchmend("lint", "train.py", "-f", "github", cwd=tmp_path)
    assert r.returncode == 24, r.stderr
    (line,) = r.stdout.splitlines()
    assert line.startswith("::error title=torchmend exited 24 (CONFIG_INVALID)::") and "no-such-key" in line


@pytest.mark.parametrize(
    "argv",
    [
        ("scan", "--format", "json", "--no-such-option", "x.py"),  # click refuses it before the command runs
        ("scan", "--steps", "many", "-f", "json", "x.py"),  # a bad value before the format on the line
        ("verify", "x.py", "-f", "json"),  # neither --patch nor --patched-dir: the command's own usage error
    ],
)
def test_usage_errors_in_json(tmp_path: Path, argv: tuple[str, ...]):
    r = torchmend(*argv, cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    doc = error_json(r.stdout, 2)
    assert doc["exit_name"] == "USAGE" and doc["error"]["message"]


def test_a_format_after_the_dashes_is_the_scripts(tmp_path: Path):
    r = torchmend("scan", "nosuch.py", "--", "-f", "json", cwd=tmp_path)
    assert r.returncode == 3 and r.stdout == ""


def test_a_script_that_crashes_and_one_that_compiles_nothing(tmp_path: Path):
    (tmp_path / "crash.py").write_text("raise RuntimeError('boom at start')\n")
    r = torchmend("scan", "crash.py", "-f", "json", cwd=tmp_path)
    assert r.returncode == 4, r.stderr
    doc = error_json(r.stdout, 4)
    assert "failed before anything was compiled" in doc["error"]["message"]
    assert "RuntimeError: boom at start" in doc["error"]["detail"]  # the output's tail, as stderr shows it

    (tmp_path / "eager.py").write_text("print('no compile here')\n")
    r = torchmend("scan", "eager.py", "-f", "sarif", cwd=tmp_path)
    assert r.returncode == 5, r.stderr
    assert "without compiling anything" in error_sarif(r.stdout, 5)["message"]["text"]
