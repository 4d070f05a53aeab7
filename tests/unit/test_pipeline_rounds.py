"""pipeline.verify_rounds on synthetic runs: real proposals (libcst) in a real session, with the before/after
runs made up (verify.runs.run_arms replaced), so every path of the two-round logic is exercised without torch.

The made-up patched run keeps a finding exactly when the test says that change does not help; its line is
where that print now stands in the patched text, as a real run would report it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from torchmend import pipeline
from torchmend.model import Finding, Kind, Severity, Summary, Where
from torchmend.pipeline import rounds
from torchmend.profiler.runner import RunOutcome, RunSpec
from torchmend.verify import runs
from torchmend.verify.runs import ArmRun

SCRIPT = """import torch


@torch.compile
def step(x):
    print("one", x.shape[0], flush=True)
    h = x * 2
    print("two", h.mean(), flush=True)
    h = h + 1
    print("three", h.sum(), flush=True)
    return h
"""
PRINTS = {"one": 6, "two": 8, "three": 10}  # the line of each print in SCRIPT


def _finding(root: Path, name: str, line: int) -> Finding:
    return Finding(
        rule="TM101",
        kind=Kind.GRAPH_BREAK,
        title="print",
        file="train.py",
        line=line,
        function="step",
        path=str(root / "train.py"),
        where=Where.PROJECT,
        reason=f"print {name}",
        count=1,
        severity=Severity.FIX,
    )


def _run(arm: str, findings: list[Finding], failed: bool = False, error: str = "") -> ArmRun:
    summary = Summary(
        frames_compiled=1,
        compiles=1,
        graphs=len(findings) + 1,
        graph_breaks=len(findings),
        recompiles=0,
        recompile_limit_hits=0,
        compile_seconds=1.0,
        steps=5,
        ended_by="error" if failed else "steps",
        wall_seconds=2.0,
        torch_version="2.13",
        first_step_s=0.5,
        steady_step_s=0.01,
    )
    end = {"losses": [1.0, 0.5, 0.25][: 1 if failed else 3], "params": None, "error": error}
    outcome = RunOutcome([], "error" if failed else "steps", 1 if failed else 0, 2.0, "RuntimeError: boom", end)
    return ArmRun(arm, 0, findings, summary, outcome)


class FakeArms:
    """Stands in for verify.runs.run_arms: round n's patched run keeps the findings of the prints named in
    useless[n - 1] (read from the overlay, where the patched text tells their new lines)."""

    def __init__(
        self,
        root: Path,
        useless: list[set[str]],
        fail_round: int | None = None,
        fails_with: frozenset[str] = frozenset(),
        named: bool = False,
        elsewhere: int = 0,
    ) -> None:
        self.root = root
        self.elsewhere = elsewhere  # findings the patched run shows at lines no change targets (a layer recompiled)
        self.useless = useless
        self.fail_round = fail_round
        self.fails_with = fails_with  # the patched run fails when every one of these prints is gated
        self.named = named  # and its exception names the line of the first
        self.calls: list[tuple[int, str]] = []  # (len(reuse_before), the patched text) per round

    def __call__(
        self,
        before: RunSpec,
        after: RunSpec,
        root: Path,
        repeat: int,
        on_run: Callable[[str, int], None] | None = None,
        reuse_before: tuple[ArmRun, ...] = (),
    ) -> tuple[list[ArmRun], list[ArmRun]]:
        assert before.overlay == () and len(after.overlay) == 1
        text = after.overlay[0][1]
        self.calls.append((len(reuse_before), text))
        number = len(self.calls)
        for arm in ("before", "after")[len(reuse_before) :]:
            if on_run:
                on_run(arm, 0)
        lines = text.splitlines()
        left = [
            _finding(self.root, name, next(i for i, t in enumerate(lines, 1) if f'print("{name}"' in t))
            for name in sorted(self.useless[min(number, len(self.useless)) - 1])
            if f'print("{name}"' in text
        ]
        original = [_finding(self.root, n, line) for n, line in PRINTS.items()]
        gated = _gated(text)
        failed = number == self.fail_round or bool(self.fails_with and self.fails_with <= gated)
        error = ""
        if failed and self.named:
            name = sorted(self.fails_with)[0]
            at = next(i for i, t in enumerate(lines, 1) if f'print("{name}"' in t)
            error = f'RuntimeError: boom\n\nfrom user code:\n   File "{self.root / "train.py"}", line {at}, in step\n    x\n'
        useless = self.useless[min(number, len(self.useless)) - 1]
        left = [f for f in left if f.reason.split()[1] in useless]
        left += [_finding(self.root, f"elsewhere{i}", 2 + i) for i in range(self.elsewhere)]
        return [_run("before", original)], [_run("after", left, failed=failed, error=error)]


@pytest.fixture
def fixes(tmp_path: Path) -> pipeline.Fixes:
    (tmp_path / "train.py").write_text(SCRIPT)
    fixes = pipeline.propose([_finding(tmp_path, n, line) for n, line in PRINTS.items()], tmp_path)
    assert [p.findings[0].line for p in fixes.proposals] == [6, 8, 10]
    decisions = pipeline.accept_all(fixes, unsafe=True)  # gating a print is unsafe: accepted on purpose
    assert len(decisions) == 3 and len(fixes.accepted) == 3
    return fixes


def _scan(root: Path, cold: bool) -> pipeline.Scan:
    findings = [_finding(root, n, line) for n, line in PRINTS.items()]
    ran = _run("before", findings)
    return pipeline.Scan(findings, ran.summary, ran.outcome, spec=RunSpec(script=root / "train.py"), cold=cold)


def _rounds(
    monkeypatch: pytest.MonkeyPatch,
    fixes: pipeline.Fixes,
    arms: FakeArms,
    cold: bool = False,
    backend: str | None = None,
) -> list[pipeline.Event]:
    monkeypatch.setattr(runs, "run_arms", arms)
    monkeypatch.setattr(runs, "standing_in", lambda before, reuse: reuse)  # fake runs all start alike
    root = Path(fixes.session.ctx.project_root)
    started: list[pipeline.RunStarted] = []
    events = list(pipeline.verify_rounds(_scan(root, cold), fixes, root, backend=backend, on_run=started.append))
    assert all(s.total in (1, 2) for s in started)
    # one stage, the judging one, on the backend asked for (no screening backend was given)
    stage = events[0]
    assert isinstance(stage, pipeline.Stage) and (stage.kind, stage.backend, stage.repeat) == ("judge", backend, 1)
    return events[1:]


def _gated(text: str) -> set[str]:
    return set(re.findall(r'is_compiling\(\):\n\s+print\("(\w+)"', text))


def test_every_change_helped(monkeypatch: pytest.MonkeyPatch, fixes: pipeline.Fixes) -> None:
    arms = FakeArms(Path(fixes.session.ctx.project_root), [set()])
    events = _rounds(monkeypatch, fixes, arms, cold=True)
    assert [type(e) for e in events] == [pipeline.Round, pipeline.Verified]
    done = events[-1]
    assert done.outcome == pipeline.VERIFIED and done.ok and len(done.accepted) == 3
    assert all(e.helped for e in events[0].effects)
    assert arms.calls[0][0] == 1  # the cold scan stood in for the first before-run


def test_a_warm_scan_or_another_backend_is_not_reused(monkeypatch: pytest.MonkeyPatch, fixes: pipeline.Fixes) -> None:
    arms = FakeArms(Path(fixes.session.ctx.project_root), [set()])
    _rounds(monkeypatch, fixes, arms, cold=False)
    arms2 = FakeArms(Path(fixes.session.ctx.project_root), [set()])
    _rounds(monkeypatch, fixes, arms2, cold=True, backend="aot_eager")
    assert arms.calls[0][0] == 0 and arms2.calls[0][0] == 0


def test_a_change_that_did_not_help_is_withdrawn_and_the_rest_verified_again(
    monkeypatch: pytest.MonkeyPatch, fixes: pipeline.Fixes
) -> None:
    arms = FakeArms(Path(fixes.session.ctx.project_root), [{"two"}, set()])
    events = _rounds(monkeypatch, fixes, arms)
    assert [type(e) for e in events] == [pipeline.Round, pipeline.Retry, pipeline.Round, pipeline.Verified]
    first, retry, second, done = events
    assert [e.helped for e in first.effects] == [True, False, True]
    assert [p.findings[0].line for p in retry.withdrawn] == [8]
    assert _gated(arms.calls[0][1]) == {"one", "two", "three"}
    assert _gated(arms.calls[1][1]) == {"one", "three"}  # round 2 runs without the withdrawn change
    assert arms.calls[1][0] == 1  # round 1's before-run is reused
    assert done.outcome == pipeline.VERIFIED and [p.findings[0].line for p in done.accepted] == [6, 10]
    assert _gated(fixes.changes()[str(Path(fixes.session.ctx.project_root) / "train.py")][1]) == {"one", "three"}


def test_no_change_helped(monkeypatch: pytest.MonkeyPatch, fixes: pipeline.Fixes) -> None:
    arms = FakeArms(Path(fixes.session.ctx.project_root), [{"one", "two", "three"}])
    events = _rounds(monkeypatch, fixes, arms)
    assert [type(e) for e in events] == [pipeline.Round, pipeline.Verified]
    assert events[-1].outcome == pipeline.NONE_HELPED and events[-1].accepted == ()
    assert fixes.changes() == {}  # nothing left to write


def test_findings_gone_but_as_many_new_ones_elsewhere_is_no_help(
    monkeypatch: pytest.MonkeyPatch, fixes: pipeline.Fixes
) -> None:
    """Every targeted finding went, and as many came at other lines (PyTorch's eager_then_compile stance on a flow
    whose layers share one forward: 1 recompile before, 1 after, at another line): the verdict is no change, so
    no change is kept, though each one's own finding is gone."""
    arms = FakeArms(Path(fixes.session.ctx.project_root), [set()], elsewhere=3)
    events = _rounds(monkeypatch, fixes, arms)
    assert all(e.helped for e in events[0].effects)
    assert events[0].verification.verdict == "no_change"
    done = events[-1]
    assert done.outcome == pipeline.NONE_HELPED and done.accepted == ()
    assert fixes.changes() == {}


def test_still_unhelpful_after_the_second_round(monkeypatch: pytest.MonkeyPatch, fixes: pipeline.Fixes) -> None:
    arms = FakeArms(Path(fixes.session.ctx.project_root), [{"three"}, {"two"}])
    events = _rounds(monkeypatch, fixes, arms)
    assert [type(e) for e in events] == [pipeline.Round, pipeline.Retry, pipeline.Round, pipeline.Verified]
    assert len(arms.calls) == 2  # never a third round
    done = events[-1]
    assert done.outcome == pipeline.STILL_UNHELPFUL and not done.ok
    assert [p.findings[0].line for p in done.accepted] == [6]


def test_a_refusal_no_single_change_explains_refuses_them_all(
    monkeypatch: pytest.MonkeyPatch, fixes: pipeline.Fixes
) -> None:
    # fails only with "one" and "three" together: neither half of the bisection fails alone
    arms = FakeArms(Path(fixes.session.ctx.project_root), [set()], fails_with=frozenset({"one", "three"}))
    events = _rounds(monkeypatch, fixes, arms)
    assert [type(e) for e in events] == [pipeline.Round, pipeline.Probe, pipeline.Probe, pipeline.Verified]
    assert events[0].effects == () and events[0].verification.verdict == "refused"
    assert "the patched script failed" in events[0].verification.reasons[0].text
    assert [len(p.changes) for p in events[1:3]] == [1, 2]
    done = events[-1]
    assert done.outcome == pipeline.REFUSED and len(done.accepted) == 3
    assert [r.found_by for r in done.tried] == ["refused only together"] * 3


def test_the_change_a_failure_names_is_dropped_and_the_rest_verified(
    monkeypatch: pytest.MonkeyPatch, fixes: pipeline.Fixes
) -> None:
    arms = FakeArms(Path(fixes.session.ctx.project_root), [set()], fails_with=frozenset({"two"}), named=True)
    events = _rounds(monkeypatch, fixes, arms)
    assert [type(e) for e in events] == [pipeline.Round, pipeline.Dropped, pipeline.Round, pipeline.Verified]
    (refusal,) = events[1].refused
    assert (
        refusal.proposal.findings[0].line == 8
        and refusal.found_by == "the failure names its line"
        and refusal.fallback is None
    )
    assert "RuntimeError: boom at train.py:" in refusal.reasons[0].text
    assert _gated(arms.calls[1][1]) == {"one", "three"}
    done = events[-1]
    assert done.outcome == pipeline.VERIFIED and [p.findings[0].line for p in done.accepted] == [6, 10]
    assert [r.proposal.findings[0].line for r in done.tried] == [8]


def test_bisection_finds_the_change_when_the_failure_names_no_line(
    monkeypatch: pytest.MonkeyPatch, fixes: pipeline.Fixes
) -> None:
    arms = FakeArms(Path(fixes.session.ctx.project_root), [set()], fails_with=frozenset({"three"}))
    events = _rounds(monkeypatch, fixes, arms)
    kinds = [type(e) for e in events]
    assert kinds == [pipeline.Round, *[pipeline.Probe] * 4, pipeline.Dropped, pipeline.Round, pipeline.Verified]
    assert [sorted(_gated(t)) for _, t in arms.calls[1:5]] == [["one"], ["three", "two"], ["two"], ["three"]]
    (refusal,) = events[5].refused
    assert refusal.proposal.findings[0].line == 10 and refusal.found_by == "bisection"
    assert events[-1].ok and [p.findings[0].line for p in events[-1].accepted] == [6, 8]


def test_a_refused_change_makes_way_for_its_fallback(monkeypatch: pytest.MonkeyPatch, fixes: pipeline.Fixes) -> None:
    import libcst as cst

    from torchmend.codemods.base import Proposal

    session = fixes.session
    two = next(p for p in session.accepted if p.findings[0].line == 8)
    node = next(iter(two.replace))
    dropped = cst.Pass() if isinstance(node, cst.BaseSmallStatement) else cst.parse_statement("pass\n")
    fallback = Proposal(two.findings, "TM101", two.path, "drop the print", safety="unsafe", replace={node: dropped})
    session.withdraw(two)
    session.accept(replace(two, fallbacks=(fallback,)))
    arms = FakeArms(Path(session.ctx.project_root), [set()], fails_with=frozenset({"two"}), named=True)
    events = _rounds(monkeypatch, fixes, arms)
    assert [type(e) for e in events] == [pipeline.Round, pipeline.Dropped, pipeline.Round, pipeline.Verified]
    (refusal,) = events[1].refused
    assert refusal.fallback is not None and refusal.fallback.why == "drop the print"
    assert 'print("two"' not in arms.calls[1][1] and _gated(arms.calls[1][1]) == {"one", "three"}
    done = events[-1]
    assert done.ok and [p.why for p in done.accepted].count("drop the print") == 1 and len(done.accepted) == 3


def test_a_trace_scan_cannot_be_verified(fixes: pipeline.Fixes) -> None:
    root = Path(fixes.session.ctx.project_root)
    scan = _scan(root, cold=False)
    scan.spec = None
    with pytest.raises(ValueError, match="trace"):
        next(pipeline.verify_rounds(scan, fixes, root))


def test_changes_refused_only_together_swap_the_one_with_a_fallback_and_keep_the_rest(
    monkeypatch: pytest.MonkeyPatch, fixes: pipeline.Fixes
) -> None:
    import libcst as cst

    from torchmend.codemods.base import Proposal

    session = fixes.session
    one = next(p for p in session.accepted if p.findings[0].line == 6)
    node = next(iter(one.replace))
    dropped = cst.Pass() if isinstance(node, cst.BaseSmallStatement) else cst.parse_statement("pass\n")
    fallback = Proposal(one.findings, "TM101", one.path, "drop the print", safety="unsafe", replace={node: dropped})
    session.withdraw(one)
    session.accept(replace(one, fallbacks=(fallback,)))
    # "one" and "three" gated together fail, neither alone (the accepted order is two, three, one: the bisection
    # narrows the refusal to three and one, which fail only together)
    arms = FakeArms(Path(session.ctx.project_root), [set()], fails_with=frozenset({"one", "three"}))
    events = _rounds(monkeypatch, fixes, arms)
    kinds = [type(e) for e in events]
    assert kinds == [pipeline.Round, *[pipeline.Probe] * 4, pipeline.Dropped, pipeline.Round, pipeline.Verified]
    assert [sorted(_gated(t)) for _, t in arms.calls[1:5]] == [["two"], ["one", "three"], ["three"], ["one"]]
    (refusal,) = events[5].refused
    assert refusal.found_by == "bisection" and refusal.fallback is not None
    assert refusal.proposal.findings[0].line == 6
    done = events[-1]
    assert done.ok and len(done.accepted) == 3 and _gated(arms.calls[-1][1]) == {"two", "three"}


@pytest.mark.parametrize("where", ["insert_before", "insert_after"])
def test_a_failure_at_an_inserted_line_names_the_change_that_inserted_it(tmp_path: Path, where: str) -> None:
    import libcst as cst

    from torchmend.codemods.base import Proposal
    from torchmend.verify.failure import RunFailure

    (tmp_path / "train.py").write_text(SCRIPT)
    fixes = pipeline.propose([_finding(tmp_path, n, line) for n, line in PRINTS.items()], tmp_path)
    session = fixes.session
    path = str(tmp_path / "train.py")
    module = session.ctx.file(path).module
    step = next(n for n in module.body if isinstance(n, cst.FunctionDef))
    anchor = step.body.body[2]  # print("two", ...)
    mark = cst.parse_statement("torch._dynamo.maybe_mark_dynamic(x, 0)\n")
    inserted = Proposal((fixes.proposals[1].findings[0],), "TM202", path, "mark", **{where: {anchor: [mark]}})
    session.accept(fixes.proposals[0])
    session.accept(inserted)
    session.accept(fixes.proposals[2])
    text = session.changed()[path][1]
    line = text.splitlines().index("    torch._dynamo.maybe_mark_dynamic(x, 0)") + 1
    failure = RunFailure("after", "error", "AssertionError: forbidden", path, line, "", 0)
    assert rounds._by_line(session, list(session.accepted), failure) == [inserted]


def test_a_strict_change_beside_a_random_stream_one_keeps_the_strict_gate(
    monkeypatch: pytest.MonkeyPatch, fixes: pipeline.Fixes
) -> None:
    """A set holding a change of the random stream is verified in distribution, but its strict changes are verified
    alone first, number for number: the strict change that breaks the run is refused, the others are kept."""
    from torchmend.codemods.base import RANDOM_STREAM
    from torchmend.verify import stochastic

    root = Path(fixes.session.ctx.project_root)
    session = fixes.session
    two = session.accepted[1]
    session.withdraw(two)
    session.accept(replace(two, safety=RANDOM_STREAM))  # made a random-stream change here
    arms = FakeArms(root, [set()], fails_with=frozenset({"one"}))  # gating "one" breaks the patched run
    in_distribution: list[set[str]] = []
    original = [f for p in session.accepted for f in p.findings]

    def seeded_runs(before, after, root, seeds, reuse=None, on_run=None):
        in_distribution.append(_gated(after.overlay[0][1]))

        def arm(name: str, i: int) -> ArmRun:
            run = _run(name, original if name == "before" else [])  # the seeds' runs show the prints, then none
            end = {"losses": [1.0 + i / 100, 0.5 + i / 100, 0.25 + i / 100], "params": None, "error": ""}
            return replace(run, outcome=replace(run.outcome, end=end))

        return [arm("before", i) for i in range(len(seeds))], [arm("after", i) for i in range(len(seeds))]

    monkeypatch.setattr(stochastic, "seeded_runs", seeded_runs)
    events = _rounds(monkeypatch, fixes, arms)
    assert _gated(arms.calls[0][1]) == {"one", "three"}  # the strict ones alone first: refused
    done = events[-1]
    assert done.outcome == pipeline.VERIFIED, done
    assert sorted(p.findings[0].line for p in done.accepted) == [8, 10]  # "one" refused, "two" and "three" kept
    assert in_distribution and all("one" not in gated for gated in in_distribution)
    assert {p.findings[0].line for r in done.tried for p in [r.proposal]} == {6}


def test_a_follow_up_helps_only_with_fewer_problems_than_the_round_it_follows() -> None:
    """The follow-up round is judged against the verified round before it, not only against the original: a finding
    gone by its line while another comes elsewhere is not fewer."""
    from torchmend.verify.compare import NO_CHANGE, Metric, Stat, Verification

    def after(breaks: int, recompiles: int) -> Verification:
        counts = [
            Metric("graph_breaks", Stat.of([9]), Stat.of([breaks])),
            Metric("recompiles", Stat.of([3]), Stat.of([recompiles])),
        ]
        return Verification(1, counts, [], None, NO_CHANGE)

    good = after(2, 1)
    assert rounds._fewer(after(2, 0), good)
    assert not rounds._fewer(after(2, 1), good)  # as many as before the follow-up
    assert not rounds._fewer(after(1, 2), good)  # one fewer break, one more recompile


def _fix_exit(monkeypatch: pytest.MonkeyPatch, fixes: pipeline.Fixes, arms: FakeArms) -> tuple[int, bool]:
    """How `torchmend fix` ends after these rounds (its verification step, cli/fix.py): the exit code, and whether
    anything is left to write."""
    import typer

    from torchmend.cli import fix as cli_fix
    from torchmend.project import Project
    from torchmend.settings import Settings

    monkeypatch.setattr(runs, "run_arms", arms)
    root = Path(fixes.session.ctx.project_root)
    try:
        left = cli_fix._verify(_scan(root, False), fixes, Project.of(root), Settings(), (None, None), repeat=1)
    except typer.Exit as e:
        return e.exit_code, False
    return 0, left is not None


def test_nothing_written_because_nothing_helped_is_one_exit_code(
    monkeypatch: pytest.MonkeyPatch, fixes: pipeline.Fixes, tmp_path: Path
) -> None:
    """No change helped in the first round (none_helped), or one still did not in the second (still_unhelpful):
    the same outcome, nothing written, so the same exit code whichever round found it (issue 41: it was 0 or 10)."""
    none_helped = _fix_exit(monkeypatch, fixes, FakeArms(tmp_path, [{"one", "two", "three"}]))
    again = tmp_path / "again"
    again.mkdir()
    (again / "train.py").write_text(SCRIPT)
    second = pipeline.propose([_finding(again, n, line) for n, line in PRINTS.items()], again)
    pipeline.accept_all(second, unsafe=True)
    still_unhelpful = _fix_exit(monkeypatch, second, FakeArms(again, [{"three"}, {"two"}]))
    assert none_helped == still_unhelpful == (0, False)
