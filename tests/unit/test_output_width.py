"""Off a terminal with no $COLUMNS (a pipe, a CI log), output is not hard-wrapped at rich's 80 columns: a long path
is printed whole on one line, where it can be copied (issue 41)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def _piped(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    return subprocess.run(
        [sys.executable, "-m", "torchmend", *args],
        cwd=cwd,
        env=env | {"NO_COLOR": "1"},
        stdin=subprocess.DEVNULL,  # no terminal on any of the three streams
        capture_output=True,
        text=True,
        timeout=60,
    )


def _deep(tmp_path: Path) -> Path:
    deep = tmp_path / "a_rather_long_folder_name_for_a_project" / "with_some_more_depth" / "and_then_some_more"
    deep.mkdir(parents=True)
    return deep


def test_a_long_path_on_stdout_is_one_line(tmp_path: Path) -> None:
    deep = _deep(tmp_path)
    (deep / "pyproject.toml").write_text("[tool.torchmend]\nsteps = 5\n")
    r = _piped(["config"], deep)
    assert r.returncode == 0, r.stderr
    where = str(deep / "pyproject.toml")
    assert len(where) > 80
    assert any(where in line for line in r.stdout.splitlines()), r.stdout


def test_a_long_path_in_an_error_is_one_line(tmp_path: Path) -> None:
    script = _deep(tmp_path) / "no_such_training_script_with_a_long_name.py"
    r = _piped(["scan", str(script)], tmp_path)
    assert r.returncode == 3
    assert f"script not found: {script}" in r.stderr.splitlines()[0], r.stderr
