"""Whether the patched runs are faster, slower or the same, against a noise band measured from the runs themselves.

Times are not deterministic: each arm runs several times, interleaved, and a time is judged by the ratio of the two
arms' medians against a band measured from both arms. An arm's noise is its median absolute deviation relative to its
median (robust: one run slowed by the machine's other work does not widen the band to nothing, as min-max did on a
loaded 2-core CPU, ±9400%); the band is BAND_WIDTH times the noisier arm's, never less than MIN_BAND. Slower means
the ratio is beyond 1 + band; faster, below 1 / (1 + band). One run per arm measures no band: then speed is not
judged, except that a ratio beyond ONE_RUN_LIMIT is still called slower (a change that makes a step twice as slow is
not let through for want of repeats).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from torchmend.model import StrEnum

MIN_BAND = 0.05
# Backends that run the captured graphs without compiling them: quick to screen with, but their times are not the
# user's training's (aot_eager made the bundled example's compiled step 13x slower than the eager fallback it
# replaced, where inductor made it no slower). Runs on them are never timed.
PROXY_BACKENDS = ("eager", "aot_eager", "aot_eager_decomp_partition")


def own_proxy(events: list[dict[str, Any]]) -> str | None:
    """The proxy backend every torch.compile call of a run asked for (its `compile_call` events), when they all
    asked for the same one: the script's own backend is then a proxy, whose times are never judged either."""
    from torchmend.profiler.events import COMPILE_CALL

    asked = {str(e.get("backend")) for e in events if e.get("ev") == COMPILE_CALL and e.get("backend")}
    return next(iter(asked)) if len(asked) == 1 and next(iter(asked)) in PROXY_BACKENDS else None


BAND_WIDTH = 3.0  # median absolute deviations: about two standard deviations of normal noise
ONE_RUN_LIMIT = 2.0
# What the user's training waits for: slower in either refuses a change; faster in either is a gain.
TRAINING_TIMES = ("steady_step_s", "last_step_s")
# The judged times in the speed line and the reasons.
SHORT = {
    "steady_step_s": "steady step",
    "last_step_s": "to the last step",
    "compile_seconds": "compile",
    "first_step_s": "first step",
}
# What a start costs: faster in either, with the training times within the band, is a gain too (the first step only
# with the compile faster as well: see Speed.gain).
START_TIMES = ("compile_seconds", "first_step_s")


class Pace(StrEnum):
    FASTER = "faster"
    SLOWER = "slower"
    SAME = "same"  # within the band
    UNMEASURED = "unmeasured"  # one run per arm, or a time the runs did not record


@dataclass(frozen=True)
class Stat:
    """A number over the runs of one arm: median, min, max and how many runs recorded it."""

    median: float | None
    low: float | None
    high: float | None
    runs: int = 0

    @classmethod
    def of(cls, values: list[float | None] | list[int] | list[float]) -> Stat:
        vals = [v for v in values if v is not None]
        if not vals:
            return cls(None, None, None, 0)
        median = statistics.median(vals)
        return cls(median, min(vals), max(vals), len(vals), statistics.median(abs(v - median) for v in vals))

    mad: float = 0.0  # median absolute deviation from the median

    @property
    def noise(self) -> float:
        """The arm's own relative noise: its median absolute deviation over its median (0 for one run)."""
        return self.mad / self.median if self.median else 0.0


@dataclass(frozen=True)
class TimeCall:
    """One time, judged: the after/before ratio of the medians, the band it was judged against, the pace."""

    name: str
    ratio: float | None
    band: float | None  # None: not measured (one run per arm)
    pace: Pace

    def describe(self, label: str) -> str:
        """e.g. "steady step 0.71× (band ±6%)"; "steady step 2.40×" with one run per arm (no band)."""
        if self.ratio is None:
            return f"{label}: not recorded"
        band = f" (band ±{self.band * 100:.0f}%)" if self.band is not None else ""
        return f"{label} {self.ratio:.2f}×{band}"


def call(name: str, before: Stat, after: Stat) -> TimeCall:
    """How `after` compares with `before` for one time."""
    if not before.median or after.median is None:
        return TimeCall(name, None, None, Pace.UNMEASURED)
    ratio = after.median / before.median
    if before.runs < 2 or after.runs < 2:
        return TimeCall(name, ratio, None, Pace.SLOWER if ratio > ONE_RUN_LIMIT else Pace.UNMEASURED)
    band = max(MIN_BAND, BAND_WIDTH * before.noise, BAND_WIDTH * after.noise)
    if ratio > 1 + band:
        return TimeCall(name, ratio, band, Pace.SLOWER)
    if ratio < 1 / (1 + band):
        return TimeCall(name, ratio, band, Pace.FASTER)
    return TimeCall(name, ratio, band, Pace.SAME)


@dataclass(frozen=True)
class Speed:
    """Every judged time of a verification, and what they add up to."""

    calls: tuple[TimeCall, ...]

    def of(self, name: str) -> TimeCall | None:
        return next((c for c in self.calls if c.name == name), None)

    @property
    def slower(self) -> tuple[TimeCall, ...]:
        return tuple(c for c in self.calls if c.name in TRAINING_TIMES and c.pace == Pace.SLOWER)

    @property
    def measured(self) -> bool:
        """Whether a band was measured for the training times (several runs per arm)."""
        return any(c.band is not None for c in self.calls if c.name in TRAINING_TIMES)

    @property
    def gain(self) -> TimeCall | None:
        """The measured gain: a training time faster beyond the band, else (with no training time slower) a start
        time faster beyond it. None: no measured gain."""
        if self.slower:
            return None
        faster = [c for c in self.calls if c.pace == Pace.FASTER]
        compile_ = self.of("compile_seconds")
        if compile_ is not None and compile_.pace in (Pace.SAME, Pace.SLOWER):
            # The first step ending sooner while compiling takes as long only moves the compile to a later step (a
            # first call run eagerly: own_optimizer's first step 0.14x, compile 0.97x, to the last step 0.95x).
            faster = [c for c in faster if c.name != "first_step_s"]
        return next((c for c in faster if c.name in TRAINING_TIMES), None) or next(
            (c for c in faster if c.name in START_TIMES), None
        )
