"""Every scan fixture: `torchmend scan --backend aot_eager` reports exactly its expected findings.

Expectations are recorded per torch minor version (fixtures/scan/*/expected.json), because what
dynamo reports differs between releases; a version without a recording is skipped, not guessed.
"""

from __future__ import annotations

import json

import pytest
from conftest import SCAN_FIXTURES, observed, scan_json, torch_minor

FIXTURES = sorted(p.name for p in SCAN_FIXTURES.iterdir() if (p / "expected.json").exists())


def test_at_least_the_issue_fixtures_exist():
    assert len(FIXTURES) >= 11
    assert {"clean", "several", "two_file"} <= set(FIXTURES)


@pytest.mark.parametrize("name", FIXTURES)
def test_scan_reports_expected_findings(name):
    fixture_dir = (SCAN_FIXTURES / name).resolve()
    expected_by_version = json.loads((fixture_dir / "expected.json").read_text())
    version = torch_minor()
    if version not in expected_by_version:
        pytest.skip(f"no expectations recorded for torch {version}")
    # A fixture whose script fails (one that torch.compile itself breaks) says so: "ended_by": "error".
    ended_by = expected_by_version.get("ended_by", "finished")
    result = scan_json(fixture_dir / "train.py")
    assert result.returncode == (0 if ended_by == "finished" else 8), result.stderr
    report = result.json
    assert report["schema"] == "torchmend.scan/1"
    assert report["summary"]["ended_by"] == ended_by
    expected = sorted(expected_by_version[version], key=lambda d: json.dumps(d, sort_keys=True))
    assert observed(report["findings"], fixture_dir) == expected


def test_clean_fixture_compiles_and_finds_nothing():
    report = scan_json(SCAN_FIXTURES / "clean" / "train.py").json
    s = report["summary"]
    assert report["findings"] == []
    assert s["frames_compiled"] >= 1 and s["graph_breaks"] == 0 and s["recompiles"] == 0
    assert s["steps"] == 20


def test_finding_fields_carry_reason_guard_and_docs():
    findings = {f["rule"]: f for f in scan_json(SCAN_FIXTURES / "several" / "train.py").json["findings"]}
    brk = findings["TM103"]
    assert brk["kind"] == "graph_break" and brk["gb_id"] == "GB0170"
    assert brk["docs_url"].endswith("/gb0170.html") and brk["function"] == "forward"
    assert brk["code"] == "if h.mean() > 1.0:"
    rec = findings["TM201"]
    assert rec["variable"] == "self.steps_seen" and rec["pattern"] == "limit" and rec["severity"] == "fix"
    assert rec["call_site"]["line"] == 41
    limit = findings["TM250"]
    assert limit["kind"] == "recompile_limit" and "recompile limit (8)" in limit["reason"]
    temp = findings["TM202"]
    assert temp["variable"] == "temperature"


def test_library_findings_point_back_to_user_frame():
    report = scan_json(SCAN_FIXTURES / "float_lr_warmup" / "train.py").json
    lib = [f for f in report["findings"] if f["where"] == "library"]
    assert lib, "the compiled optimizer step reports findings inside torch.optim"
    for f in lib:
        assert f["user_frame"]["function"] == "optimizer_step"
    deliberate = [f for f in lib if f["rule"] == "TM901"]
    assert deliberate and all(f["severity"] == "info" for f in deliberate)
    # our own step counter's dynamo-disabled hook must never show up as the user's break
    assert not any("torchmend" in (f["reason"] or "") for f in report["findings"])
