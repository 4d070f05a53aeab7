"""`--format sarif`: the SARIF of real scan findings (recorded event streams, analysed here without torch) is valid
against the published SARIF 2.1.0 schema (OASIS errata01, fixtures/sarif/), and says the right things: rule
metadata with documentation pages, locations relative to the project, columns, fingerprints that survive the code
moving, library findings at the user's frame, and each codemod's change as a `fix` whose replacements, applied to
the file, give exactly the text the engine writes."""

from __future__ import annotations

import copy
import functools
import json
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from torchmend import pipeline, rules
from torchmend.cli.formats import report, text_fixes, to_github, to_sarif
from torchmend.cli.formats.annotation import split_lines
from torchmend.cli.formats.sarif import RULE_DOCS, replacements
from torchmend.model import Finding, Kind, Severity, Where
from torchmend.profiler import pathmap
from torchmend.profiler.events import read_events
from torchmend.profiler.findings import analyse

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((ROOT / "fixtures" / "sarif" / "sarif-schema-2.1.0.json").read_text())
RECORDED_ROOT = "/work/main"  # where the recordings were made (tests/unit/test_recorded_runs.py)


def recorded_findings(name: str, root: Path | None = None) -> tuple[list[Finding], Path]:
    """The findings of fixtures/scan/NAME from its torch 2.11 recording, in the project at `root` (default: the
    fixture's own directory; a copy of it lets a test change the files)."""
    fixture = (ROOT / "fixtures" / "scan" / name).resolve()
    events = read_events(ROOT / "fixtures" / "recorded" / "torch-2.11" / f"{name}.jsonl")
    maps = [pathmap.Mapping(f"{RECORDED_ROOT}/fixtures/scan/{name}", str(root or fixture))]
    events = pathmap.apply(events, [*maps, pathmap.Mapping(RECORDED_ROOT, str(ROOT))])
    end = next(e for e in reversed(events) if e.get("ev") == "end")
    findings, _ = analyse(events, root or fixture, end["reason"])
    return findings, root or fixture


@functools.lru_cache(maxsize=1)
def validator() -> jsonschema.protocols.Validator:
    cls = jsonschema.validators.validator_for(SCHEMA)
    cls.check_schema(SCHEMA)
    return cls(SCHEMA, format_checker=cls.FORMAT_CHECKER)


def validate(log: dict[str, Any]) -> None:
    validator().validate(log)


@functools.cache
def _sarif_of(name: str) -> tuple[dict[str, Any], list[Finding], Path]:
    findings, root = recorded_findings(name)
    return to_sarif(findings, root, text_fixes(pipeline.propose(findings, root))), findings, root


def sarif_of(name: str) -> tuple[dict[str, Any], list[Finding], Path]:
    """The SARIF of a recorded scan with the codemods' fixes (made once per fixture; a copy for each test)."""
    log, findings, root = _sarif_of(name)
    return copy.deepcopy(log), findings, root


def apply_replacements(text: str, changes: list[dict[str, Any]]) -> str:
    """Apply SARIF replacements (line/column regions, 1-based, end exclusive) the way a SARIF viewer does."""
    lines = split_lines(text)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))

    def offset(line: int, column: int) -> int:
        return starts[line - 1] + column - 1

    edits = []
    for r in changes:
        region = r["deletedRegion"]
        start = offset(region["startLine"], region["startColumn"])
        end = offset(region["endLine"], region["endColumn"])
        edits.append((start, end, r.get("insertedContent", {}).get("text", "")))
    for start, end, new in sorted(edits, reverse=True):
        text = text[:start] + new + text[end:]
    return text


def test_the_schema_is_the_published_one_and_rejects_what_it_should():
    assert SCHEMA["id"] == "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
    log, _, _ = sarif_of("several")
    broken = copy.deepcopy(log)
    broken["runs"][0]["results"][0]["level"] = "fatal"  # not one of SARIF's levels
    with pytest.raises(jsonschema.ValidationError):
        validate(broken)
    broken = copy.deepcopy(log)
    broken["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["region"]["startLine"] = 0
    with pytest.raises(jsonschema.ValidationError):
        validate(broken)


@pytest.mark.parametrize("name", ["several", "library_after_break", "two_file", "compiled_state_dict_keys"])
def test_sarif_of_a_recorded_scan_is_valid(name: str):
    log, findings, _ = sarif_of(name)
    validate(log)
    run = log["runs"][0]
    assert len(run["results"]) == len(findings) > 0
    driver = run["tool"]["driver"]
    assert (driver["name"], driver["informationUri"][:8]) == ("torchmend", "https://")
    for result in run["results"]:
        assert driver["rules"][result["ruleIndex"]]["id"] == result["ruleId"]


def test_rules_carry_their_documentation_pages():
    log, _, _ = sarif_of("several")
    described = log["runs"][0]["tool"]["driver"]["rules"]
    assert [r["id"] for r in described] == [r.code for r in rules.RULES]
    for r in described:
        assert r["helpUri"] == RULE_DOCS.format(code=r["id"])
        assert (ROOT / "docs" / "rules" / f"{r['id']}.md").is_file()  # the page the link points at exists
        assert r["shortDescription"]["text"] == rules.BY_CODE[r["id"]].title
    levels = {r["id"]: r["defaultConfiguration"]["level"] for r in described}
    assert (levels["TM101"], levels["TM901"], levels["TM107"]) == ("warning", "note", "error")


def test_results_say_rule_level_place_and_the_findings_data():
    log, findings, root = sarif_of("several")
    run = log["runs"][0]
    assert run["originalUriBaseIds"]["%SRCROOT%"]["uri"] == root.as_uri() + "/"
    by_rule = {r["ruleId"]: r for r in run["results"]}
    brk = by_rule["TM103"]  # `        if h.mean() > 1.0:` at line 22
    location = brk["locations"][0]["physicalLocation"]
    assert location["artifactLocation"] == {"uri": "train.py", "uriBaseId": "%SRCROOT%"}
    assert location["region"] == {"startLine": 22, "startColumn": 9}
    assert brk["level"] == "warning"
    assert brk["message"]["text"].startswith("Python `if`/`while` on a tensor value: GB0170")
    assert brk["properties"] == {
        "kind": "graph_break",
        "severity": "fix",
        "function": "forward",
        "count": 8,
        "gbId": "GB0170",
        "gbType": "Data-dependent branching",
    }
    assert by_rule["TM202"]["level"] == "note"  # a one-time recompile
    assert by_rule["TM201"]["properties"]["pattern"] == "limit"


def test_each_proposed_change_is_a_fix_that_applies_to_the_exact_text_the_engine_writes():
    findings, root = recorded_findings("several")
    fixes = pipeline.propose(findings, root)
    log = to_sarif(findings, root, text_fixes(fixes))
    with_fix = [r for r in log["runs"][0]["results"] if "fixes" in r]
    assert {r["ruleId"] for r in with_fix} == {"TM101", "TM103", "TM201", "TM202", "TM250"}
    for result in with_fix:
        (fix,) = result["fixes"]
        (change,) = fix["artifactChanges"]
        assert change["artifactLocation"] == {"uri": "train.py", "uriBaseId": "%SRCROOT%"}
        proposal = next(p for p in fixes.proposals if any(f.rule == result["ruleId"] for f in p.findings))
        assert fix["description"]["text"] == f"{proposal.why} ({proposal.safety})"
        fixes.session.accept(proposal)  # accepted alone: what `fix` would write for this change
        ((before, after),) = fixes.changes().values()
        fixes.session.withdraw(proposal)
        assert apply_replacements(before, change["replacements"]) == after


def test_a_library_finding_is_reported_at_the_users_frame_that_reached_it():
    log, findings, _ = sarif_of("library_after_break")
    library = next(f for f in findings if f.where == Where.LIBRARY)
    assert library.user_frame is not None
    result = next(r for r in log["runs"][0]["results"] if r["properties"].get("libraryLocation"))
    location = result["locations"][0]["physicalLocation"]
    assert location["artifactLocation"] == {"uri": "model.py", "uriBaseId": "%SRCROOT%"}
    assert location["region"]["startLine"] == library.user_frame.line
    assert result["properties"]["libraryLocation"] == f"{library.path}:{library.line}"
    assert "a library's code, reached from this line" in result["message"]["text"]
    assert "fixes" not in result


def test_a_library_finding_with_no_frame_of_the_users_keeps_its_absolute_place():
    findings, root = recorded_findings("library_after_break")
    library = next(f for f in findings if f.where == Where.LIBRARY)
    log = to_sarif([replace(library, user_frame=None)], root)
    validate(log)
    artifact = log["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]
    assert artifact == {"uri": Path(library.path).as_uri()}


def test_code_with_no_file_keeps_its_name():
    findings, root = recorded_findings("several")
    generated = replace(findings[0], where=Where.OUTSIDE, file="<string>", path="<string>", line=3)
    log = to_sarif([generated], root)
    validate(log)
    artifact = log["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]
    assert artifact == {"uri": "%3Cstring%3E"}
    assert "<string>:3: " in to_github([generated])


def test_fingerprints_survive_the_code_moving(tmp_path: Path):
    project = tmp_path / "several"
    shutil.copytree(ROOT / "fixtures" / "scan" / "several", project)
    findings, _ = recorded_findings("several", project)
    before = to_sarif(findings, project)
    train = project / "train.py"
    train.write_text("# a comment\n# and another\n" + train.read_text())  # every line moves down by two
    moved = [replace(f, line=f.line + 2) for f in findings]
    after = to_sarif(moved, project)

    def prints(log: dict[str, Any]) -> dict[str, str]:
        return {r["ruleId"]: r["partialFingerprints"]["torchmendFinding/v1"] for r in log["runs"][0]["results"]}

    assert prints(before) == prints(after)
    assert len(set(prints(before).values())) == len(findings)


def test_replacements_at_the_edges_of_a_file():
    cases = [
        ("a\nb\n", "a\nb\nc\n"),  # append after the last newline
        ("a\nb", "a\nB"),  # the last line has no newline
        ("a\nb", "a\nb\nc"),
        ("a\nb\nc\n", "a\nc\n"),  # a deletion: no insertedContent
        ("x\r\ny\r\n", "x\r\nz\r\ny\r\n"),  # CRLF lines stay CRLF
        ("", "import torch\n"),
    ]
    for before, after in cases:
        assert apply_replacements(before, replacements(before, after)) == after, (before, after)
    assert replacements("a\nb\nc\n", "a\nc\n") == [
        {"deletedRegion": {"startLine": 2, "startColumn": 1, "endLine": 3, "endColumn": 1}}
    ]


def test_columns_and_a_file_that_cannot_be_read(tmp_path: Path):
    code = tmp_path / "train.py"
    code.write_text("def f(x):\n\tif x.sum() > 0:\n        return x\n")
    base = dict(kind=Kind.GRAPH_BREAK, title="t", function="f", where=Where.PROJECT, reason="r", count=1)
    findings = [
        Finding(rule="TM103", file="train.py", line=2, path=str(code), severity=Severity.FIX, **base),
        Finding(rule="TM101", file="train.py", line=3, path=str(code), severity=Severity.FIX, **base),
        Finding(rule="TM101", file="gone.py", line=7, path=str(tmp_path / "gone.py"), severity=Severity.INFO, **base),
    ]
    log = to_sarif(findings, tmp_path)
    validate(log)
    regions = [r["locations"][0]["physicalLocation"]["region"] for r in log["runs"][0]["results"]]
    assert regions == [
        {"startLine": 7, "startColumn": 1},  # gone.py sorts first; unreadable: column 1
        {"startLine": 2, "startColumn": 2},  # a tab is one character
        {"startLine": 3, "startColumn": 9},
    ]
    assert [r["level"] for r in log["runs"][0]["results"]] == ["note", "warning", "warning"]


def test_report_is_the_one_call_a_command_makes():
    findings, root = recorded_findings("several")
    fixes = text_fixes(pipeline.propose(findings, root))
    text = report("sarif", findings, root, fixes, run_properties={"summary": {"steps": 3}})
    assert text.endswith("}\n")
    log = json.loads(text)
    validate(log)
    assert log["runs"][0]["properties"] == {"summary": {"steps": 3}}
    assert sum("fixes" in r for r in log["runs"][0]["results"]) == 5  # the command's proposals, as text edits
    bare = json.loads(report("sarif", findings, root))
    assert not any("fixes" in r for r in bare["runs"][0]["results"])  # formatting runs no codemod itself
    with pytest.raises(ValueError):
        report("table", findings, root)


def test_a_static_finding_says_how_sure_it_is_instead_of_a_count(tmp_path: Path) -> None:
    """lint's findings have a confidence and no count (nothing ran). A check's reason says itself that it is static;
    the finding for a file lint cannot parse (TM904, a source finding) gets the annotation's sentence instead."""
    from torchmend.lint import lint_paths
    from torchmend.values import Root

    (tmp_path / "broken.py").write_text("import torch\n\nf = torch.compile(lambda x: x\ndef g(:\n")
    (tmp_path / "train.py").write_text("import torch\n\n\n@torch.compile\ndef f(x):\n    print(x)\n    return x\n")
    findings = lint_paths([tmp_path], Root(tmp_path), cache=False).findings
    assert sorted((f.rule, f.confidence) for f in findings) == [("TM101", "likely"), ("TM904", "likely")]
    log = to_sarif(findings, tmp_path)
    validate(log)
    results = {r["ruleId"]: r for r in log["runs"][0]["results"]}
    assert all(r["properties"]["confidence"] == "likely" and "count" not in r["properties"] for r in results.values())
    sentence = "Static finding (likely): `torchmend scan` confirms it by running the script."
    assert results["TM904"]["message"]["text"].endswith("nothing in it was checked.\n" + sentence)
    check = results["TM101"]["message"]["text"]
    assert sentence not in check and "(static: lint read the source and ran nothing;" in check
    assert not any("Seen" in r["message"]["text"] for r in results.values())
