"""The verdict rules and the change attribution, on hand-made run records (no child runs: the real runs are
in test_verify_cli.py and test_codemods_e2e.py)."""

from __future__ import annotations

from torchmend.codemods.base import Proposal
from torchmend.model import Finding, Summary
from torchmend.profiler.runner import RunOutcome
from torchmend.values import Root
from torchmend.verify.attribution import attribute
from torchmend.verify.compare import IMPROVED, NEUTRAL, NO_CHANGE, REFUSED, judge
from torchmend.verify.reasons import ReasonKind
from torchmend.verify.runs import ArmRun


def _run(
    arm: str,
    breaks: int = 0,
    recompiles: int = 0,
    steady: float = 0.01,
    losses=(1.0, 0.9, 0.8),
    ended_by: str = "finished",
    compiled: bool = True,
    ops: int = 40,
    largest: int = 30,
    last: float | None = None,
    compile_s: float = 1.0,
    first: float = 1.0,
) -> ArmRun:
    summary = Summary(
        frames_compiled=1 if compiled else 0,
        compiles=(1 + recompiles) if compiled else 0,
        graphs=(1 + breaks) if compiled else 0,
        graph_breaks=breaks,
        recompiles=recompiles,
        recompile_limit_hits=0,
        compile_seconds=compile_s,
        steps=len(losses),
        ended_by=ended_by,
        wall_seconds=5.0,
        torch_version="2.13",
        first_step_s=first,
        steady_step_s=steady,
        last_step_s=last if last is not None else 1.0 + steady * len(losses),
        ops_compiled=ops if compiled else 0,
        largest_graph_ops=largest if compiled else 0,
    )
    end = {"ev": "end", "reason": ended_by, "losses": list(losses), "params": None}
    return ArmRun(arm, 0, [], summary, RunOutcome([], ended_by, 0, 5.0, "Traceback ...\nValueError: boom", end))


def test_fewer_breaks_with_no_measured_gain_is_neutral_never_improved() -> None:
    """Counts are diagnostics: fewer breaks with one run per arm (no noise band) is 'no measured speed change'."""
    v = judge([_run("before", breaks=2)], [_run("after", breaks=0)])
    assert v.verdict == NEUTRAL and v.ok and not v.reasons
    assert v.metric("graph_breaks").ratio == 0
    assert "speed not measured" in v.speed_text() and "one run per arm" in v.speed_text()


def test_improved_needs_a_gain_beyond_the_measured_band() -> None:
    before = [_run("b", breaks=2, steady=s) for s in (0.0100, 0.0102, 0.0101)]
    faster = [_run("a", steady=s) for s in (0.0060, 0.0061, 0.0062)]
    within = [_run("a", steady=s) for s in (0.0099, 0.0103, 0.0100)]
    v = judge(before, faster)
    assert v.verdict == IMPROVED and v.speed is not None and v.speed.gain is not None
    assert v.speed_text().startswith("faster on the script's own backend")
    w = judge(before, within)
    assert w.verdict == NEUTRAL and w.speed_text().startswith("no measured speed change")
    # equal steps, a compile measured shorter: faster to start
    start = [_run("a", steady=s, compile_s=c) for s, c in ((0.0100, 0.40), (0.0102, 0.41), (0.0101, 0.39))]
    assert judge(before, start).verdict == IMPROVED
    # the first step ending sooner while the compile takes as long (a first call run eagerly moves the compile to
    # the second step) is no gain
    deferred = [_run("a", steady=s, first=f) for s, f in ((0.0100, 0.14), (0.0102, 0.15), (0.0101, 0.13))]
    moved = judge(before, deferred)
    assert moved.verdict == NEUTRAL and moved.speed is not None and moved.speed.of("first_step_s").pace == "faster"
    # a screening run judges no speed at all, whatever the times
    assert judge(before, faster, timed=False).verdict == NEUTRAL


def test_compiling_less_is_refused_whatever_the_counts_say() -> None:
    """A change that takes the model out of compiled code (a disable around it) removes breaks and still fails."""
    v = judge([_run("before", breaks=3, ops=900, largest=460)], [_run("after", breaks=0, ops=4, largest=4)])
    assert v.verdict == REFUSED and {r.kind for r in v.reasons} == {ReasonKind.COVERAGE}
    assert "ops compiled 900 before, 4 after" in v.reasons[0].text
    kept = judge([_run("before", breaks=1, ops=100, largest=60)], [_run("after", ops=96, largest=100)])
    assert kept.verdict == NEUTRAL  # 0.96 of the ops, in one graph now: kept


def test_nothing_fixed_is_no_change() -> None:
    v = judge([_run("before", breaks=1)], [_run("after", breaks=1)])
    assert v.verdict == NO_CHANGE and "fixes nothing" in v.reasons[0].text


def test_a_patched_run_that_compiled_nothing_is_refused() -> None:
    """No breaks and no recompiles because nothing compiled (a compiler stance left on force_eager) is no fix."""
    v = judge([_run("before", breaks=2, recompiles=1)], [_run("after", compiled=False)])
    assert v.verdict == REFUSED and "compiled nothing: 3 graphs before, none after" in v.reasons[0].text


def test_more_recompiles_or_other_losses_or_a_crash_is_refused() -> None:
    assert judge([_run("b", breaks=2)], [_run("a", recompiles=1)]).verdict == REFUSED
    v = judge([_run("b", breaks=1)], [_run("a", losses=(1.0, 0.95, 0.8))])
    assert v.verdict == REFUSED and "diverge at step 1" in v.reasons[0].text
    v = judge([_run("b", breaks=1)], [_run("a", losses=(1.0,), ended_by="error")])
    assert v.verdict == REFUSED and "ValueError: boom" in v.reasons[0].text


def test_slower_only_counts_beyond_the_band() -> None:
    before = [_run("b", breaks=1, steady=s) for s in (0.010, 0.011, 0.0105)]
    apart = [_run("a", steady=s) for s in (0.020, 0.021, 0.0205)]
    noisy = [_run("a", steady=s) for s in (0.009, 0.030, 0.015)]
    v = judge(before, apart)
    assert v.verdict == REFUSED and ReasonKind.SLOWER in v.kinds()
    assert any("steady step 1.95× the original (band ±" in r.text for r in v.reasons)
    assert judge(before, noisy).verdict == NEUTRAL  # a band as wide as the arm's own noise
    # one run per arm measures no band: within ONE_RUN_LIMIT speed is not judged; beyond it, still slower
    assert judge(before[:1], apart[:1]).verdict == NEUTRAL
    far = judge(before[:1], [_run("a", steady=0.05)])
    assert far.verdict == REFUSED and "one run per arm, beyond 2×" in far.reasons[0].text


def _finding(rule: str, line: int) -> Finding:
    return Finding(
        rule=rule,
        kind="graph_break",
        title="t",
        file="m.py",
        line=line,
        function="f",
        path="/p/m.py",
        where="project",
        reason="r",
        count=1,
        severity="fix",
    )


def test_attribution_maps_lines_through_the_rewrite() -> None:
    import libcst as cst

    node = cst.parse_statement("x = 1\n")
    kept, fixed = _finding("TM101", 3), _finding("TM103", 5)
    p_kept = Proposal((kept,), "TM101", "/p/m.py", "why", replace={node: node})
    p_fixed = Proposal((fixed,), "TM103", "/p/m.py", "why", replace={node: node})
    old = "a\nb\nprint(x)\nc\nif t:\n    y = 1\n"
    new = "a\nb\n# added\nprint(x)\nc\ny = where(t, 1, y)\n"
    after = [_finding("TM101", 4)]  # the print moved down a line and still breaks
    effects = attribute([p_kept, p_fixed], after, {"/p/m.py": (old, new)})
    assert [e.helped for e in effects] == [False, True]


def test_attribution_tells_adjacent_changes_apart() -> None:
    import libcst as cst

    node = cst.parse_statement("x = 1\n")
    first, second = _finding("TM101", 2), _finding("TM101", 3)
    p_first = Proposal((first,), "TM101", "/p/m.py", "why", replace={node: node})
    p_second = Proposal((second,), "TM101", "/p/m.py", "why", replace={node: node})
    old = "def f():\n    print(1)\n    print(2)\n    return 0\n"
    new = "def f():\n    if not c():\n        print(1)\n    if not c():\n        print(2)\n    return 0\n"
    after = [_finding("TM101", 5)]  # the second print still breaks; both gates are one changed block
    effects = attribute([p_first, p_second], after, {"/p/m.py": (old, new)})
    assert [e.helped for e in effects] == [True, False]


def test_a_failed_patched_run_shows_its_exception_not_pytorchs_hint() -> None:
    from torchmend.verify.compare import failure_line

    tail = (
        'Traceback (most recent call last):\n  File "train.py", line 3, in <module>\n'
        "torch._dynamo.exc.Unsupported: Data-dependent branching\n\n"
        "Set TORCHDYNAMO_VERBOSE=1 for the internal stack trace (please do this especially if you're "
        "reporting a bug to PyTorch).\n"
    )
    outcome = RunOutcome([], "error", 1, 1.0, tail, {"ev": "end", "reason": "error"})
    assert failure_line(outcome) == "torch._dynamo.exc.Unsupported: Data-dependent branching"
    recorded = RunOutcome([], "error", 1, 1.0, tail, {"ev": "end", "error": "ValueError: boom"})
    assert failure_line(recorded) == "ValueError: boom"


def test_numerics_not_compared_is_said_so() -> None:
    v = judge([_run("before", breaks=1, losses=())], [_run("after", losses=())])
    assert v.numerics is not None and not v.numerics.compared
    assert any(n.startswith("numerics not compared") for n in v.notes)
    assert "match" not in v.numerics.describe()


# What torch 2.13 recorded for a patched forward that calls torch._dynamo.maybe_mark_dynamic (a real run's END).
FORBIDDEN = (
    "AssertionError: Attempt to trace forbidden callable <function maybe_mark_dynamic at 0x7fe6babf45e0>\n\n"
    'from user code:\n   File "/p/train.py", line 11, in forward\n    torch._dynamo.maybe_mark_dynamic(x, 0)\n\n'
    "Set TORCHDYNAMO_VERBOSE=1 for the internal stack trace (please do this especially if you're reporting a bug "
    'to PyTorch). For even more developer context, set TORCH_LOGS="+dynamo"\n'
)


def _ended(arm: str, ended_by: str, losses=(), error: str = "", tail: str = "") -> ArmRun:
    run = _run(arm, losses=losses, ended_by=ended_by)
    end = {**run.outcome.end, "error": error} if error else run.outcome.end
    run.outcome = RunOutcome([], ended_by, 1, 5.0, tail, end)
    return run


def test_a_failed_patched_run_is_named_with_its_line_not_its_missing_losses() -> None:
    from pathlib import Path

    v = judge([_run("before", breaks=1)], [_ended("after", "error", error=FORBIDDEN)], root=Root(Path("/p")))
    assert v.verdict == REFUSED and len(v.reasons) == 1, v.reasons
    assert "Attempt to trace forbidden callable" in v.reasons[0].text
    assert "train.py:11 (`torch._dynamo.maybe_mark_dynamic(x, 0)`)" in v.reasons[0].text
    assert "after 0 losses" in v.reasons[0].text and "recorded 3 and 0" not in v.reasons[0].text
    assert v.numerics_text() == "not compared past step 0: the patched run failed there (see the verdict)"
    assert v.to_json()["failure"]["line"] == 11


def test_both_runs_failing_differently_or_alike() -> None:
    other = FORBIDDEN.replace("0x7fe6babf45e0", "0x7f0000000000")  # another process, another address
    same = judge([_ended("b", "error", (1.0,), FORBIDDEN)], [_ended("a", "error", (1.0,), other)])
    assert not any("failed" in r.text for r in same.reasons) and "both scripts failed the same way" in same.notes[0]
    differently = judge([_ended("b", "error", (1.0,), "ValueError: boom")], [_ended("a", "error", (), FORBIDDEN)])
    assert differently.verdict == REFUSED
    assert differently.reasons[0].text.startswith("the patched script failed differently from the original: Assertion")
    assert "(the original: ValueError: boom, after 1 loss)" in differently.reasons[0].text


def test_a_patched_run_out_of_time_or_killed_says_so() -> None:
    slow = judge([_run("b", breaks=1)], [_ended("a", "timeout", (1.0,))])
    assert slow.verdict == REFUSED
    assert slow.reasons[0].text.startswith("the patched script ran out of its time budget where the original did not")
    assert "after 1 loss;" in slow.reasons[0].text and "the original recorded 3" in slow.reasons[0].text
    killed = judge([_run("b", breaks=1)], [_ended("a", "killed", (1.0, 0.9))])
    assert "failed (killed) where the original did not: it ended by killed, after 2 losses" in killed.reasons[0].text


def test_a_failure_a_change_causes_by_design_says_why() -> None:
    """TM109's flag turned off under compile: where the fresh leaf was the only path of gradients, backward fails;
    the form of the change (its `shape`, spelled alike in the codemod and in verify) explains that exception only."""
    from torchmend.codemods.fixes.requires_grad import OFF_UNDER_COMPILE
    from torchmend.verify.failure import RunFailure, caused_by

    def failed(exception: str) -> RunFailure:
        return RunFailure("after", "error", exception, "/p/train.py", 22, "loss.backward()", 1)

    no_grad = failed("RuntimeError: element 0 of tensors does not require grad and does not have a grad_fn")
    assert "only path of gradients" in caused_by(no_grad, {OFF_UNDER_COMPILE, ""})
    assert caused_by(no_grad, {"buffer-in-place"}) == ""
    assert caused_by(failed("RuntimeError: shape mismatch"), {OFF_UNDER_COMPILE}) == ""
