"""Verification in distribution, for the changes that alter the random stream but keep the distribution
(safety RANDOM_STREAM, e.g. a LayerDrop skip picked with torch.where): bit-equal numbers cannot be asked of them, so
each arm runs once per seed (SEEDS runs, the script seeded by torchmend before it starts) and the losses and final
parameters are compared as distributions.

The test, per training step and per parameter fingerprint (its sum): Welch's statistic
t = |mean_before - mean_after| / sqrt(var_before / n + var_after / n) over the n seeds of each arm, with a floor on the
denominator of atol + rtol * |mean| (the default Tolerance) (so arms that agree exactly, or nearly, are not split by a zero variance).
Equivalent in distribution when every t <= T_MAX. T_MAX = 4.0 is about a two-sided p of 0.007 per comparison at the
~6 degrees of freedom of 4 seeds per arm: strict enough to catch a rewrite that changes the math at the scale of
the seed-to-seed spread, loose enough that four seeds do not refuse an equal distribution by chance. With 4 seeds the
test sees only differences of the order of that spread: it says so in its verdict. The counts (breaks, recompiles)
are judged as in every verification, on the first seed's runs; every other change keeps the strict gate.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from torchmend.profiler.runner import RunSpec
from torchmend.values import Root, Tolerance
from torchmend.verify.runs import ArmRun

SEEDS = 4
T_MAX = 4.0
VERDICT = "equivalent in distribution (random stream changed)"


@dataclass(frozen=True)
class Worst:
    what: str  # "loss at step 3", "parameter 2 (sum)"
    before: tuple[float, float]  # mean, standard deviation over the seeds
    after: tuple[float, float]
    t: float


@dataclass(frozen=True)
class Distribution:
    seeds: tuple[int, ...]
    steps: int  # losses compared per seed (the common prefix of every run)
    params: int  # parameter fingerprints compared
    worst: Worst | None  # the comparison with the largest t
    identical_seeds: bool  # every seed of the original gave the same losses: the script seeds itself
    problem: str = ""  # why the distributions could not be compared (no losses, a run without them)

    @property
    def equivalent(self) -> bool:
        return not self.problem and not self.identical_seeds and (self.worst is None or self.worst.t <= T_MAX)

    def describe(self) -> str:
        seeds = f"{len(self.seeds)} seeds per arm ({', '.join(map(str, self.seeds))})"
        if self.problem:
            return f"not compared in distribution over {seeds}: {self.problem}"
        if self.identical_seeds:
            return (
                f"not compared in distribution over {seeds}: every seed gave the original the same losses (the "
                "script seeds itself, e.g. torch.manual_seed(0) at its start: seed it with "
                "int(os.environ.get('TORCHMEND_SEED', 0)), the seed torchmend gives each run)"
            )
        test = f"Welch t <= {T_MAX:g} on {self.steps} step losses and {self.params} parameter sums"
        worst = ""
        if self.worst is not None:
            w = self.worst
            worst = (
                f"; largest t = {w.t:.2f} at {w.what} (before {w.before[0]:.6g} ± {w.before[1]:.2g}, "
                f"after {w.after[0]:.6g} ± {w.after[1]:.2g})"
            )
        head = VERDICT if self.equivalent else "not equivalent in distribution"
        return f"{head}: {seeds}, {test}{worst}"


def welch(before: Sequence[float], after: Sequence[float], tol: Tolerance = Tolerance()) -> float:
    """|mean difference| over its standard error, the error floored at atol + rtol * |mean| (inf for a NaN on
    one side only)."""
    nan_b, nan_a = any(math.isnan(x) for x in before), any(math.isnan(x) for x in after)
    if nan_b or nan_a:
        return 0.0 if nan_b and nan_a else math.inf
    mb, ma = statistics.fmean(before), statistics.fmean(after)
    vb = statistics.variance(before) if len(before) > 1 else 0.0
    va = statistics.variance(after) if len(after) > 1 else 0.0
    floor = tol.atol + tol.rtol * max(abs(mb), abs(ma))
    return abs(mb - ma) / max(math.sqrt(vb / len(before) + va / len(after)), floor)


def _spread(xs: Sequence[float]) -> tuple[float, float]:
    return statistics.fmean(xs), statistics.stdev(xs) if len(xs) > 1 else 0.0


def _param_sums(end: dict[str, Any]) -> list[float | None]:
    return [p.get("sum") if isinstance(p, dict) else None for p in end.get("params") or []]


def compare_distributions(
    seeds: Sequence[int], before: Sequence[dict[str, Any]], after: Sequence[dict[str, Any]]
) -> Distribution:
    """The END events of each arm's runs (one per seed, in the same order) compared as distributions."""
    seeds_t = tuple(seeds)
    losses_b = [list(e.get("losses") or []) for e in before]
    losses_a = [list(e.get("losses") or []) for e in after]
    steps = min(len(x) for x in (*losses_b, *losses_a)) if losses_b and losses_a else 0
    if steps == 0:
        return Distribution(seeds_t, 0, 0, None, False, "a run recorded no loss")
    if len({len(x) for x in (*losses_b, *losses_a)}) > 1:
        return Distribution(seeds_t, steps, 0, None, False, "the runs recorded different numbers of losses")
    identical = len(losses_b) > 1 and all(x == losses_b[0] for x in losses_b)
    rows: list[tuple[str, Sequence[float], Sequence[float]]] = [
        (f"loss at step {i}", [x[i] for x in losses_b], [x[i] for x in losses_a]) for i in range(steps)
    ]
    sums_b, sums_a = [_param_sums(e) for e in before], [_param_sums(e) for e in after]
    count = min(len(x) for x in (*sums_b, *sums_a))
    params = 0
    for j in range(count):
        bs = [float(v) for x in sums_b if isinstance(v := x[j], (int, float))]
        as_ = [float(v) for x in sums_a if isinstance(v := x[j], (int, float))]
        if len(bs) == len(sums_b) and len(as_) == len(sums_a):
            rows.append((f"parameter {j} (sum)", bs, as_))
            params += 1
    worst: Worst | None = None
    for what, b, a in rows:
        t = welch(b, a)
        if worst is None or t > worst.t:
            worst = Worst(what, _spread(b), _spread(a), t)
    return Distribution(seeds_t, steps, params, worst, identical)


def seeded_runs(
    before: RunSpec,
    after: RunSpec,
    root: Root,
    seeds: Sequence[int],
    reuse: ArmRun | None = None,
    on_run: Callable[[str, int], None] | None = None,
) -> tuple[list[ArmRun], list[ArmRun]]:
    """Each arm once per seed, interleaved; `reuse` stands in for the original's run with the first seed."""
    from torchmend.verify.runs import AFTER, BEFORE, run_one

    b: list[ArmRun] = []
    a: list[ArmRun] = []
    for i, seed in enumerate(seeds):
        for arm, spec, out in ((BEFORE, before, b), (AFTER, after, a)):
            if arm == BEFORE and i == 0 and reuse is not None:
                out.append(reuse)
                continue
            if on_run is not None:
                on_run(arm, i)
            out.append(run_one(replace(spec, seed=seed), root, arm, i))
    return b, a


def failed_seeds(seeds: Sequence[int], before: Sequence[ArmRun], after: Sequence[ArmRun], root: Root | None) -> str:
    """Which runs of either arm failed, with which seed, their exception and line ('' when none did). A run that fails
    on a later seed only (a random path the first seed did not take: a skipped layer that sets None) leaves the
    distributions without its losses; this is why, said instead of "a run recorded no loss"."""
    from torchmend.verify.failure import failure_of

    parts = []
    seen: dict[str, set[tuple[str, str, str | int]]] = {"the original": set(), "the patched script": set()}
    for name, runs in (("the original", before), ("the patched script", after)):
        for seed, run in zip(seeds, runs, strict=False):
            failure = failure_of(run, root)
            if failure is not None:
                parts.append(f"{name} failed with seed {seed}: {failure.describe()}")
                seen[name].add(failure.same_as)
    if seen["the original"] and seen["the patched script"] <= seen["the original"]:
        parts.append("a failure of the program itself on a random path, which the patched script only shares")
    return "; ".join(parts)


def seeds_for(spec: RunSpec, n: int = SEEDS) -> tuple[int, ...]:
    base = spec.seed if spec.seed is not None else 0
    return tuple(range(base, base + n))
