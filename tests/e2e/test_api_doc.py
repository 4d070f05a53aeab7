"""The example in docs/api.md runs as written (so the page cannot rot): on a copy of a scan fixture it scans,
accepts the change, verifies it in real child runs and writes it, leaving an undo record; and importing
the pipeline imports neither torch nor libcst."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import ROOT, SCAN_FIXTURES


def _example() -> str:
    page = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    section = page.split("## Example", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)  # type: ignore[union-attr]


def test_the_documented_example_runs(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    shutil.copy(SCAN_FIXTURES / "float_arg" / "train.py", project / "train.py")
    original = (project / "train.py").read_text()
    state = tmp_path / "state"
    env = dict(os.environ, TORCHMEND_STATE_DIR=str(state))
    proc = subprocess.run(
        [sys.executable, "-c", _example()], cwd=project, env=env, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert re.search(r"^\d+ findings; \d+ recompiles; ended by steps$", proc.stdout, re.M), proc.stdout
    assert re.search(r"^train\.py:18 TM202 \((?:un)?safe\): ", proc.stdout, re.M), proc.stdout
    assert "round 1: no_speed_change" in proc.stdout
    assert "wrote 1 file(s)" in proc.stdout
    assert (project / "train.py").read_text() != original
    assert len(list(state.rglob("*.json"))) == 1  # the undo record `torchmend undo` reads


def test_importing_the_pipeline_stays_light() -> None:
    code = (
        "import sys, torchmend.pipeline\n"
        "heavy = [m for m in ('torch', 'libcst') if m in sys.modules]\n"
        "assert not heavy, heavy"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
