"""What the script reads and says through `torchmend scan`, as under plain `python`: the stdin given to torchmend (a
pipe) reaches the script's input(), and a `sys.exit("fatal: ...")` message is shown once. The real CLI in a
subprocess on scripts that compile nothing (no torch.compile: a few seconds each)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from conftest import torchmend

READS = """\
answer = input("name? ")
print("GOT=" + answer)
raise SystemExit(3)  # fail, so the output's tail is shown
"""


def test_scan_passes_a_piped_stdin_to_the_script(tmp_path: Path):
    (tmp_path / "reads.py").write_text(READS)
    proc = subprocess.run(
        [sys.executable, "-m", "torchmend", "scan", "reads.py"],
        cwd=tmp_path,
        env=dict(os.environ, COLUMNS="200", NO_COLOR="1"),
        input="alice\n",
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 4, proc.stderr  # failed before compiling: its own SystemExit(3)
    assert "GOT=alice" in proc.stderr and "EOFError" not in proc.stderr, proc.stderr


def test_without_a_stdin_input_gets_eof_as_under_python(tmp_path: Path):
    (tmp_path / "reads.py").write_text(READS)
    r = torchmend("scan", "reads.py", cwd=tmp_path)  # the helper gives /dev/null
    assert r.returncode == 4 and "EOFError" in r.stderr, r.stderr


def test_a_sys_exit_message_is_shown_once(tmp_path: Path):
    (tmp_path / "fatal.py").write_text("import sys\nprint('loading')\nsys.exit('fatal: no data in /nowhere')\n")
    r = torchmend("scan", "fatal.py", cwd=tmp_path)
    assert r.returncode == 4, r.stderr
    assert r.stderr.count("fatal: no data in /nowhere") == 1, r.stderr
