"""The verdict on a patch: what the counts, the compiled coverage, the times and the numerics of the two arms show.

Counts (graphs, breaks, recompiles, limit hits, ops compiled) are deterministic for a seeded run; times are not, so
each is the median over the repeats with its min-max, judged against a measured noise band (verify/speed.py). A
patch is refused when it fails, changes the numbers, compiles less (COVERAGE_FLOOR of the ops compiled, in total and
in the largest graph) or is slower beyond the band. "Improved" needs a measured gain; fewer breaks and recompiles
with no measured gain is NEUTRAL, said as such. Every reason is a typed value (verify/reasons.py).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Any

from torchmend.model import StrEnum
from torchmend.profiler.failures import exception_summary
from torchmend.profiler.runner import RunOutcome
from torchmend.values import Root, Tolerance
from torchmend.verify.failure import RunFailure, failure_of
from torchmend.verify.numerics import Comparison, compare
from torchmend.verify.reasons import Reason, ReasonKind
from torchmend.verify.reference import RESTORED, Reference
from torchmend.verify.runs import ArmRun
from torchmend.verify.speed import (
    ONE_RUN_LIMIT,
    PROXY_BACKENDS,
    SHORT,
    START_TIMES,
    TRAINING_TIMES,
    Speed,
    Stat,
    call,
)
from torchmend.verify.stochastic import Distribution

if TYPE_CHECKING:  # verify/ranks.py judges each rank with judge(): imported where a ranked run is judged
    from torchmend.verify.ranks import RankVerdict

__all__ = ["Metric", "Reason", "ReasonKind", "Stat", "Verdict", "Verification", "judge"]


class Verdict(StrEnum):
    """What verification concluded (a member is its word, as the JSON report writes it)."""

    IMPROVED = "improved"  # a measured gain: faster beyond the band, or faster to start
    NEUTRAL = "no_speed_change"  # fewer problems, not slower, no measured gain
    NO_CHANGE = "no_change"  # no problem fewer and no gain: nothing to write
    REFUSED = "refused"


IMPROVED, NEUTRAL, NO_CHANGE, REFUSED = Verdict.IMPROVED, Verdict.NEUTRAL, Verdict.NO_CHANGE, Verdict.REFUSED
WORDS = {
    IMPROVED: "improved",
    NEUTRAL: "no measured speed change",
    NO_CHANGE: "no change",
    REFUSED: "refused",
}
COVERAGE_FLOOR = 0.95
# Ops a rewrite may move in or out of a graph whatever its size (a scalar that becomes a tensor input, a constant
# folded): a graph of 5 ops that becomes 4 has not left compiled code. A change must lose more than this and more
# than 1 - COVERAGE_FLOOR of the ops to be refused for coverage.
COVERAGE_SLACK = 4
COUNTS = (
    "frames_compiled",
    "graphs",
    "graph_breaks",
    "recompiles",
    "recompile_limit_hits",
    "ops_compiled",
    "largest_graph_ops",
)
# The counts a patch must make fewer (none of them more) to fix anything.
PROBLEMS = ("graph_breaks", "recompiles", "recompile_limit_hits", "findings_to_fix")
COVERAGE = ("ops_compiled", "largest_graph_ops")
JUDGED = (*TRAINING_TIMES, *START_TIMES)  # each judged against its band (verify/speed.py)
TIMES = ("compile_seconds", "first_step_s", "steady_step_s", "last_step_s", "wall_seconds")
LABELS = {
    "frames_compiled": "frames compiled",
    "graphs": "graphs",
    "graph_breaks": "graph breaks",
    "recompiles": "recompiles",
    "recompile_limit_hits": "recompile-limit hits",
    "ops_compiled": "ops compiled",
    "largest_graph_ops": "ops in the largest graph",
    "findings_to_fix": "findings to fix",
    "compile_seconds": "compile seconds",
    "first_step_s": "first step (s)",
    "steady_step_s": "steady step (s, median)",
    "last_step_s": "to the last step (s)",
    "wall_seconds": "wall seconds",
}


@dataclass(frozen=True)
class Metric:
    name: str
    before: Stat
    after: Stat

    @property
    def ratio(self) -> float | None:
        b, a = self.before.median, self.after.median
        return a / b if a is not None and b else None

    @property
    def label(self) -> str:
        return LABELS.get(self.name, self.name)


@dataclass(frozen=True)
class Verification:
    repeat: int
    counts: tuple[Metric, ...]
    times: tuple[Metric, ...]
    numerics: Comparison | None
    verdict: Verdict
    reasons: tuple[Reason, ...] = ()
    notes: tuple[str, ...] = ()
    failure: RunFailure | None = None  # how the patched run failed or stopped early (None: it ran to its end)
    reference: Reference | None = None  # the eager reference, when the numbers differed and it was run
    # the seeds compared as distributions (verify/stochastic.py), for changes of the random stream; numerics is None
    distribution: Distribution | None = None
    speed: Speed | None = None  # the times judged against their band (None: not judged, a screening run)
    backend: str = ""  # the backend the runs used ("": the script's own)
    device: str = ""  # cpu | cuda, as the runs reported
    # where the verdict was not confirmed (e.g. "the script's own backend (cpu)"): it was judged on `backend` only
    unconfirmed: str = ""
    original_failure: RunFailure | None = None  # how the original failed in these runs (None: it ran to its end)
    ranks: tuple[RankVerdict, ...] = ()  # multi-rank runs: each rank's runs judged alone (verify/ranks.py)

    @property
    def ok(self) -> bool:
        return self.verdict in (IMPROVED, NEUTRAL)

    @property
    def word(self) -> str:
        return WORDS[self.verdict]

    def kinds(self) -> set[ReasonKind]:
        return {r.kind for r in self.reasons}

    def refused(self, *reasons: Reason) -> Verification:
        """This verification refused, for these reasons besides its own."""
        return replace(self, verdict=REFUSED, reasons=(*self.reasons, *reasons))

    def with_cause(self, cause: str) -> Verification:
        """A verdict of the eager program restored (restored_verdict), its reference and first note saying why the
        original compiled run differed (`cause`, where the change that restored it is known)."""
        if self.reference is None or self.reference.whose != RESTORED or not cause:
            return self
        ref = replace(self.reference, cause=cause)
        return replace(self, reference=ref, notes=(ref.describe(), *self.notes[1:]))  # restored_verdict's note first

    def noted(self, *notes: str, first: bool = False) -> Verification:
        return replace(self, notes=(*notes, *self.notes) if first else (*self.notes, *notes))

    def problems_after(self) -> dict[str, float]:
        """The patched runs' median of each count the verdict judges improvement by (PROBLEMS)."""
        return {m.name: m.after.median or 0 for m in self.counts if m.name in PROBLEMS}

    def numerics_text(self) -> str:
        """The numerics line: what compare() found, or, when the patched run failed, that it could not compare
        past the failure (never "the runs recorded 3 and 0 losses" alone)."""
        if self.numerics is None:
            return ""
        n = self.numerics
        if self.failure is None and n.losses_before < n.losses_after and ReasonKind.ORIGINAL_FAILED in self.kinds():
            return f"not compared past step {n.losses_before}: the original run failed there (see the verdict)"
        if self.failure is not None and n.losses_after < n.losses_before:
            prefix = "equal" if n.first_divergence is None or n.first_divergence.after is None else "not equal"
            over = f"the {n.steps_compared} losses both recorded are {prefix}; " if n.steps_compared else ""
            how = "ran out of time" if self.failure.ended_by == "timeout" else "failed"
            return f"not compared past step {n.losses_after}: {over}the patched run {how} there (see the verdict)"
        if self.reference is not None and self.reference.whose == RESTORED:  # restored_verdict's comparison
            return f"against the original eager run, {n.describe()}"
        return n.describe()

    def speed_text(self) -> str:
        """What the times add up to, in one line a reader can check against the table: the lead word, where the
        runs ran, and each judged time's after/before ratio with its band."""
        own = "the script's own backend"
        where = f"on {self.backend or own}" + (f" ({self.device})" if self.device else "")
        if self.ranks and self.speed is not None:
            where += f", the slowest of {len(self.ranks)} ranks"
        if self.speed is None and self.backend in PROXY_BACKENDS:
            return f"speed not judged {where}: a proxy backend's times are not your training's"
        if self.speed is None:
            return f"speed not judged: runs {where} screen changes, they do not time them"
        if not self.speed.measured:
            slower = self.speed.slower
            if slower:
                said = ", ".join(c.describe(SHORT[c.name]) for c in slower)
                return f"slower {where}: {said} with one run per arm (beyond {ONE_RUN_LIMIT:g}×, noise or not)"
            return f"speed not measured {where}: one run per arm measures no noise band (--repeat 3 or more does)"
        slow_ranks = [
            f"; rank {r.rank} slower: " + ", ".join(c.describe(SHORT[c.name]) for c in r.verification.speed.slower)
            for r in self.ranks
            if r.verification.speed is not None and r.verification.speed.slower
        ]
        if self.speed.slower or slow_ranks:
            lead = "slower"
        elif self.speed.gain is not None:
            lead = "faster" if self.speed.gain.name in TRAINING_TIMES else "faster to start"
        else:
            lead = "no measured speed change"
        calls = ", ".join(c.describe(SHORT[c.name]) for c in self.speed.calls if c.ratio is not None)
        return f"{lead} {where}: {calls}" + "".join(slow_ranks)

    def metric(self, name: str) -> Metric:
        return next(m for m in (*self.counts, *self.times) if m.name == name)

    def to_json(self) -> dict[str, Any]:
        def metric(m: Metric) -> dict[str, Any]:
            return {"name": m.name, "before": asdict(m.before), "after": asdict(m.after), "ratio": m.ratio}

        return {
            "repeat": self.repeat,
            "verdict": self.verdict,
            "backend": self.backend or None,
            "device": self.device or None,
            "unconfirmed": self.unconfirmed or None,
            "original_failure": self.original_failure.to_json() if self.original_failure else None,
            "reasons": [r.text for r in self.reasons],
            "reason_kinds": [r.kind for r in self.reasons],
            "notes": list(self.notes),
            "counts": [metric(m) for m in self.counts],
            "times": [metric(m) for m in self.times],
            "speed": [asdict(c) for c in self.speed.calls] if self.speed else None,
            "numerics": self.numerics.to_json() if self.numerics else None,
            "failure": self.failure.to_json() if self.failure else None,
            "reference": self.reference.to_json() if self.reference else None,
            "distribution": asdict(self.distribution) | {"equivalent": self.distribution.equivalent}
            if self.distribution
            else None,
        } | (  # multi-rank runs: which rank gave each reason, and each rank's own verdict
            {"reason_ranks": [r.rank for r in self.reasons], "ranks": [r.to_json() for r in self.ranks]}
            if self.ranks
            else {}
        )


def _fix_count(run: ArmRun) -> int:
    return sum(f.severity == "fix" for f in run.findings)


def _device(runs: list[ArmRun]) -> str:
    ends = [r.end for r in runs if r.end]
    if not ends:
        return ""
    return "cuda" if any(e.get("cuda_device") for e in ends) else "cpu"


def judge(
    before: list[ArmRun],
    after: list[ArmRun],
    tol: Tolerance = Tolerance(),
    root: Root | None = None,
    *,
    timed: bool = True,
    backend: str = "",
    timing: tuple[list[ArmRun], list[ArmRun]] | None = None,
    kept: tuple[str, ...] = COVERAGE,
) -> Verification:
    """The verdict on `after` against `before`. `timed`: these runs judge speed (the judging stage); a screening
    stage (False) judges counts, coverage and numerics only. `backend`: the backend the runs used, for the words
    ("": the script's own). `timing`: other runs to take the times from (a change of the random stream: every seed's
    runs time it, the first seed's judge the rest). `kept`: the coverage counts the patched run must keep."""
    counts = [
        Metric(n, Stat.of([getattr(r.summary, n) for r in before]), Stat.of([getattr(r.summary, n) for r in after]))
        for n in COUNTS
    ]
    counts.append(
        Metric("findings_to_fix", Stat.of([_fix_count(r) for r in before]), Stat.of([_fix_count(r) for r in after]))
    )
    tb, ta = timing or (before, after)
    times = [
        Metric(n, Stat.of([getattr(r.summary, n) for r in tb]), Stat.of([getattr(r.summary, n) for r in ta]))
        for n in TIMES
    ]
    reasons: list[Reason] = []
    notes: list[str] = []
    numerics = compare(before[0].end, after[0].end, tol) if before and after else None
    failure = _failure(before, after, root, reasons, notes)
    original = next((f for r in before[:1] for f in [failure_of(r, root)] if f is not None), None)
    if numerics is not None:
        _numbers(numerics, failure, original, bool(before[0].end.get("losses")), reasons, notes)

    def median(m: Metric, side: str) -> float:
        return getattr(m, side).median or 0

    # More frames, graphs or ops alone is more code compiled (a function the backend gave up on now compiles, TM106):
    # breaks and recompiles, which make graphs, are judged on their own.
    worse = [
        m
        for m in counts
        if median(m, "after") > median(m, "before") and m.name not in ("frames_compiled", "graphs", *COVERAGE)
    ]
    for m in worse:
        reasons.append(
            Reason(
                ReasonKind.MORE_FINDINGS,
                f"more {m.label}: {median(m, 'before'):g} before, {median(m, 'after'):g} after",
            )
        )
    if failure is None:
        reasons += _coverage(counts, kept)
    speed = Speed(tuple(call(m.name, m.before, m.after) for m in times if m.name in JUDGED)) if timed else None
    ranked = bool(before and before[0].summary.per_rank)
    if speed is not None and failure is None:
        whose = "the slowest rank's " if ranked else ""
        for c in speed.slower:
            how = f"band ±{c.band * 100:.0f}%" if c.band is not None else f"one run per arm, beyond {ONE_RUN_LIMIT:g}×"
            reasons.append(
                Reason(ReasonKind.SLOWER, f"slower: {whose}{SHORT[c.name]} {c.ratio:.2f}× the original ({how})")
            )
    per_rank: tuple[RankVerdict, ...] = ()
    if ranked and failure is None and original is None:  # each rank judged alone (verify/ranks.py imports this module)
        from torchmend.verify.ranks import job_reasons, judge_ranks

        per_rank, differ = judge_ranks(before, after, tol, root, timed=timed, backend=backend, timing=timing, kept=kept)
        if per_rank:
            reasons = [*job_reasons(reasons, per_rank, before[0].end.get("rank")), *differ]
    device = _device(after) or _device(before)
    if reasons:
        verdict = REFUSED
    else:
        fewer = any(median(m, "after") < median(m, "before") for m in counts if m.name in PROBLEMS)
        gain = speed.gain if speed is not None else None
        verdict = IMPROVED if gain is not None else NEUTRAL if fewer else NO_CHANGE
        if verdict == NO_CHANGE:
            reasons.append(
                Reason(
                    ReasonKind.FIXES_NOTHING,
                    "the patch fixes nothing: graph breaks, recompiles, limit hits and findings are the same before "
                    "and after, and no time is measured faster",
                )
            )
    return Verification(
        len(after), tuple(counts), tuple(times), numerics, verdict, tuple(reasons), tuple(notes), failure,
        speed=speed, backend=backend, device=device, original_failure=original, ranks=per_rank,
    )  # fmt: skip


def _numbers(
    numerics: Comparison,
    failure: RunFailure | None,
    original: RunFailure | None,
    losses_before: bool,
    reasons: list[Reason],
    notes: list[str],
) -> None:
    """What the numerics comparison adds to the reasons (numbers that differ, or an original that failed) and to
    the notes (what was not compared)."""
    if not numerics.equal:
        d = numerics.first_divergence
        only_shorter = d is not None and (d.after is None or d.before is None) and numerics.params_equal is not False
        # A failed run's missing losses (or its missing end record) are its failure, said above, never numbers
        # that differ: the patched run's failure is a reason already; the original's is said here.
        if original is not None and failure is None and (only_shorter or not losses_before):
            reasons.append(
                Reason(
                    ReasonKind.ORIGINAL_FAILED,
                    f"the original run failed ({original.describe()}): the patched run cannot be judged against it",
                )
            )
        elif (failure is None and original is None) or not only_shorter:
            reasons.append(Reason(ReasonKind.NUMERICS, f"numerics differ: {numerics.describe()}"))
    if numerics.equal and not numerics.compared:
        notes.append(numerics.describe())
    elif numerics.params_equal is None:
        notes.append(f"final parameters not compared: {numerics.params_note}")


def _coverage(counts: list[Metric], kept: tuple[str, ...] = COVERAGE) -> list[Reason]:
    """A patched run that compiles less: the ops in compiled graphs, in total or in the largest graph, below
    COVERAGE_FLOOR of the original's and more than COVERAGE_SLACK ops fewer (nothing compiled at all is the extreme
    of it). One general rule: a change that
    keeps the model out of compiled code (a disable around it, a stance never set back) is no fix."""
    by = {m.name: m for m in counts}
    graphs = by["graphs"]
    if (graphs.before.median or 0) > 0 and (graphs.after.median or 0) == 0:
        return [
            Reason(
                ReasonKind.COVERAGE,
                f"the patched run compiled nothing: {graphs.before.median:g} graphs before, none after",
            )
        ]
    out = []
    for name in kept:
        m = by[name]
        b, a = m.before.median or 0, m.after.median or 0
        if b > 0 and a < COVERAGE_FLOOR * b and b - a > COVERAGE_SLACK:
            out.append(
                Reason(
                    ReasonKind.COVERAGE,
                    f"compiles less: {m.label} {b:g} before, {a:g} after ({a / b:.2f} of the original; a change may "
                    f"keep no less than {COVERAGE_FLOOR:g})",
                )
            )
    return out


def restored_verdict(
    ref: Reference,
    before: list[ArmRun],
    after: list[ArmRun],
    root: Root | None = None,
    *,
    timed: bool = True,
    backend: str = "",
    kept: tuple[str, ...] = COVERAGE,
) -> Verification | None:
    """The verdict when the eager reference found the eager program restored (reference.RESTORED): the patched
    compiled run computes what the original computes eagerly, and what the patch computes eagerly; the original
    compiled run was the one that differed. Counts and failures are judged against the original compiled runs as
    always (a huge finite tolerance: inf * 0 is nan); the numbers are the comparison with the original eager run.
    None for any other reference: the gate stays as it was."""
    if ref.whose != RESTORED:
        return None
    v = judge(before, after, Tolerance(1e300, 1e300), root, timed=timed, backend=backend, kept=kept)
    return replace(v, numerics=ref.restored, reference=ref, notes=(ref.describe(), *v.notes))


def _failure(
    before: list[ArmRun], after: list[ArmRun], root: Root | None, reasons: list[Reason], notes: list[str]
) -> RunFailure | None:
    """Every way the patched arm can fail or stop early, named with its exception and line: it failed where
    the original did not; both failed, differently; it ran out of time where the original finished."""
    if not after:
        return None
    went_further = max((len(r.end.get("losses") or []) for r in before), default=0)
    stopped = [r for r in after if len(r.end.get("losses") or []) < went_further]
    failures = [f for r in after for f in [failure_of(r, root, stopped_early=r in stopped)] if f is not None]
    if not failures:
        return None
    failure = failures[0]
    original = next((f for r in before for f in [failure_of(r, root)] if f is not None), None)
    if failure.ended_by == "timeout":
        if not any(r.outcome.ended_by == "timeout" for r in before):
            reasons.append(
                Reason(
                    ReasonKind.TIMEOUT,
                    f"the patched script ran out of its time budget where the original did not "
                    f"({failure.describe()}; the original recorded {went_further})",
                )
            )
        return failure
    if original is None:
        reasons.append(
            Reason(
                ReasonKind.CRASH,
                f"the patched script failed ({failure.ended_by}) where the original did not: {failure.describe()}",
            )
        )
    elif original.same_as != failure.same_as:
        reasons.append(
            Reason(
                ReasonKind.CRASH,
                f"the patched script failed differently from the original: {failure.describe()} "
                f"(the original: {original.describe()})",
            )
        )
    else:
        notes.append(f"both scripts failed the same way: {failure.describe()}")
    return failure


def failure_line(outcome: RunOutcome) -> str:
    """The exception a failed run ended with: the child's own record of it, else the last exception line of
    its output, with PyTorch's hints ("Set TORCHDYNAMO_VERBOSE=1 ...") left out (profiler/failures.py)."""
    end = outcome.end or {}
    return exception_summary(str(end.get("error") or ""), outcome.output_tail, str(end.get("traceback") or ""))
