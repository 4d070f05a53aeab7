"""The two arms of a verification, run interleaved (A B A B ...), each in its own process and with its own
inductor and triton caches, so neither arm's compile is served from the other's cache."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from torchmend.model import Finding, Summary
from torchmend.profiler import forkserver
from torchmend.profiler.findings import analyse
from torchmend.profiler.runner import RunOutcome, RunSpec, run
from torchmend.values import Root

BEFORE, AFTER = "before", "after"


@dataclass
class ArmRun:
    arm: str  # before | after
    index: int  # 0-based repeat
    findings: list[Finding]
    summary: Summary
    outcome: RunOutcome = field(repr=False)

    @property
    def failed(self) -> bool:
        return self.outcome.ended_by.no_run

    @property
    def end(self) -> dict[str, Any]:
        return self.outcome.end


def from_outcome(arm: str, index: int, outcome: RunOutcome, root: Root) -> ArmRun:
    findings, summary = analyse(outcome.events, root.path, outcome.ended_by, outcome.wall_s)
    return ArmRun(arm, index, findings, summary, outcome)


def run_arms(
    before: RunSpec,
    after: RunSpec,
    root: Root,
    repeat: int,
    on_run: Callable[[str, int], None] | None = None,
    reuse_before: tuple[ArmRun, ...] = (),
) -> tuple[list[ArmRun], list[ArmRun]]:
    """Run each arm `repeat` times, interleaved. `reuse_before` stands in for the first before-runs
    (runs already made with the same spec: fix's scan, or an earlier round)."""
    runs: dict[str, list[ArmRun]] = {BEFORE: [], AFTER: []}
    reuse_before = standing_in(before, reuse_before)
    scratch = Path(tempfile.mkdtemp(prefix="torchmend-verify-"))
    try:
        for i in range(repeat):
            for arm, spec in ((BEFORE, before), (AFTER, after)):
                if arm == BEFORE and i < len(reuse_before):
                    runs[BEFORE].append(reuse_before[i])
                    continue
                if on_run:
                    on_run(arm, i)
                caches = scratch / f"{arm}-{i}"
                env = (
                    *spec.env,
                    ("TORCHINDUCTOR_CACHE_DIR", str(caches / "inductor")),
                    ("TRITON_CACHE_DIR", str(caches / "triton")),
                )
                runs[arm].append(from_outcome(arm, i, run(replace(spec, env=env)), root))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return runs[BEFORE], runs[AFTER]


def standing_in(before: RunSpec, reuse_before: tuple[ArmRun, ...]) -> tuple[ArmRun, ...]:
    """The runs made already that may stand in for the first before-runs of `before`: only those started as its runs
    will be (a fresh interpreter's first compile includes inductor's imports, a fork's does not). Warms the fork
    server: what compares arms runs the script several times."""
    forkserver.warm(before.python)
    forked = not before.ranked and forkserver.serving(before.python, dict(before.env))
    return tuple(r for r in reuse_before if r.outcome.forked == forked)


def run_one(spec: RunSpec, root: Root, arm: str, index: int = 0) -> ArmRun:
    """One run with inductor and triton caches of its own (an eager reference, a probe)."""
    scratch = Path(tempfile.mkdtemp(prefix="torchmend-verify-"))
    try:
        env = (
            *spec.env,
            ("TORCHINDUCTOR_CACHE_DIR", str(scratch / "inductor")),
            ("TRITON_CACHE_DIR", str(scratch / "triton")),
        )
        return from_outcome(arm, index, run(replace(spec, env=env)), root)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
