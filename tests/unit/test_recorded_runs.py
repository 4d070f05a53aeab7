"""Classification without running torch: the raw event streams of real scans, recorded on every supported torch
release (fixtures/recorded/torch-<minor>/<fixture>.jsonl, `torchmend scan --backend aot_eager --keep-events`),
analysed here and compared with the findings each scan fixture expects for that release. The live scans
(tests/e2e) cover the installed torch only; these keep every release's classification from regressing on any
machine: 2.11 was recorded on the H100 machine (torch 2.11.0+cu130), 2.13, 2.14 and 2.15 on the development
machine's CPU (`python3 dev.py compat VERSION --record`, docs/compat.md)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from conftest import ROOT, SCAN_FIXTURES, observed

from torchmend.profiler import pathmap
from torchmend.profiler.events import read_events
from torchmend.profiler.findings import analyse

RECORDED = ROOT / "fixtures" / "recorded"
VERSIONS = ("2.11", "2.13", "2.14", "2.15")
CASES = sorted((p.parent.name.removeprefix("torch-"), p.stem) for p in RECORDED.glob("torch-*/*.jsonl"))
FIXTURES = sorted(p.name for p in SCAN_FIXTURES.iterdir() if (p / "expected.json").exists())


def recorded_root(events: list[dict[str, Any]], name: str) -> str:
    """The checkout the recording was made in (its files are named as they were there): the folder above the
    fixture's own path, as the first stack that reaches the fixture names it."""
    pattern = re.compile(r'"([^"]*)/fixtures/scan/' + re.escape(name) + "/")
    for event in events:
        found = pattern.search(json.dumps(event))
        if found:
            return found.group(1)
    return str(ROOT)  # a run that never reached the fixture's own files names none of them


@pytest.mark.parametrize("version", VERSIONS)
def test_every_scan_fixture_has_a_recording_and_expectations(version: str):
    recorded = {name for v, name in CASES if v == version}
    assert set(FIXTURES) - recorded == set(), f"fixtures without a torch {version} recording"
    expected = {
        name for name in FIXTURES if version in json.loads((SCAN_FIXTURES / name / "expected.json").read_text())
    }
    assert set(FIXTURES) - expected == set(), f"fixtures without torch {version} expectations"


@pytest.mark.parametrize(("version", "name"), CASES, ids=[f"{v}-{n}" for v, n in CASES])
def test_recorded_run_gives_the_expected_findings(version: str, name: str):
    fixture_dir = (SCAN_FIXTURES / name).resolve()
    expected = json.loads((fixture_dir / "expected.json").read_text()).get(version)
    if expected is None:
        pytest.skip(f"{name} has no expectations for torch {version}")
    events = read_events(RECORDED / f"torch-{version}" / f"{name}.jsonl")
    events = pathmap.apply(events, [pathmap.Mapping(recorded_root(events, name), str(ROOT))])
    end = next(e for e in reversed(events) if e.get("ev") == "end")
    findings, _ = analyse(events, fixture_dir, end["reason"])
    assert observed([f.to_json() for f in findings], fixture_dir) == sorted(
        expected, key=lambda d: json.dumps(d, sort_keys=True)
    )
