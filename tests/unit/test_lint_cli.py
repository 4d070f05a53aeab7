"""`torchmend lint` on the command line (a real child process each, no training run): exit codes 0 / 3 / 6 and
--exit-zero, the JSON report, --diff (a patch on stdout, nothing written) and --fix (written through the same
store as `fix`, with its undo record). And `scan --exit-zero`, which means the same with --fail-on-findings."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import SCAN_FIXTURES, torchmend
from typer.testing import CliRunner

from torchmend.model import EndedBy, Kind, Severity, Summary, Where


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    shutil.copytree(SCAN_FIXTURES / "several", root)
    return root


def _env(tmp_path: Path) -> dict[str, str]:
    return {"TORCHMEND_CACHE_DIR": str(tmp_path / "cache"), "TORCHMEND_STATE_DIR": str(tmp_path / "state")}


def test_exit_codes_findings_clean_missing_and_exit_zero(project: Path, tmp_path: Path):
    env = _env(tmp_path)
    r = torchmend("lint", str(project), "--format", "json", env=env)
    assert r.returncode == 6, r.stderr
    report = r.json
    assert report["schema"] == "torchmend.lint/1" and report["files_checked"] == 1
    assert sorted((f["rule"], f["line"], f["confidence"]) for f in report["findings"]) == [
        ("TM101", 24, "likely"),
        ("TM103", 22, "likely"),
        ("TM201", 20, "likely"),
        ("TM202", 25, "likely"),
    ]
    assert torchmend("lint", str(project), "--exit-zero", env=env).returncode == 0
    assert torchmend("lint", str(project), "--select", "TM9", env=env).returncode == 0  # a family with none here
    missing = torchmend("lint", str(project / "nope.py"), env=env)
    assert missing.returncode == 3 and "does not exist" in missing.stderr


def test_diff_prints_a_patch_and_fix_writes_with_an_undo_record(project: Path, tmp_path: Path):
    env = _env(tmp_path)
    script = project / "train.py"
    before = script.read_text()
    r = torchmend("lint", str(project), "--diff", "--project", str(project), env=env)
    assert r.returncode == 6
    assert r.stdout.startswith("--- a/train.py") and "torch.where" in r.stdout  # the safe fixes only
    assert "reorderable_logging_functions.add(print)" in r.stdout  # the print is kept, after the graph: safe
    assert "is_compiling" not in r.stdout
    assert script.read_text() == before
    patch = subprocess.run(["git", "apply", "--check", "-"], input=r.stdout, text=True, cwd=project)
    assert patch.returncode == 0

    # The safe fixes alone (TM103's two lines become one, the print reordered): what is left is reported where
    # it now is, as a fresh lint sees it, and the JSON on stdout stays JSON (what --fix says goes to stderr).
    r = torchmend("lint", str(project), "--fix", "--format", "json", "--project", str(project), env=env)
    assert r.returncode == 6 and "Fixed 2 finding(s)" in r.stderr
    assert "TM201: unsafe: add --unsafe-fixes to apply it" in r.stderr  # lint's flag, not fix's --unsafe
    left = sorted((f["rule"], f["line"]) for f in r.json["findings"])
    assert left == [("TM201", 20), ("TM202", 24)]
    fresh = torchmend("lint", str(project), "--format", "json", env=env)
    assert sorted((f["rule"], f["line"]) for f in fresh.json["findings"]) == left
    assert torchmend("undo", "--project", str(project), env=env).returncode == 0
    assert script.read_text() == before

    r = torchmend("lint", str(project), "--fix", "--unsafe-fixes", "--project", str(project), env=env)
    assert "Fixed" in r.stdout, r.stdout + r.stderr
    after = script.read_text()
    assert "torch.where" in after and "reorderable_logging_functions" in after
    again = torchmend("lint", str(project), "--format", "json", env=env)
    assert {f["rule"] for f in again.json["findings"]} <= {"TM201", "TM202"}  # what the fixes left
    assert torchmend("undo", "--project", str(project), env=env).returncode == 0
    assert script.read_text() == before


def test_scan_exit_zero_is_a_no_op_without_fail_on_findings(monkeypatch, tmp_path: Path):
    from torchmend import pipeline
    from torchmend.cli import running
    from torchmend.cli.main import app  # every command registered
    from torchmend.model import Finding
    from torchmend.profiler.runner import RunOutcome

    script = tmp_path / "train.py"
    script.write_text("print('hi')\n")
    finding = Finding(
        rule="TM101",
        kind=Kind.GRAPH_BREAK,
        title="print",
        file="train.py",
        line=1,
        function="<module>",
        path=str(script),
        where=Where.PROJECT,
        reason="print",
        count=1,
        severity=Severity.FIX,
    )
    summary = Summary(
        frames_compiled=1,
        compiles=1,
        graphs=2,
        graph_breaks=1,
        recompiles=0,
        recompile_limit_hits=0,
        compile_seconds=0.1,
        steps=1,
        ended_by=EndedBy.FINISHED,
        wall_seconds=1.0,
        torch_version="2.13.0",
    )
    fake = pipeline.Scan([finding], summary, RunOutcome([], "finished", 0, 1.0, ""))
    monkeypatch.setattr(running, "profile", lambda *a, **k: fake)
    runner = CliRunner()
    failing = runner.invoke(app, ["scan", str(script), "--fail-on-findings"])
    assert failing.exit_code == 6, failing.output
    assert runner.invoke(app, ["scan", str(script), "--fail-on-findings", "--exit-zero"]).exit_code == 0
    assert runner.invoke(app, ["scan", str(script), "--exit-zero"]).exit_code == 0
    assert runner.invoke(app, ["scan", str(script)]).exit_code == 0
    assert json.loads(json.dumps(finding.to_json()))["confidence"] is None


def test_the_command_page_names_every_option():
    """docs/commands/lint.md documents every option `lint --help` shows (as test_rules_and_docs does for the others;
    kept here so the lint branch merges without touching that list)."""
    import typer
    from conftest import ROOT

    from torchmend.cli.main import app

    command = typer.main.get_command(app).commands["lint"]  # type: ignore[attr-defined]
    page = (ROOT / "docs" / "commands" / "lint.md").read_text()
    for param in command.params:
        for opt in param.opts:
            if opt.startswith("-") and opt not in ("--help", "-h"):
                assert f"`{opt}" in page, f"docs/commands/lint.md does not document {opt}"
