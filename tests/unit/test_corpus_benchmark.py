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
    shared = "6 findings: 5 to fix, 1 one-time, 0 informational; 1 change proposed, 5 not fixable\n"  # issue 30
    again = run.parse_fix(run.Stage(0, shared, "", 1.0))
    assert (again["findings"], again["to_fix"], again["proposed"], again["not_fixable"]) == (6, 5, 1, 5)
    parts = "6 findings: 5 to fix, 1 one-time, 0 informational; 1 change proposed for 1 of them, 5 not fixable\n"
    now = run.parse_fix(run.Stage(0, parts, "", 1.0))  # issue 41
    assert (now["findings"], now["proposed"], now["proposed_for"], now["not_fixable"]) == (6, 1, 1, 5)
    assert fix["verdict"] == "refused" and fix["verdict_reasons"] == [
        "numerics differ: parameter 15 (32,) differs (abs: 0.51 relative)"
    ]


def test_jobs_modes_uses_merge_into_one_resumable_file(tmp_path: Path) -> None:
    """--jobs 2 over models x modes x uses: each shard in its own work folder with its own clones of the scratch
    projects, one line per (model, mode, use) in one file; run again, nothing runs. (One model: the second shard
    has none, and still gets its projects.)"""
    venv = tmp_path / "venv" / "bin"
    venv.mkdir(parents=True)
    (venv / "python").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    (venv / "python").chmod(0o755)
    script = tmp_path / "fake_train.py"
    script.write_text(FAKE)
    results = tmp_path / "corpus.jsonl"
    work = tmp_path / "work"
    cmd = [sys.executable, str(CORPUS / "run.py"), "--models", "Broken", "--label", "t", "--venv",
           str(tmp_path / "venv"), "--script", str(script), "--vendor", "", "--work", str(work), "--results",
           str(results), "--timeout", "60", "--modes", "train,eval", "--use", "vendored,user", "--jobs", "2",
           "--scan-only", "--report"]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=240, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    recs = [json.loads(line) for line in results.read_text().splitlines()]
    keys = sorted((r["model"], r["mode"], r["use"]) for r in recs)
    assert keys == sorted(("Broken", mode, use) for mode in ("train", "eval") for use in ("vendored", "user"))
    assert {r["status"] for r in recs} == {"driver_error"}
    assert {r["failure"]["stage"] for r in recs} == {"check"} and all(r["scan_only"] for r in recs)
    # shard 1/2 ran Broken in its own folder; both shards have both projects, cloned from the parent's
    assert {p.name.split(".")[0] for p in (work / "shard-1" / "logs").glob("*.err")} == {"Broken"}
    assert not list((work / "shard-2").glob("logs/*"))
    check = (work / "shard-1" / "logs" / "Broken.eval.user.check.err").read_text()
    assert "train_model.py Broken --mode eval --eager --steps 1" in check
    assert "-- Broken --mode eval" in (work / "shard-1" / "logs" / "Broken.eval.user.before.err").read_text()
    for shard in ("shard-1", "shard-2"):
        for project in ("project", "project-user"):
            assert (work / shard / project / "train_model.py").read_text() == FAKE
    md = results.with_suffix(".md").read_text()
    assert "## t, eval mode, end user (library in site-packages): 1 models (scan only, no fix)" in md
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=240, cwd=tmp_path)
    assert again.returncode == 0 and len(results.read_text().splitlines()) == 4, again.stdout + again.stderr


def _report():  # type: ignore[no-untyped-def]
    sys.path.insert(0, str(CORPUS))
    try:
        import report
    finally:
        sys.path.remove(str(CORPUS))
    return report


def test_causes_of_findings_as_the_zoo_shows_them() -> None:
    """The cause families of issue 26's table, from findings recorded on transformers 5.23 models."""
    cause = _report().cause
    assert cause({"rule": "TM103", "gb_id": "GB0170", "code": "if not skip_the_layer or synced_gpus:"}).startswith(
        "LayerDrop"
    )
    assert cause({"rule": "TM199", "gb_id": "GB0033", "code": "epsilon = np.random.rand(1).item()"}).startswith(
        "host NumPy"
    )
    assert cause({"rule": "TM199", "gb_id": "GB4347", "code": "recordable_keys = {"}).startswith("next()")
    # a Parameter built in forward, though its code names requires_grad
    param = {"rule": "TM199", "gb_id": "GB0264", "code": "out_param = Parameter(param_applied, param.requires_grad)"}
    assert cause(param).startswith("nn.Parameter")
    # register_buffer called in forward: torch 2.11 reports its `if persistent:` as a data-dependent branch
    buffer = {"rule": "TM103", "gb_id": "GB0170", "code": "if persistent:",
              "file": "/venv/lib/python3.12/site-packages/torch/nn/modules/module.py"}  # fmt: skip
    assert cause(buffer).startswith("nn.Parameter / buffer")
    assert cause({"rule": "TM109", "gb_id": "GB0206", "code": "hidden_states.requires_grad = True"}).startswith(
        "requires_grad"
    )
    assert cause({"rule": "TM111", "gb_id": "GB0036", "code": "expert_hit = x.nonzero()"}).startswith("data-dep")
    assert cause({"rule": "TM102", "gb_id": "GB0291", "code": "logger.warning_once("}).startswith("logging")
    assert cause({"rule": "TM202", "kind": "recompile", "reason": "guard failed: len(args) == 2"}).startswith("guard")
    assert cause({"rule": "TM199", "gb_id": "GB0007", "code": "x.masked_scatter("}) == "other graph break"


def test_report_merges_shards_and_keeps_the_last_record(tmp_path: Path) -> None:
    report = _report()
    found = [{"rule": "TM104", "gb_id": "GB0124", "kind": "graph_break", "count": 2, "code": "x.item()"}]
    base = {"list": "zoo", "scan_only": True, "status": "ok", "torch": "2.11.0", "transformers": "5.23.0"}
    a = {**base, "model": "AModel", "mode": "train", "use": "vendored", "before": {"graph_breaks": 2, "recompiles": 0},
         "found": found}  # fmt: skip
    old = {**a, "mode": "eval", "before": {"graph_breaks": 9, "recompiles": 0}}
    new = {**old, "before": {"graph_breaks": 2, "recompiles": 1}}
    legacy = {**base, "scan_only": False, "model": "BModel", "status": "clean", "before": {}, "after": {}}
    (tmp_path / "s1.jsonl").write_text("\n".join(json.dumps(r) for r in (a, old, legacy)) + "\n")
    (tmp_path / "s2.jsonl").write_text(json.dumps(new) + "\n{cut short")
    recs = {(r["model"], r["mode"], r["use"]): r for r in report.load(tmp_path / "s1.jsonl", tmp_path / "s2.jsonl")}
    assert set(recs) == {
        ("AModel", "train", "vendored"),
        ("AModel", "eval", "vendored"),
        ("BModel", "train", "vendored"),
    }
    assert recs[("AModel", "eval", "vendored")]["before"]["recompiles"] == 1
    report.write_report(tmp_path / "s1.jsonl", tmp_path / "s2.jsonl")
    md = (tmp_path / "s1.md").read_text()
    assert "**2 graph breaks + 1 recompiles = 3**" in md
    assert "| data-dependent: nonzero, .item(), .tolist(), tensor branch, mask fast path | 2 | 100 % | 1 |" in md


def test_evaluation_models_need_the_flag(tmp_path: Path) -> None:
    """The evaluation lists are never run by accident: a list naming one stops before anything runs."""
    for models in ("GPT2Model", "ErnieModel,MraModel", str(CORPUS / "models-eval-26.txt")):
        cmd = [sys.executable, str(CORPUS / "run.py"), "--models", models, "--venv", str(tmp_path / "none"),
               "--work", str(tmp_path / "work")]  # fmt: skip
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        assert proc.returncode != 0 and "kept for evaluation" in proc.stderr, proc.stderr
        assert not (tmp_path / "none").exists() and not (tmp_path / "work").exists()
