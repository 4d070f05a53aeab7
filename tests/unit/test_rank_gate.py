"""The verify gate on multi-rank runs, judged rank by rank (verify/ranks.py), on what real 2-rank DDP runs recorded
(gloo, CPU, inductor: fixtures/recorded/distributed/gate-ddp-cpu-torch2.13.json, made by record_gate.py beside it).

Each ArmRun is rebuilt from the recording: each rank's own summary, the findings, each rank's END. The job's summary
is merged again by profiler/ranks.merge_ranks from the ranks' summaries, so a rank's times scaled here reach the job's
as a real run's would. The real end-to-end run is in tests/e2e/test_distributed.py."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from conftest import ROOT

from torchmend.model import EndedBy, Finding, Summary
from torchmend.profiler.ranks import merge_ranks, rank_summaries
from torchmend.profiler.runner import RunOutcome
from torchmend.verify.compare import REFUSED, judge
from torchmend.verify.reasons import ReasonKind
from torchmend.verify.runs import ArmRun
from torchmend.verify.speed import Pace

RECORDED = ROOT / "fixtures" / "recorded" / "distributed" / "gate-ddp-cpu-torch2.13.json"


@pytest.fixture(scope="module")
def recorded() -> dict:
    return json.loads(RECORDED.read_text())


def _run(arm: str, rec: dict, scale: dict[int, float] | None = None, losses: dict[int, float] | None = None) -> ArmRun:
    """One recorded run. `scale`: rank -> factor for that rank's step times (each measured from the script's start:
    its first step, its steady step and its last step; its compile seconds are left as recorded). `losses`: rank ->
    factor for the losses its END recorded."""
    s = rec["summary"]
    summary = Summary(**{**s, "ended_by": EndedBy(s["ended_by"]), "per_rank": tuple(s["per_rank"])})
    per_rank = rank_summaries(summary)
    for rank, k in (scale or {}).items():
        r = per_rank[rank]
        assert r.steady_step_s and r.last_step_s and r.first_step_s
        per_rank[rank] = replace(
            r, first_step_s=r.first_step_s * k, steady_step_s=r.steady_step_s * k, last_step_s=r.last_step_s * k
        )
    ends = [{**e, "losses": [x * (losses or {}).get(e["rank"], 1.0) for x in e["losses"]]} for e in rec["ends"]]
    findings = [Finding.from_json(f) for f in rec["findings"]]
    _, merged = merge_ranks({r: ([], x) for r, x in per_rank.items()})
    merged = replace(merged, ended_by=summary.ended_by, wall_seconds=summary.wall_seconds)
    end = next(e for e in ends if e["rank"] == rec["deciding_rank"])
    outcome = RunOutcome(ends, rec["ended_by"], rec["returncode"], rec["wall_s"], "", end)
    return ArmRun(arm, rec["index"], findings, merged, outcome)


def _arm(recorded: dict, name: str, **how) -> list[ArmRun]:
    return [_run(name, rec, **how) for rec in recorded["arms"][name]]


def _rank(v, rank: int):
    return next(r.verification for r in v.ranks if r.rank == rank)


def _what_the_runs_showed(recorded: dict) -> None:
    """What the real runs showed, which the cases below build on: the original breaks at the print on both ranks and
    recompiles on rank 1 only; the fix makes both ranks compile alike; the rank-gated print breaks on rank 1 only."""
    assert recorded["backend"] == "inductor" and recorded["launcher"][:2] == ["--nproc-per-node", "2"]
    assert [len(recorded["arms"][a]) for a in ("before", "fixed", "rank_gated")] == [3, 3, 1]

    def counts(name: str) -> set[tuple]:
        return {
            tuple((r["rank"], r["graph_breaks"], r["recompiles"]) for r in rec["summary"]["per_rank"])
            for rec in recorded["arms"][name]
        }

    assert counts("before") == {((0, 4, 0), (1, 4, 1))}
    assert counts("fixed") == {((0, 3, 0), (1, 3, 0))}
    assert counts("rank_gated") == {((0, 3, 0), (1, 4, 1))}


def test_each_rank_is_judged_on_its_own_counts_numerics_and_times(recorded: dict) -> None:
    _what_the_runs_showed(recorded)
    before, fixed = _arm(recorded, "before"), _arm(recorded, "fixed")
    v = judge(before, fixed)
    assert [r.rank for r in v.ranks] == [0, 1]
    for rank in (0, 1):
        x = _rank(v, rank)
        assert x.numerics is not None and x.numerics.equal and x.numerics.compared
        assert x.speed is not None and x.speed.measured  # 3 runs per arm: a band for each rank's times
        assert x.metric("graph_breaks").after.median == 3
    assert _rank(v, 1).metric("recompiles").before.median == 1 and _rank(v, 1).metric("recompiles").after.median == 0
    assert not v.kinds() & {ReasonKind.RANKS_DIFFER, ReasonKind.NUMERICS, ReasonKind.COVERAGE}
    # the job's times are the slowest rank's, run by run
    slowest = [max(x.steady_step_s for x in rank_summaries(r.summary).values()) for r in fixed]
    assert [r.summary.steady_step_s for r in fixed] == slowest
    assert "the slowest of 2 ranks" in v.speed_text()
    doc = v.to_json()
    assert [r["rank"] for r in doc["ranks"]] == [0, 1] and doc["reason_ranks"] == [r.rank for r in v.reasons]
    # a rank's own runs are one process's: judged as before, no per-rank verdicts, no new keys in the JSON
    from torchmend.verify.ranks import rank_run

    one = judge([rank_run(r, 0) for r in before], [rank_run(r, 0) for r in fixed])
    assert one.ranks == () and not {"ranks", "reason_ranks"} & one.to_json().keys()
    assert "slowest" not in one.speed_text() and all(r.rank is None for r in one.reasons)


def test_faster_on_one_rank_and_slower_on_another_is_refused(recorded: dict) -> None:
    """The fix as recorded is faster on rank 0 (to the last step, beyond its band). Rank 1's patched step times are
    scaled by 1.5 here (rank 0's left as recorded): faster on one rank, slower on the other. A job waits for its
    slowest rank at every collective, so the change is refused, and the reason says both. Before ranks were judged,
    the job's times were rank 0's alone and this change passed."""
    before = _arm(recorded, "before")
    v = judge(before, _arm(recorded, "fixed", scale={1: 1.5}))
    assert v.verdict == REFUSED
    rank0 = _rank(judge(before, _arm(recorded, "fixed")), 0).speed
    assert rank0 is not None and rank0.of("last_step_s").pace == Pace.FASTER
    slower = [r for r in v.reasons if r.kind == ReasonKind.SLOWER]
    assert slower and {r.rank for r in slower} == {1}
    said = " ".join(r.text for r in slower)
    assert "rank 1: slower: to the last step " in said and "× the original (band ±" in said
    assert "rank 0 is faster (to the last step 0." in said and "the slowest rank decides" in said
    assert _rank(v, 0).speed is not None and _rank(v, 0).speed.of("last_step_s").pace == Pace.FASTER
    assert v.speed_text().startswith("slower ") and "; rank 1 slower: " in v.speed_text()


def test_numbers_that_differ_on_one_rank_only_are_refused(recorded: dict) -> None:
    """Rank 1's patched losses scaled by 1.01 (rank 0's, which the job's own comparison reads, as recorded)."""
    before = _arm(recorded, "before")
    v = judge(before, _arm(recorded, "fixed", losses={1: 1.01}), timed=False)
    assert v.numerics is not None and v.numerics.equal  # rank 0's
    assert v.verdict == REFUSED and v.kinds() == {ReasonKind.NUMERICS}
    (reason,) = v.reasons
    assert reason.rank == 1 and reason.text.startswith("rank 1: numerics differ: ")


def test_a_change_that_makes_the_ranks_compile_different_graphs_is_refused(recorded: dict) -> None:
    """The print removed on rank 0 only: fewer breaks in all and the same numbers, so the job's summed counts alone
    call it a fix; rank 0 now compiles forward whole and rank 1 still breaks there."""
    before, gated = _arm(recorded, "before")[:1], _arm(recorded, "rank_gated")
    v = judge(before, gated, timed=False)
    assert v.metric("graph_breaks").after.median < v.metric("graph_breaks").before.median
    assert v.verdict == REFUSED and v.kinds() == {ReasonKind.RANKS_DIFFER}
    (reason,) = v.reasons
    assert reason.text.startswith(
        "the ranks compile different graphs after the change: frames compiled 5 on rank 0, 6 on rank 1; graph "
        "breaks 3 on rank 0, 4 on rank 1 (the original's ranks agreed: 6 frames compiled, 4 graph breaks on each)"
    )
    # counts where the original's ranks differed already (rank 1's recompile makes a graph more) are not judged
    assert "graphs 1 on rank 0" not in reason.text
