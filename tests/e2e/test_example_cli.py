"""`torchmend example` as a new user runs it: the bundled example copied into a folder of its own and fixed there
(real child runs on aot_eager). Off a terminal it applies every change and shows each with its diff; on a terminal
it asks. That the wheel carries the example: tests/unit/test_example_packaging.py."""

from __future__ import annotations

import os
import re
import signal
import sys
from pathlib import Path

import pexpect
import pytest
from conftest import SCAN_FIXTURES, torchmend

EXAMPLE = SCAN_FIXTURES / "several" / "train.py"


@pytest.fixture(scope="module")
def off_terminal(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, int]:
    """One `torchmend example --into DIR` off a terminal (stdin not a tty): the folder, the output, the exit code."""
    base = tmp_path_factory.mktemp("example")
    folder = base / "ex"
    r = torchmend("example", "--into", str(folder), cwd=base, env={"TORCHMEND_STATE_DIR": str(base / "state")})
    return folder, r.stdout + r.stderr, r.returncode


def test_off_a_terminal_it_applies_every_change_and_shows_each_diff(off_terminal: tuple[Path, str, int]) -> None:
    folder, output, code = off_terminal
    assert code == 0, output[-3000:]
    assert f"copied the bundled example to {folder / 'train.py'}" in output
    assert "judging on the aot_eager backend" in output
    # each written change with its diff, the unsafe ones marked
    assert output.count("--- a/train.py") == 4 and "UNSAFE" in output
    assert sorted(re.findall(r"^train\.py:\d+\s+(TM\d{3})", output, re.M)) == ["TM101", "TM103", "TM201", "TM202"]
    assert "Wrote 1 file (4 changes): train.py" in output
    assert f"the example's files are in {folder} (to undo a written fix: torchmend undo --project {folder})" in output
    written = (folder / "train.py").read_text()
    assert written != EXAMPLE.read_text() and "torch.where(h.mean() > 1.0" in written


def test_into_a_folder_that_has_a_train_py_is_refused(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("mine\n")
    r = torchmend("example", "--into", str(tmp_path))
    assert r.returncode == 2 and "exists already" in r.stderr
    assert (tmp_path / "train.py").read_text() == "mine\n"


def test_on_a_terminal_it_asks_about_each_change(tmp_path: Path) -> None:
    env = dict(os.environ, NO_COLOR="1", COLUMNS="160", TERM="dumb", TORCHMEND_STATE_DIR=str(tmp_path / "state"))
    child = pexpect.spawn(
        sys.executable,
        ["-m", "torchmend", "example", "--into", str(tmp_path / "ex")],
        cwd=str(tmp_path),
        env=env,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        encoding="utf-8",
        timeout=150,
        dimensions=(50, 160),
    )
    child.expect(r"Apply this change \[y,n,a,d,q,\?\]\? ")
    child.sendline("q")  # quit: nothing is written
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0, child.before
    assert "the example's files are in" in child.before
    assert (tmp_path / "ex" / "train.py").read_bytes() == EXAMPLE.read_bytes()
