"""docs/compat.md is what scripts/compat.py makes of the matrix's results (benchmarks/results/compat/) and the
fixtures' expectations: a changed expected.json or a new run shows up in the table, or this fails."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import ROOT

SCRIPT = ROOT / "scripts" / "compat.py"


def test_compat_table_is_current():
    proc = subprocess.run([sys.executable, str(SCRIPT), "table", "--check"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_every_matrix_run_names_its_torch_and_its_command():
    runs = sorted((ROOT / "benchmarks" / "results" / "compat").glob("torch-*.json"))
    assert runs
    for path in runs:
        run = json.loads(path.read_text())
        version = path.stem.removeprefix("torch-")
        assert run["torch"].startswith(version + "."), path.name
        assert run["command"] and run["seconds"] > 0 and run["tests"]
        assert set(run["tests"].values()) <= {"passed", "failed", "skipped"}
