"""Classification without running torch: the raw event streams of real scans, recorded on other torch releases
(fixtures/recorded/torch-<minor>/<fixture>.jsonl), analysed here and compared with the findings each scan fixture
expects for that release. The live scans (tests/e2e) cover the installed torch; these keep the releases we
cannot install here (2.11 was recorded on the H100 machine: torch 2.11.0+cu130, aot_eager, `--keep-events`)
from regressing."""

from __future__ import annotations

import json

import pytest
from conftest import ROOT, SCAN_FIXTURES, observed

from torchmend.profiler import pathmap
from torchmend.profiler.events import read_events
from torchmend.profiler.findings import analyse

RECORDED = ROOT / "fixtures" / "recorded"
# The recordings name files as they were on the recording machine: its checkout and its torch install.
RECORDED_ROOT = "/work/main"
CASES = sorted((p.parent.name.removeprefix("torch-"), p.stem) for p in RECORDED.glob("torch-*/*.jsonl"))


def test_every_scan_fixture_has_a_2_11_recording():
    fixtures = {p.name for p in SCAN_FIXTURES.iterdir() if (p / "expected.json").exists()}
    assert fixtures <= {name for version, name in CASES if version == "2.11"}


@pytest.mark.parametrize(("version", "name"), CASES, ids=[f"{v}-{n}" for v, n in CASES])
def test_recorded_run_gives_the_expected_findings(version: str, name: str):
    fixture_dir = (SCAN_FIXTURES / name).resolve()
    expected = json.loads((fixture_dir / "expected.json").read_text()).get(version)
    if expected is None:
        pytest.skip(f"{name} has no expectations for torch {version}")
    events = read_events(RECORDED / f"torch-{version}" / f"{name}.jsonl")
    events = pathmap.apply(events, [pathmap.Mapping(RECORDED_ROOT, str(ROOT))])
    end = next(e for e in reversed(events) if e.get("ev") == "end")
    findings, _ = analyse(events, fixture_dir, end["reason"])
    assert observed([f.to_json() for f in findings], fixture_dir) == sorted(
        expected, key=lambda d: json.dumps(d, sort_keys=True)
    )
