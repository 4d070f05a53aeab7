"""The verdict on a patch: what the counts, the times and the numerics of the two arms show.

Counts (graphs, breaks, recompiles, limit hits) are deterministic for a seeded run; times are not, so
each is the median over the repeats with its min-max, and "slower" needs more than noise: with at least
two repeats per arm, the ranges must not overlap and the medians differ by more than SLOWER_RATIO.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from torchmend.model import StrEnum
from torchmend.profiler.failures import exception_summary
from torchmend.profiler.runner import RunOutcome
from torchmend.verify.failure import RunFailure, failure_of
from torchmend.verify.numerics import ATOL, RTOL, Comparison, compare
from torchmend.verify.reference import RESTORED, Reference
from torchmend.verify.runs import ArmRun
from torchmend.verify.stochastic import Distribution


class Verdict(StrEnum):
    """What verification concluded (a member is its word, as the JSON report writes it)."""

    IMPROVED = "improved"
    NO_CHANGE = "no_change"
    REFUSED = "refused"


IMPROVED, NO_CHANGE, REFUSED = Verdict.IMPROVED, Verdict.NO_CHANGE, Verdict.REFUSED
SLOWER_RATIO = 1.10
COUNTS = ("frames_compiled", "graphs", "graph_breaks", "recompiles", "recompile_limit_hits")
# The counts a patch must make fewer (none of them more) to be an improvement.
PROBLEMS = ("graph_breaks", "recompiles", "recompile_limit_hits", "findings_to_fix")
TIMES = ("compile_seconds", "first_step_s", "steady_step_s", "wall_seconds")
LABELS = {
    "frames_compiled": "frames compiled",
    "graphs": "graphs",
    "graph_breaks": "graph breaks",
    "recompiles": "recompiles",
    "recompile_limit_hits": "recompile-limit hits",
    "findings_to_fix": "findings to fix",
    "compile_seconds": "compile seconds",
    "first_step_s": "first step (s)",
    "steady_step_s": "steady step (s, median)",
    "wall_seconds": "wall seconds",
}


@dataclass(frozen=True)
class Stat:
    median: float | None
    low: float | None
    high: float | None

    @classmethod
    def of(cls, values: list[float | None]) -> Stat:
        vals = [v for v in values if v is not None]
        if not vals:
            return cls(None, None, None)
        return cls(statistics.median(vals), min(vals), max(vals))


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


@dataclass
class Verification:
    repeat: int
    counts: list[Metric]
    times: list[Metric]
    numerics: Comparison | None
    verdict: Verdict
    reasons: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    failure: RunFailure | None = None  # how the patched run failed or stopped early (None: it ran to its end)
    reference: Reference | None = None  # the eager reference, when the numbers differed and it was run
    # the seeds compared as distributions (verify/stochastic.py), for changes of the random stream; numerics is None
    distribution: Distribution | None = None

    @property
    def ok(self) -> bool:
        return self.verdict == IMPROVED

    def problems_after(self) -> dict[str, float]:
        """The patched runs' median of each count the verdict judges improvement by (PROBLEMS)."""
        return {m.name: m.after.median or 0 for m in self.counts if m.name in PROBLEMS}

    def numerics_text(self) -> str:
        """The numerics line: what compare() found, or, when the patched run failed, that it could not compare
        past the failure (never "the runs recorded 3 and 0 losses" alone)."""
        if self.numerics is None:
            return ""
        n = self.numerics
        if (
            self.failure is None
            and n.losses_before < n.losses_after
            and any("original run failed" in r for r in self.reasons)
        ):
            return f"not compared past step {n.losses_before}: the original run failed there (see the verdict)"
        if self.failure is not None and n.losses_after < n.losses_before:
            prefix = "equal" if n.first_divergence is None or n.first_divergence.after is None else "not equal"
            over = f"the {n.steps_compared} losses both recorded are {prefix}; " if n.steps_compared else ""
            how = "ran out of time" if self.failure.ended_by == "timeout" else "failed"
            return f"not compared past step {n.losses_after}: {over}the patched run {how} there (see the verdict)"
        if self.reference is not None and self.reference.whose == RESTORED:  # restored_verdict's comparison
            return f"against the original eager run, {n.describe()}"
        return n.describe()

    def metric(self, name: str) -> Metric:
        return next(m for m in (*self.counts, *self.times) if m.name == name)

    def to_json(self) -> dict[str, Any]:
        def metric(m: Metric) -> dict[str, Any]:
            return {"name": m.name, "before": asdict(m.before), "after": asdict(m.after), "ratio": m.ratio}

        return {
            "repeat": self.repeat,
            "verdict": self.verdict,
            "reasons": self.reasons,
            "notes": self.notes,
            "counts": [metric(m) for m in self.counts],
            "times": [metric(m) for m in self.times],
            "numerics": self.numerics.to_json() if self.numerics else None,
            "failure": self.failure.to_json() if self.failure else None,
            "reference": self.reference.to_json() if self.reference else None,
            "distribution": asdict(self.distribution) | {"equivalent": self.distribution.equivalent}
            if self.distribution
            else None,
        }


def _fix_count(run: ArmRun) -> int:
    return sum(f.severity == "fix" for f in run.findings)


def judge(
    before: list[ArmRun], after: list[ArmRun], rtol: float = RTOL, atol: float = ATOL, root: Path | None = None
) -> Verification:
    counts = [
        Metric(n, Stat.of([getattr(r.summary, n) for r in before]), Stat.of([getattr(r.summary, n) for r in after]))
        for n in COUNTS
    ]
    counts.append(
        Metric("findings_to_fix", Stat.of([_fix_count(r) for r in before]), Stat.of([_fix_count(r) for r in after]))
    )
    times = [
        Metric(n, Stat.of([getattr(r.summary, n) for r in before]), Stat.of([getattr(r.summary, n) for r in after]))
        for n in TIMES
    ]
    reasons: list[str] = []
    notes: list[str] = []
    numerics = compare(before[0].end, after[0].end, rtol, atol) if before and after else None
    failure = _failure(before, after, root, reasons, notes)
    original = next((f for r in before[:1] for f in [failure_of(r, root)] if f is not None), None)
    if numerics is not None and not numerics.equal:
        d = numerics.first_divergence
        only_shorter = d is not None and (d.after is None or d.before is None) and numerics.params_equal is not False
        # A failed run's missing losses (or its missing end record) are its failure, said above, never numbers
        # that differ: the patched run's failure is a reason already; the original's is said here.
        if original is not None and failure is None and (only_shorter or not before[0].end.get("losses")):
            reasons.append(
                f"the original run failed ({original.describe()}): the patched run cannot be judged against it"
            )
        elif (failure is None and original is None) or not only_shorter:
            reasons.append(f"numerics differ: {numerics.describe()}")
    if numerics is not None and numerics.equal and not numerics.compared:
        notes.append(numerics.describe())
    elif numerics is not None and numerics.params_equal is None:
        notes.append(f"final parameters not compared: {numerics.params_note}")

    def median(m: Metric, side: str) -> float:
        return getattr(m, side).median or 0

    # More frames or graphs alone is more code compiled (a function the backend gave up on now compiles, TM106):
    # breaks and recompiles, which make graphs, are judged on their own.
    worse = [
        m for m in counts if median(m, "after") > median(m, "before") and m.name not in ("frames_compiled", "graphs")
    ]
    for m in worse:
        reasons.append(f"more {m.label}: {median(m, 'before'):g} before, {median(m, 'after'):g} after")
    graphs = next((m for m in counts if m.name == "graphs"), None)
    if graphs is not None and median(graphs, "before") > 0 and median(graphs, "after") == 0 and failure is None:
        # no breaks and no recompiles because nothing compiled: a change that switched compiling off (a compiler
        # stance never set back, a disable around the model) is no fix
        reasons.append(f"the patched run compiled nothing: {median(graphs, 'before'):g} graphs before, none after")
    steady = next(m for m in times if m.name == "steady_step_s")
    if steady.ratio is not None and steady.ratio > SLOWER_RATIO:
        if len(before) >= 2 and len(after) >= 2 and (steady.after.low or 0) > (steady.before.high or 0):
            reasons.append(
                f"slower beyond noise: steady step {steady.ratio:.2f}× the original "
                f"(ranges {steady.before.low:.4g}-{steady.before.high:.4g} s vs "
                f"{steady.after.low:.4g}-{steady.after.high:.4g} s)"
            )
        elif len(before) < 2 or len(after) < 2:
            notes.append(
                f"steady step {steady.ratio:.2f}× the original; with one run per arm that is within "
                "noise (use --repeat 3 or more to judge speed)"
            )
        else:
            notes.append(f"steady step {steady.ratio:.2f}× the original, but the runs' ranges overlap: within noise")
    if reasons:
        verdict = REFUSED
    else:
        fewer = any(median(m, "after") < median(m, "before") for m in counts if m.name in PROBLEMS)
        verdict = IMPROVED if fewer else NO_CHANGE
        if not fewer:
            reasons.append(
                "the patch fixes nothing: graph breaks, recompiles, limit hits and findings are "
                "the same before and after"
            )
    return Verification(len(after), counts, times, numerics, verdict, reasons, notes, failure)


def restored_verdict(
    ref: Reference, before: list[ArmRun], after: list[ArmRun], root: Path | None = None
) -> Verification | None:
    """The verdict when the eager reference found the eager program restored (reference.RESTORED): the patched
    compiled run computes what the original computes eagerly, and what the patch computes eagerly; the original
    compiled run was the one that differed. Counts and failures are judged against the original compiled runs as
    always (a huge finite tolerance: inf * 0 is nan); the numbers are the comparison with the original eager run.
    None for any other reference: the gate stays as it was."""
    if ref.whose != RESTORED:
        return None
    v = judge(before, after, 1e300, 1e300, root)
    v.notes.insert(0, ref.describe())
    v.numerics, v.reference = ref.restored, ref
    return v


def _failure(
    before: list[ArmRun], after: list[ArmRun], root: Path | None, reasons: list[str], notes: list[str]
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
                f"the patched script ran out of its time budget where the original did not ({failure.describe()}; "
                f"the original recorded {went_further})"
            )
        return failure
    if original is None:
        reasons.append(
            f"the patched script failed ({failure.ended_by}) where the original did not: {failure.describe()}"
        )
    elif original.same_as != failure.same_as:
        reasons.append(
            f"the patched script failed differently from the original: {failure.describe()} "
            f"(the original: {original.describe()})"
        )
    else:
        notes.append(f"both scripts failed the same way: {failure.describe()}")
    return failure


def failure_line(outcome: RunOutcome) -> str:
    """The exception a failed run ended with: the child's own record of it, else the last exception line of
    its output, with PyTorch's hints ("Set TORCHDYNAMO_VERBOSE=1 ...") left out (profiler/failures.py)."""
    end = outcome.end or {}
    return exception_summary(str(end.get("error") or ""), outcome.output_tail, str(end.get("traceback") or ""))
