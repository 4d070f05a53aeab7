"""Findings of a multi-rank run: each rank analysed alone, then merged by (rule, file, line), with the counts
per rank and whether the ranks diverge; the merged summary's counts are the ranks' sums, its times the slowest
rank's, and each rank's own summary is kept (`Summary.per_rank`, read back by `rank_summaries`)."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import replace

from torchmend.model import EndedBy, Finding, Pattern, Severity, Summary

_PATTERN_ORDER = {None: 0, Pattern.ONCE: 1, Pattern.STORM: 2, Pattern.LIMIT: 3}
_SEVERITY_ORDER = {Severity.INFO: 0, Severity.NOTE: 1, Severity.FIX: 2}


def merge_ranks(per_rank: dict[int, tuple[list[Finding], Summary]]) -> tuple[list[Finding], Summary]:
    """One finding per (rule, file, line) over all ranks, with per-rank counts; `count` is their sum.

    A finding is rank-divergent when some rank did not see it or saw it a different number of times: in
    DDP/FSDP the ranks meet at every collective, so one rank that recompiles or breaks where the others do
    not makes them all wait (or hang). A divergent recompile is therefore worth fixing even when it
    happened only once.
    """
    ranks = sorted(per_rank)
    merged: OrderedDict[tuple[str, str, int], list[tuple[int, Finding]]] = OrderedDict()
    for r in ranks:
        for f in per_rank[r][0]:
            merged.setdefault((f.rule, f.path, f.line), []).append((r, f))
    findings = []
    for seen in merged.values():
        counts = {r: f.count for r, f in seen}
        divergent = len(counts) != len(ranks) or len(set(counts.values())) > 1
        base = seen[0][1]
        pattern = max((f.pattern for _, f in seen), key=lambda p: _PATTERN_ORDER.get(p, 0))
        severity = max((f.severity for _, f in seen), key=lambda s: _SEVERITY_ORDER[s])
        if divergent and severity == Severity.NOTE:
            severity = Severity.FIX
        findings.append(
            replace(
                base, count=sum(counts.values()), ranks=counts, divergent=divergent, pattern=pattern, severity=severity
            )
        )
    summaries = [per_rank[r][1] for r in ranks]
    first = summaries[0]

    def total(name: str) -> int:
        return sum(getattr(s, name) for s in summaries)

    def slowest(name: str) -> float | None:
        """The job's time: the ranks meet at every collective, so the slowest rank's is what the job waits for."""
        times = [getattr(s, name) for s in summaries if getattr(s, name) is not None]
        return max(times) if times else None

    summary = Summary(
        frames_compiled=total("frames_compiled"),
        compiles=total("compiles"),
        graphs=total("graphs"),
        graph_breaks=total("graph_breaks"),
        recompiles=total("recompiles"),
        recompile_limit_hits=total("recompile_limit_hits"),
        compile_seconds=max(s.compile_seconds for s in summaries),  # ranks compile side by side
        steps=max(s.steps for s in summaries),
        optimizers=max(s.optimizers for s in summaries),
        ended_by=first.ended_by,
        wall_seconds=first.wall_seconds,
        torch_version=first.torch_version,
        first_step_s=slowest("first_step_s"),
        steady_step_s=slowest("steady_step_s"),
        last_step_s=slowest("last_step_s"),
        ops_compiled=total("ops_compiled"),
        largest_graph_ops=max(s.largest_graph_ops for s in summaries),
        ranks=len(ranks),
        per_rank=tuple({"rank": r, **s.to_json()} for r, s in zip(ranks, summaries)),
    )
    return findings, summary


def rank_summaries(summary: Summary) -> dict[int, Summary]:
    """Each rank's own summary of a multi-rank run, by rank (what merge_ranks kept in `per_rank`); {} for one
    process's run."""
    known = Summary.__dataclass_fields__
    out = {}
    for row in summary.per_rank:
        fields = {k: v for k, v in row.items() if k in known}
        out[int(row["rank"])] = Summary(**{**fields, "ended_by": EndedBy(fields["ended_by"]), "per_rank": ()})
    return out
