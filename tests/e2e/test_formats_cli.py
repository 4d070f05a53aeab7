"""`torchmend scan --format sarif` through the real CLI and a real run (aot_eager, a few steps): stdout is the SARIF
log alone, valid against the published 2.1.0 schema, with the codemods' changes as fixes; --fail-on-findings still
exits 6. (The formats themselves are tested on recorded runs in tests/unit/test_formats_*.py.)"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import jsonschema
from conftest import ROOT, SCAN_FIXTURES, torchmend

SCHEMA = json.loads((ROOT / "fixtures" / "sarif" / "sarif-schema-2.1.0.json").read_text())


def test_scan_format_sarif_on_a_real_run(tmp_path: Path):
    shutil.copy(SCAN_FIXTURES / "several" / "train.py", tmp_path / "train.py")
    r = torchmend(
        "scan", "train.py", "--format", "sarif", "--steps", "3", "--backend", "aot_eager", "--fail-on-findings",
        cwd=tmp_path,
    )  # fmt: skip
    assert r.returncode == 6, r.stderr[-2000:]
    log = json.loads(r.stdout)  # nothing but the log on stdout
    jsonschema.validators.validator_for(SCHEMA)(SCHEMA).validate(log)
    run = log["runs"][0]
    assert run["originalUriBaseIds"]["%SRCROOT%"]["uri"] == tmp_path.resolve().as_uri() + "/"
    results = {r["ruleId"]: r for r in run["results"]}
    assert {"TM101", "TM103"} <= set(results)  # the print and the tensor `if` break the graph on the first step
    tm103 = results["TM103"]
    assert tm103["locations"][0]["physicalLocation"]["region"] == {"startLine": 22, "startColumn": 9}
    (change,) = tm103["fixes"][0]["artifactChanges"]
    assert change["artifactLocation"] == {"uri": "train.py", "uriBaseId": "%SRCROOT%"}
    assert run["properties"]["summary"]["graph_breaks"] >= 2
