"""The gate on a multi-rank run (`fix --nproc-per-node N`), rank by rank.

A ranked run's summary sums the ranks' counts and takes the slowest rank's times (profiler/ranks.py), and its numbers
are one rank's END. Judged on that alone, a change could be faster on one rank and slower on another, compile less
on one rank while another compiles more, change one rank's numbers only, or make the ranks compile different graphs
(in DDP and FSDP every rank meets the others at each collective: a rank that breaks or recompiles where they do not
makes them wait, or hangs the job). So each rank's runs are judged as one process's are (the same `judge`, on that
rank's summary, findings and END), and the verdict on the job takes from them:

- numerics: every rank's, besides the one the job's own comparison read (that one's reason names its rank);
- coverage, more findings, slower: the ranks' reasons of a kind, naming their rank, in place of the job's of that
  kind (a job's reason no rank shows alone stands); a rank slower while another is faster says both: the slowest rank
  decides;
- agreement: a count of AGREED that every rank of the original showed alike and the patched ranks do not
  (`ReasonKind.RANKS_DIFFER`). Where the original's ranks differed already (a recompile on one rank), that count is
  not judged for agreement.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from torchmend.model import Finding
from torchmend.profiler.events import END
from torchmend.profiler.ranks import rank_summaries
from torchmend.values import Root, Tolerance
from torchmend.verify.compare import COVERAGE, LABELS, Verification, judge
from torchmend.verify.reasons import Reason, ReasonKind
from torchmend.verify.runs import ArmRun
from torchmend.verify.speed import SHORT, Pace, Stat

# What the ranks of one job compile alike, when they run the same code on data of the same shapes.
AGREED = ("frames_compiled", "graphs", "graph_breaks", "ops_compiled", "largest_graph_ops")
# The kinds a rank's own reasons stand for on the job, in place of the job's (summed, slowest-rank) ones.
BY_RANK = (ReasonKind.COVERAGE, ReasonKind.MORE_FINDINGS, ReasonKind.SLOWER)


@dataclass(frozen=True)
class RankVerdict:
    """One rank's runs judged alone: its counts, coverage, numerics and times."""

    rank: int
    verification: Verification

    def to_json(self) -> dict[str, Any]:
        return {"rank": self.rank, **self.verification.to_json()}


def rank_run(run: ArmRun, rank: int) -> ArmRun:
    """`run` as rank `rank` saw it: its own summary, the findings it saw (with its count) and its END."""
    events = [e for e in run.outcome.events if e.get("rank") == rank]
    end: dict[str, Any] = next((e for e in reversed(events) if e.get("ev") == END), {})
    findings: list[Finding] = [
        replace(f, count=f.ranks[rank], ranks=None, divergent=False)
        for f in run.findings
        if f.ranks and rank in f.ranks
    ]
    outcome = replace(run.outcome, events=events, end=end)
    return ArmRun(run.arm, run.index, findings, rank_summaries(run.summary)[rank], outcome)


def by_rank(runs: list[ArmRun]) -> dict[int, list[ArmRun]]:
    """Each rank's runs, by rank; {} unless every run is a ranked one and all had the same ranks."""
    ranks = {tuple(sorted(rank_summaries(r.summary))) for r in runs}
    if len(ranks) != 1 or not (only := next(iter(ranks))):
        return {}
    return {rank: [rank_run(r, rank) for r in runs] for rank in only}


def judge_ranks(
    before: list[ArmRun],
    after: list[ArmRun],
    tol: Tolerance,
    root: Root | None,
    *,
    timed: bool,
    backend: str,
    timing: tuple[list[ArmRun], list[ArmRun]] | None,
    kept: tuple[str, ...] = COVERAGE,
) -> tuple[tuple[RankVerdict, ...], tuple[Reason, ...]]:
    """Each rank's verdict, and the reasons the ranks' agreement gives: ((), ()) for one process's runs."""
    b, a = by_rank(before), by_rank(after)
    if not b or b.keys() != a.keys():
        return (), ()
    tb, ta = (by_rank(timing[0]), by_rank(timing[1])) if timing else ({}, {})
    verdicts = tuple(
        RankVerdict(
            r,
            judge(
                b[r],
                a[r],
                tol,
                root,
                timed=timed,
                backend=backend,
                kept=kept,
                timing=(tb[r], ta[r]) if r in tb and r in ta else None,
            ),
        )
        for r in sorted(b)
    )
    return verdicts, tuple(_disagreement(b, a))


def _medians(runs: dict[int, list[ArmRun]], name: str) -> dict[int, float]:
    return {r: Stat.of([getattr(x.summary, name) for x in rs]).median or 0 for r, rs in runs.items()}


def _each(values: dict[int, float]) -> str:
    return ", ".join(f"{v:g} on rank {r}" for r, v in sorted(values.items()))


def _disagreement(before: dict[int, list[ArmRun]], after: dict[int, list[ArmRun]]) -> list[Reason]:
    """RANKS_DIFFER: the counts every rank of the original showed alike that the patched ranks do not."""
    parted = []
    agreed = []
    for name in AGREED:
        b, a = _medians(before, name), _medians(after, name)
        if len(set(b.values())) == 1 and len(set(a.values())) > 1:
            parted.append(f"{LABELS[name]} {_each(a)}")
            agreed.append(f"{next(iter(b.values())):g} {LABELS[name]}")
    if not parted:
        return []
    return [
        Reason(
            ReasonKind.RANKS_DIFFER,
            f"the ranks compile different graphs after the change: {'; '.join(parted)} (the original's ranks agreed: "
            f"{', '.join(agreed)} on each); a rank that breaks or recompiles where the others do not makes them wait "
            "at the next collective, or hangs the job",
        )
    ]


def job_reasons(
    merged: tuple[Reason, ...] | list[Reason], verdicts: tuple[RankVerdict, ...], compared: int | None
) -> list[Reason]:
    """The job's reasons with its ranks': `merged` (the job's, from the summed counts, the slowest rank's times and
    the END of rank `compared`) with each rank's NUMERICS and, for the kinds of BY_RANK any rank gives, the ranks'
    reasons in place of the job's."""
    given = {kind for v in verdicts for kind in v.verification.kinds() if kind in BY_RANK}
    out = [
        r.on_rank(compared) if r.kind == ReasonKind.NUMERICS and compared is not None and r.rank is None else r
        for r in merged
        if r.kind not in given
    ]
    for v in verdicts:
        for reason in v.verification.reasons:
            if reason.kind == ReasonKind.NUMERICS and v.rank != compared:
                out.append(reason.on_rank(v.rank))
            elif reason.kind in (ReasonKind.COVERAGE, ReasonKind.MORE_FINDINGS):
                out.append(reason.on_rank(v.rank))
        out += _slower(v, verdicts)
    return out


def _slower(v: RankVerdict, verdicts: tuple[RankVerdict, ...]) -> list[Reason]:
    """A rank's SLOWER reasons, each saying which other ranks that time is faster on: the slowest rank decides."""
    out = [r.on_rank(v.rank) for r in v.verification.reasons if r.kind == ReasonKind.SLOWER]
    speed = v.verification.speed
    if not out or speed is None:
        return out
    slowed = {c.name for c in speed.slower}
    faster = []
    for o in verdicts:
        calls = [c for c in (o.verification.speed.calls if o.verification.speed else ()) if c.name in slowed]
        said = ", ".join(c.describe(SHORT[c.name]) for c in calls if c.pace == Pace.FASTER)
        if o.rank != v.rank and said:
            faster.append(f"rank {o.rank} is faster ({said})")
    if faster:
        out[-1] = out[-1].with_cause(
            f"{', '.join(faster)}: the slowest rank decides, the others wait for it at each collective"
        )
    return out


def _count(name: str, before: float, after: float) -> str:
    return f"{LABELS[name]} {before:g} → {after:g}" if before != after else f"{LABELS[name]} {after:g}"


def rank_lines(v: Verification) -> list[str]:
    """One line per rank of a ranked verification: its counts (before → after where they changed; recompiles where
    there were any), numerics, times, and whether a reason of the verdict is that rank's."""
    lines = []
    for rv in v.ranks:
        x = rv.verification
        counts = ", ".join(
            _count(m.name, m.before.median or 0, m.after.median or 0)
            for m in x.counts
            if m.name in AGREED or (m.name == "recompiles" and (m.before.median or m.after.median))
        )
        numbers = "" if x.numerics is None else "; numerics match" if x.numerics.equal else "; numerics differ"
        times = (
            "; " + ", ".join(c.describe(SHORT[c.name]) for c in x.speed.calls if c.ratio is not None)
            if x.speed is not None
            else ""
        )
        said = [r for r in v.reasons if r.rank == rv.rank]
        lines.append(f"rank {rv.rank}: {counts}{numbers}{times}" + (" — refused" if said else ""))
    return lines
