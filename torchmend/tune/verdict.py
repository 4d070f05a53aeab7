"""From the runs to one row per setting and a recommendation.

Times vary between runs of the same code, so each figure is the median over the repeats with its min-max. A
setting "allows a verdict" against eager when it ran at least twice and its steady-step range lies wholly below
eager's (the rule verify uses for "slower", the other way round).

Break-even: a run of N steps takes about F + (N - 1) * steady, where F (the fixed cost) is the time to its last
step less (steps - 1) steady steps: the first step with the script's start-up and first compile, plus every
recompile, autotuning and CUDA-graph recording after it. Compiling has paid for itself from the first N with
F_c + (N - 1) * steady_c <= F_e + (N - 1) * steady_e, i.e. N = 1 + ceil((F_c - F_e) / (steady_e - steady_c));
"never" when the compiled steady step is not faster.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass, field
from typing import Any

from torchmend.tune.runs import TuneRun
from torchmend.tune.settings import DEFAULT, EAGER

NEVER = "never"


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


@dataclass
class Row:
    setting: str
    runs: int
    failed: int
    compile_s: Stat
    first_step_s: Stat
    steady_s: Stat
    fixed_s: Stat
    recompiles: int  # the most any run showed (counts do not vary between seeded runs, as a rule)
    graph_breaks: int
    peak_mb: Stat
    steps: int  # the fewest steps a run made
    error: str | None = None  # the first failed run's error
    cudagraph_skips: list[str] = field(default_factory=list)  # why graphs ran without CUDA graphs
    break_even: int | str | None = None  # steps, NEVER, or None (eager, failed, no steps)
    note: str = ""  # why it was not chosen, and what else is worth knowing (CUDA graphs skipped, a CPU run)
    recommended: bool = False  # the setting the verdict chose

    @property
    def ok(self) -> bool:
        return self.failed == 0 and self.steady_s.median is not None

    @property
    def remark(self) -> str:
        """The note as the table, the report and the JSON show it: "recommended" first on the chosen row."""
        return "; ".join(n for n in ("recommended" if self.recommended else "", self.note) if n)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        del data["recommended"]  # the JSON says it in the note (and the verdict's "recommended")
        data["note"] = self.remark
        return data


@dataclass
class Verdict:
    rows: list[Row]
    recommended: str
    reason: str
    repeat: int
    horizon: int
    cuda: bool
    notes: list[str] = field(default_factory=list)

    def row(self, name: str) -> Row | None:
        return next((r for r in self.rows if r.setting == name), None)


def break_even(eager_fixed: float, eager_steady: float, fixed: float, steady: float) -> int | str:
    """The first step count at which the compiled run has caught up with eager (see the module's docstring)."""
    if steady >= eager_steady:
        return NEVER
    extra = fixed - eager_fixed
    if extra <= 0:
        return 1
    return 1 + math.ceil(extra / (eager_steady - steady))


def rows_of(runs: list[TuneRun]) -> list[Row]:
    """One row per setting, in the order they first ran."""
    names: dict[str, list[TuneRun]] = {}
    for r in runs:
        names.setdefault(r.setting.name, []).append(r)
    rows = []
    for name, rs in names.items():
        good = [r for r in rs if not r.failed]
        bad = [r for r in rs if r.failed]
        rows.append(
            Row(
                setting=name,
                runs=len(rs),
                failed=len(bad),
                compile_s=Stat.of([r.summary.compile_seconds for r in good]),
                first_step_s=Stat.of([r.summary.first_step_s for r in good]),
                steady_s=Stat.of([r.summary.steady_step_s for r in good]),
                fixed_s=Stat.of([r.fixed_s for r in good]),
                recompiles=max((r.summary.recompiles for r in rs), default=0),
                graph_breaks=max((r.summary.graph_breaks for r in rs), default=0),
                peak_mb=Stat.of([r.peak_mb for r in good]),
                steps=min((r.summary.steps for r in rs), default=0),
                error=bad[0].error if bad else None,
                cudagraph_skips=list(dict.fromkeys(reason for r in rs for reason in r.cudagraph_skips())),
            )
        )
    eager = next((r for r in rows if r.setting == EAGER), None)
    for row in rows:
        if row is eager or not row.ok or eager is None or not eager.ok:
            continue
        assert eager.fixed_s.median is not None and eager.steady_s.median is not None
        assert row.fixed_s.median is not None and row.steady_s.median is not None
        row.break_even = break_even(
            eager.fixed_s.median, eager.steady_s.median, row.fixed_s.median, row.steady_s.median
        )
    return rows


def ms(seconds: float | None) -> str:
    return "—" if seconds is None else f"{seconds * 1000:.3g} ms" if seconds < 1 else f"{seconds:.3g} s"


def judge(runs: list[TuneRun], repeat: int, horizon: int) -> Verdict:
    """The rows and the one setting to use: the fastest steady step among the compiled settings that ran, recompile
    no more than default, pay for their compile within `horizon` steps and (with two repeats or more) are faster
    than eager beyond noise; eager when none is. A row whose graphs ran without CUDA graphs says why."""
    verdict = _choose(rows_of(runs), any(r.cuda for r in runs), repeat, horizon)
    for r in verdict.rows:
        if r.cudagraph_skips:
            skip = f"CUDA graphs skipped: {r.cudagraph_skips[0]}"
            r.note = f"{r.note}; {skip}" if r.note else skip
    return verdict


def _choose(rows: list[Row], cuda: bool, repeat: int, horizon: int) -> Verdict:
    eager = next(r for r in rows if r.setting == EAGER)
    default = next((r for r in rows if r.setting == DEFAULT and r.ok), None)
    notes: list[str] = []
    compiled = [r for r in rows if r.setting != EAGER and r.ok]
    for r in rows:
        if not r.ok and r.setting != EAGER:
            r.note = f"failed: {r.error}" if r.failed else "no steady step (too few steps)"
    if not eager.ok:
        return Verdict(rows, EAGER, "the eager run did not give a steady step", repeat, horizon, cuda, notes)
    candidates = []
    for r in compiled:
        if default is not None and r.recompiles > default.recompiles:
            r.note = f"recompiles more than default ({r.recompiles} vs {default.recompiles})"
        elif r.break_even == NEVER:
            r.note = "steady step not faster than eager"
        elif isinstance(r.break_even, int) and r.break_even > horizon:
            r.note = f"pays off only after {r.break_even:,} steps (> --horizon {horizon})"
        else:
            candidates.append(r)
    if repeat >= 2:
        beyond = [r for r in candidates if _below(r.steady_s, eager.steady_s)]
        for r in candidates:
            if r not in beyond:
                r.note = "faster than eager within noise only (ranges overlap)"
        candidates = beyond
    else:
        notes.append(
            "one run per setting: no ranges, so a difference of some 10 % may be noise (use --repeat 2 or more)"
        )
    if not candidates:
        why = _why_eager(compiled, horizon, repeat)
        if repeat >= 2 and compiled and all(_overlap(r.steady_s, eager.steady_s) for r in compiled):
            why += (
                "; and every compiled setting's steady-step range overlaps eager's, so the medians may be noise "
                "(a quieter machine, or more --repeat, would tell)"
            )
        return Verdict(rows, EAGER, why, repeat, horizon, cuda, notes)
    best = min(candidates, key=lambda r: r.steady_s.median or math.inf)
    assert best.steady_s.median is not None and eager.steady_s.median is not None
    ratio = eager.steady_s.median / best.steady_s.median
    reason = (
        f"steady step {ms(best.steady_s.median)} against eager's {ms(eager.steady_s.median)} "
        f"({ratio:.2f}x faster); it has paid for its compile after {best.break_even:,} step"
        f"{'s' * (best.break_even != 1)}; {best.recompiles} recompile{'s' * (best.recompiles != 1)}"
    )
    if default is not None and best is not default:
        reason += f" (default: {default.recompiles})"
    best.recommended = True
    tied = [r.setting for r in candidates if r is not best and _overlap(r.steady_s, best.steady_s)]
    if tied:
        reason += f"; within noise of it: {', '.join(tied)}"
    return Verdict(rows, best.setting, reason, repeat, horizon, cuda, notes)


def _below(a: Stat, b: Stat) -> bool:
    return a.high is not None and b.low is not None and a.high < b.low


def _overlap(a: Stat, b: Stat) -> bool:
    return not (_below(a, b) or _below(b, a))


def _why_eager(compiled: list[Row], horizon: int, repeat: int) -> str:
    if not compiled:
        return "no compiled setting ran to a steady step"
    if all(r.break_even == NEVER for r in compiled):
        return "no compiled setting has a faster steady step than eager"
    paying = [r for r in compiled if isinstance(r.break_even, int)]
    if paying and all(isinstance(r.break_even, int) and r.break_even > horizon for r in paying):
        first = min(paying, key=lambda r: r.break_even if isinstance(r.break_even, int) else math.inf)
        soonest = f"the soonest, {first.setting}, after {first.break_even:,}"
        return f"nothing pays for its compile within {horizon} steps ({soonest})"
    if repeat >= 2:
        return "no compiled setting is faster than eager beyond noise, or none that recompiles no more than default"
    return "no compiled setting that recompiles no more than default pays off"
