"""The command line and the Python API give the same answers (issue 29): in a project whose `[tool.torchmend]`
ignores a rule and whose source has suppression comments, `torchmend scan --format sarif` (the findings, each with
its proposed fix) and torchmend.pipeline over the same run's events (scan_events, propose) report the same findings
and the same fixes; the suppressed ones are left out of both. One child run, the CLI's; the API reads the events
that run kept (--keep-events)."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import SCAN_FIXTURES, torchmend

from torchmend import pipeline
from torchmend.cli.formats import text_fixes, to_sarif
from torchmend.profiler.events import read_events
from torchmend.settings import Settings


def test_api_gives_the_findings_and_fixes_the_cli_gives(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    (project / ".git").mkdir()  # the work tree's top: the walk for pyproject.toml stops here
    source = (SCAN_FIXTURES / "several" / "train.py").read_text()
    source = source.replace(
        'print("activation norm", h.norm())', 'print("activation norm", h.norm())  # torchmend: ignore[TM101]'
    ).replace("h = torch.relu(self.inp(x))", "h = torch.relu(self.inp(x))  # torchmend: ignore[TM103]")
    (project / "train.py").write_text(source)
    (project / "pyproject.toml").write_text('[tool.torchmend]\nignore = ["TM202"]\n')
    events = tmp_path / "events"

    r = torchmend(
        "scan", "train.py", "--backend", "aot_eager", "--steps", "4", "--format", "sarif", "--keep-events", str(events),
        cwd=project,
        timeout=300,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    cli = r.json["runs"][0]["results"]

    # The API, given the project's folder: its [tool.torchmend] and its comments apply as they do in the CLI.
    root = project.resolve()
    scan = pipeline.scan_events(read_events(events / "events.jsonl"), root)
    fixes = pipeline.propose(scan.findings, root, torch_version=scan.summary.torch_version)  # as the CLI spells them
    api = to_sarif(scan.reported, root, text_fixes(fixes))["runs"][0]["results"]
    assert json.dumps(api, sort_keys=True) == json.dumps(cli, sort_keys=True)

    found = {(x["ruleId"], x["locations"][0]["physicalLocation"]["region"]["startLine"]) for x in cli if x["locations"]}
    assert ("TM201", 20) in found and ("TM103", 22) in found  # kept; the TM103 comment is on line 21, not 22
    assert ("TM903", 21) in found  # that comment suppressed nothing: a hint, in both
    assert not any(rule in ("TM101", "TM202") for rule, _ in found)  # the comment; the configured ignore
    assert sum("fixes" in x for x in cli) >= 2  # TM201 and TM103 have their fixes, the same in both
    assert {f.rule for f in scan.suppressed} == {"TM101", "TM202"}
    assert not any("TM202" in p.rule or "TM101" in p.rule for p in fixes.proposals)  # suppressed: never fixed

    # Without the configuration (the defaults alone) the ignored rule comes back; the comment still holds.
    plain = pipeline.scan_events(read_events(events / "events.jsonl"), root, Settings())
    assert "TM202" in {f.rule for f in plain.findings} and "TM101" not in {f.rule for f in plain.findings}
