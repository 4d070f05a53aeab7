"""The corpus benchmark's driver (benchmarks/corpus/run.py) without transformers: a tiny fake model script, the
real driver in a child process, real `torchmend scan` children. Resume skips what the results file holds, a model
the plain script cannot run is a driver error (never a torchmend failure), and the report is written."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from conftest import ROOT

CORPUS = ROOT / "benchmarks" / "corpus"

FAKE = """\
import sys
# 'Broken' does not build; 'Plain' runs but never compiles (torchmend scan: exit 5, nothing compiled)
sys.exit(1 if sys.argv[1] == "Broken" else 0)
"""

FIX_OUT = """\
6 findings (6 to fix): 1 change proposed, 5 not fixable
before → after (1 run per arm, interleaved)
numerics (rtol 0.0001, atol 1e-06): parameter 15 (32,) differs (abs: 0.51 relative)
verdict: refused
  numerics differ: parameter 15 (32,) differs (abs: 0.51 relative)
  ✗ TM103 change did not remove TM103 at transformers/models/wav2vec2/modeling_wav2vec2.py:692: not written
"""


def test_resume_driver_errors_and_report(tmp_path: Path) -> None:
    venv = tmp_path / "venv" / "bin"
    venv.mkdir(parents=True)
    # a "venv" whose python has torchmend and torch, no transformers (a symlink would lose the venv's packages)
    (venv / "python").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    (venv / "python").chmod(0o755)
    script = tmp_path / "fake_train.py"
    script.write_text(FAKE)
    results = tmp_path / "corpus.jsonl"
    done = {"model": "Done", "status": "clean", "list": "t", "before": {"graph_breaks": 0, "recompiles": 0}}
    results.write_text(json.dumps(done) + "\n")
    work = tmp_path / "work"
    cmd = [sys.executable, str(CORPUS / "run.py"), "--models", "Done,Broken,Plain", "--label", "t", "--venv",
           str(tmp_path / "venv"), "--script", str(script), "--vendor", "", "--work", str(work), "--results",
           str(results), "--timeout", "60", "--report"]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    recs = {r["model"]: r for r in map(json.loads, results.read_text().splitlines())}
    assert len(results.read_text().splitlines()) == 3  # Done was not run again
    assert not list((work / "logs").glob("Done.*"))
    assert recs["Broken"]["status"] == "driver_error" and recs["Broken"]["failure"]["stage"] == "check"
    assert recs["Plain"]["status"] == "driver_error"
    assert (recs["Plain"]["failure"]["stage"], recs["Plain"]["failure"]["rc"]) == ("before", 5)
    assert (work / "project" / ".git").is_dir() and (work / "project" / "train_model.py").read_text() == FAKE
    md = results.with_suffix(".md").read_text()
    assert "| Broken | **driver_error** |" in md and "2 driver error" in md and "1 compiles cleanly: Done" in md


def test_fix_output_is_read() -> None:
    sys.path.insert(0, str(CORPUS))
    try:
        import run
    finally:
        sys.path.remove(str(CORPUS))
    fix = run.parse_fix(run.Stage(10, FIX_OUT, "torchmend: verification refused these changes", 1.0))
    assert fix["numerics"] == "parameter 15 (32,) differs (abs: 0.51 relative)"
    assert (fix["findings"], fix["proposed"], fix["not_fixable"]) == (6, 1, 5)
    assert fix["verdict"] == "refused" and fix["verdict_reasons"] == [
        "numerics differ: parameter 15 (32,) differs (abs: 0.51 relative)"
    ]
