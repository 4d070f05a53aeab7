"""`torchmend lint` with the parts every reporting command shares: [tool.torchmend] (select, exclude, per-file
ignores, a bad key), suppression comments (honoured, unused ones as TM903, --add-ignore), and the sarif/github
formats. Real CLI processes over a copy of a scan fixture; nothing is trained."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import SCAN_FIXTURES, torchmend
from test_formats_sarif import validate

RULES = ["TM101", "TM103", "TM201", "TM202"]  # what lint reports on fixtures/scan/several


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    shutil.copytree(SCAN_FIXTURES / "several", root, ignore=shutil.ignore_patterns("expected.json"))
    return root


def _lint(project: Path, tmp_path: Path, *args: str):
    env = {"TORCHMEND_CACHE_DIR": str(tmp_path / "cache"), "TORCHMEND_STATE_DIR": str(tmp_path / "state")}
    return torchmend("lint", *args, "--project", str(project), cwd=project, env=env)


def _rules(result) -> list[str]:
    return sorted(f["rule"] for f in json.loads(result.stdout)["findings"])


def test_config_selects_excludes_and_a_bad_key_stops_it(project: Path, tmp_path: Path):
    pyproject = project / "pyproject.toml"
    pyproject.write_text('[tool.torchmend]\nignore = ["TM2"]\nper-file-ignores = { "train.py" = ["TM101"] }\n')
    r = _lint(project, tmp_path, "--format", "json")
    assert r.returncode == 6 and _rules(r) == ["TM103"]
    assert json.loads(r.stdout)["suppressed"] == 3
    r = _lint(project, tmp_path, "--format", "json", "--ignore", "TM1")  # the command line wins over the file
    assert _rules(r) == ["TM201", "TM202"]
    pyproject.write_text('[tool.torchmend]\nexclude = ["train.py"]\n')
    r = _lint(project, tmp_path, "--format", "json")
    assert r.returncode == 0 and json.loads(r.stdout)["files_checked"] == 0
    pyproject.write_text('[tool.torchmend]\nselect = "TM1"\n')
    r = _lint(project, tmp_path)
    assert r.returncode == 24 and "pyproject.toml:2" in r.stderr and "select" in r.stderr


def test_comments_suppress_unused_ones_are_reported_and_add_ignore_silences_the_rest(project: Path, tmp_path: Path):
    script = project / "train.py"
    lines = script.read_text().splitlines(keepends=True)
    lines[23] = lines[23].rstrip("\n") + "  # torchmend: ignore[TM101]\n"  # line 24: the print
    lines[7] = lines[7].rstrip("\n") + "  # torchmend: ignore[TM103]\n"  # line 8, `import torch`: nothing there
    script.write_text("".join(lines))
    r = _lint(project, tmp_path, "--format", "json")
    found = json.loads(r.stdout)["findings"]
    assert sorted((f["rule"], f["line"]) for f in found) == [("TM103", 22), ("TM201", 20), ("TM202", 25), ("TM903", 8)]

    r = _lint(project, tmp_path, "--add-ignore")
    assert r.returncode == 0, r.stderr
    text = script.read_text()
    assert "self.steps_seen += 1  # torchmend: ignore[TM201]" in text
    compile(text, str(script), "exec")
    r = _lint(project, tmp_path, "--format", "json")
    assert r.returncode == 0 and _rules(r) == ["TM903"]  # the stale comment on line 8 is still reported
    assert _lint(project, tmp_path, "--add-ignore").returncode == 0 and script.read_text() == text  # idempotent


def test_sarif_and_github_formats(project: Path, tmp_path: Path):
    r = _lint(project, tmp_path, "--format", "sarif")
    assert r.returncode == 6
    log = json.loads(r.stdout)
    validate(log)
    results = log["runs"][0]["results"]
    assert sorted(x["ruleId"] for x in results) == RULES
    assert all(x["properties"]["confidence"] == "likely" for x in results)
    assert any(x.get("fixes") for x in results)  # the codemods' changes ride along
    r = _lint(project, tmp_path, "--format", "github", "--exit-zero")
    assert r.returncode == 0
    lines = r.stdout.splitlines()
    assert len(lines) == 4 and all(x.startswith(("::warning file=train.py,line=", "::notice")) for x in lines)
    # the float argument recompiles once, then torch makes it dynamic: one-time, as scan judges it (a notice)
    assert [x.split(",")[1] for x in lines if x.startswith("::notice file=train.py")] == ["line=25"]
