"""scan, fix, lint and verify say the same about the same finding (issue 30 item 2): one rule per cause, one
one-time / recurring judgement, one wording of the counts. No run of its own: the scans are the session's cached
ones (conftest.scan_json, the same keys test_scan_fixtures uses); lint and fix's proposals run in-process, and
verify's judgement of a run is made on the cached scan's own events (verify analyses each of its runs with the
same `analyse` as scan: verify/runs.from_outcome)."""

from __future__ import annotations

import io

import pytest
from conftest import SCAN_FIXTURES, scan_events, scan_json
from rich.console import Console

from torchmend import rules
from torchmend.lint import lint_paths
from torchmend.model import EndedBy, Finding, Summary
from torchmend.profiler.runner import RunOutcome
from torchmend.values import Root
from torchmend.verify.runs import ArmRun, from_outcome

FIXTURES = sorted(p.name for p in SCAN_FIXTURES.iterdir() if (p / "expected.json").exists())


def _plain(markup: str) -> str:
    console = Console(file=io.StringIO(), width=400, color_system=None)
    console.print(markup)
    return console.file.getvalue().strip()  # type: ignore[attr-defined]


@pytest.mark.parametrize("name", FIXTURES)
def test_scan_and_lint_agree_on_rule_and_judgement(name: str) -> None:
    folder = SCAN_FIXTURES / name
    report = scan_json(folder / "train.py").json
    scanned = [Finding.from_json(f) for f in report["findings"]]
    by_line: dict[tuple[str, int], list[Finding]] = {}
    for f in scanned:
        if f.where == "project" and not rules.BY_CODE[f.rule].informational:
            by_line.setdefault((f.file, f.line), []).append(f)
    linted = lint_paths([folder], Root(folder), cache=False).findings
    for lf in linted:
        same_line = by_line.get((lf.file, lf.line), [])
        if not same_line:
            continue  # lint alone: docs/lint-precision.md counts those
        # one rule per cause: where the run broke or recompiled at lint's line, it names the same rule
        assert lf.rule in {f.rule for f in same_line}, (name, lf.rule, lf.line, [f.rule for f in same_line])
        sf = next(f for f in same_line if f.rule == lf.rule)
        # one judgement: one-time (a recompile that happens once) or recurring, alike
        assert (lf.severity, lf.pattern == "once") == (sf.severity, sf.pattern == "once"), (name, lf.rule, lf.line)


def test_scan_fix_and_lint_word_the_counts_alike() -> None:
    """The bundled example: scan's table, fix's proposal line and lint's summary carry the same counts phrase."""
    from torchmend.cli.render import counts_text, print_scan

    folder = SCAN_FIXTURES / "several"
    report = scan_json(folder / "train.py").json
    findings = [Finding.from_json(f) for f in report["findings"]]
    phrase = _plain(counts_text(findings))
    assert phrase == "5 findings: 4 to fix, 1 one-time, 0 informational"
    console = Console(file=io.StringIO(), width=200, color_system=None)
    summary = report["summary"]
    print_scan(console, findings, Summary(**{**summary, "ended_by": EndedBy(summary["ended_by"]), "per_rank": ()}))
    assert phrase in console.file.getvalue()  # type: ignore[attr-defined]
    linted = lint_paths([folder], Root(folder), cache=False).findings
    assert _plain(counts_text(linted)) == "4 findings: 3 to fix, 1 one-time, 0 informational"  # TM250: a run's


def _verify_arm(name: str) -> tuple[dict, ArmRun]:
    """The cached scan of a fixture, and the same run as verify's before-arm sees it."""
    script = SCAN_FIXTURES / name / "train.py"
    report = scan_json(script).json
    ended_by = EndedBy(report["summary"]["ended_by"])
    outcome = RunOutcome(scan_events(script), ended_by, 0, report["summary"]["wall_seconds"], "")
    return report, from_outcome("before", 0, outcome, Root(SCAN_FIXTURES / name))


def _judgement(f: Finding) -> tuple:
    return (f.rule, f.path, f.line, f.count, f.severity, f.pattern == "once")


@pytest.mark.parametrize("name", FIXTURES)
def test_verify_judges_a_run_as_scan_does(name: str) -> None:
    """Each finding of the run: the same rule, count and one-time / recurring judgement in verify as in scan."""
    report, arm = _verify_arm(name)
    scanned = sorted(_judgement(Finding.from_json(f)) for f in report["findings"])
    assert sorted(_judgement(f) for f in arm.findings) == scanned


def test_verify_counts_what_scan_counts_to_fix() -> None:
    """The bundled example: verify's "findings to fix" row is the number scan's counts phrase calls "to fix"."""
    from torchmend.cli.fixview import verification_view
    from torchmend.cli.render import counts_text
    from torchmend.verify.compare import judge

    report, arm = _verify_arm("several")
    phrase = _plain(counts_text(arm.findings))
    assert phrase == "5 findings: 4 to fix, 1 one-time, 0 informational"
    console = Console(file=io.StringIO(), width=200, color_system=None)
    console.print(verification_view(judge([arm], [arm])))
    row = next(line for line in console.file.getvalue().splitlines() if "findings to fix" in line)  # type: ignore[attr-defined]
    cells = [c.strip() for c in row.split("│") if c.strip()]
    assert cells[:3] == ["findings to fix", "4", "4"], row


def test_fix_first_line_counts_parts_that_add_up() -> None:
    """fix's first line on the bundled example (issue 41): the one-time TM250 is fixed by the TM201 change, so 4
    changes cover all 5 findings; the line says so, and its parts add up to the findings counted."""
    import re

    from conftest import ROOT

    from torchmend import pipeline
    from torchmend.cli.fixview import proposed_text

    findings = [Finding.from_json(f) for f in scan_json(SCAN_FIXTURES / "several" / "train.py").json["findings"]]
    fixes = pipeline.propose(findings, ROOT)
    line = _plain(proposed_text(findings, fixes.proposals, fixes.unfixed, 0))
    m = re.fullmatch(
        r"(\d+) findings: .*; (\d+) changes? proposed for (\d+) of them, (\d+) not fixable(?:, (\d+) with nothing to do)?",
        line,
    )
    assert m, line
    total, _, covered, refused, rest = (int(g or 0) for g in m.groups())
    assert covered + refused + rest == total == len(findings)
    assert line == "5 findings: 4 to fix, 1 one-time, 0 informational; 4 changes proposed for 5 of them, 0 not fixable"
