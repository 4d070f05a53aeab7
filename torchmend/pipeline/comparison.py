"""verify(): one before/after comparison of two run specs, with the eager reference when the numbers differ."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from torchmend.project import Project
from torchmend.values import Root, Tolerance
from torchmend.verify.speed import own_proxy

if TYPE_CHECKING:  # heavy (libcst, the runner): imported by the stage that needs it
    from torchmend.profiler.runner import RunSpec
    from torchmend.verify.compare import Verification
    from torchmend.verify.runs import ArmRun


@dataclass(frozen=True)
class RunStarted:
    """A verification run is about to start (run `number` of `total` in this round)."""

    arm: str  # before | after
    repeat: int  # 0-based
    number: int
    total: int


@dataclass(frozen=True)
class _How:
    """How the runs of one comparison are judged: timed or not, and the backend they used ("": the script's own)."""

    timed: bool
    backend: str
    kept: tuple[str, ...]  # the coverage counts the patched run must keep (verify/compare.py's COVERAGE)


def verify(
    before: RunSpec,
    after: RunSpec,
    root: Project | Root | Path,
    repeat: int = 1,
    tolerance: Tolerance = Tolerance(),
    reuse_before: tuple[ArmRun, ...] = (),
    on_run: Callable[[RunStarted], None] | None = None,
    reference: bool = False,
    eager: dict[str, ArmRun] | None = None,
    timed: bool = True,
    kept: tuple[str, ...] | None = None,
) -> tuple[Verification, list[ArmRun], list[ArmRun]]:
    """Run both arms `repeat` times, interleaved, and judge: (verdict, before-runs, after-runs).
    `reuse_before` stands in for the first before-runs (runs already made with the same spec). With `reference`,
    numbers that differ get the eager reference (verify/reference.py): both scripts run once more without
    compiling; the original's compiled-vs-eager spread is the noise band the numbers are judged within, and a
    refusal says whose difference it is. `eager` keeps the original's eager runs between calls ("before", and
    "before again" once the rewrite or the compiler was to be blamed: the original's own eager noise). `timed`:
    these runs judge speed (verify/speed.py); a screening stage's do not. `kept`: the coverage counts the patched
    run must keep (None: all of them; compile placement keeps the largest graph alone)."""
    from torchmend.verify.compare import COVERAGE, judge
    from torchmend.verify.runs import run_arms, standing_in

    root = root.folder if isinstance(root, Project) else Root.of(root)
    reuse_before = standing_in(before, reuse_before)
    total = repeat * 2 - min(len(reuse_before), repeat)
    count = 0

    def started(arm: str, i: int) -> None:
        nonlocal count
        count += 1
        if on_run is not None:
            on_run(RunStarted(arm, i, count, total))

    b, a = run_arms(before, after, root, repeat, started, reuse_before)
    proxy = own_proxy(b[0].outcome.events) if before.backend is None and b else None
    how = _How(timed and proxy is None, before.backend or proxy or "", COVERAGE if kept is None else kept)
    v = judge(b, a, tolerance, root, timed=how.timed, backend=how.backend, kept=how.kept)
    n = v.numerics
    if not reference or v.failure is not None or n is None or n.equal or not n.compared:
        return v, b, a
    eager = {} if eager is None else eager
    return _with_reference(v, before, after, b, a, root, tolerance, on_run, eager, how), b, a


def _with_reference(
    v: Verification,
    before: RunSpec,
    after: RunSpec,
    b: list[ArmRun],
    a: list[ArmRun],
    root: Root,
    tolerance: Tolerance,
    on_run: Callable[[RunStarted], None] | None,
    eager: dict[str, ArmRun],
    how: _How,
) -> Verification:
    """The verdict again with the eager reference: equal within the noise band, or refused with whose it is."""
    from torchmend.verify.compare import REFUSED as REFUSED_VERDICT
    from torchmend.verify.compare import judge, restored_verdict
    from torchmend.verify.reasons import Reason
    from torchmend.verify.reference import COMPILER, EAGER_COMPILE, REWRITE, banded, reference, spread
    from torchmend.verify.runs import run_one

    def one(spec: RunSpec, arm: str) -> ArmRun:
        if on_run is not None:
            on_run(RunStarted(arm, 0, 1, 1))
        return run_one(replace(spec, compile=EAGER_COMPILE), root, arm)

    if "before" not in eager:
        eager["before"] = one(before, "before (eager)")
    after_eager = one(after, "after (eager)")
    ref = reference(b[0], eager["before"], a[0], after_eager, tolerance, compiled_again=b[1:])
    if ref.whose in (REWRITE, COMPILER):  # before blaming either: does the original compute the same twice?
        again = eager.get("before again") or one(before, "before (eager, again)")
        eager["before again"] = again
        ref = reference(b[0], eager["before"], a[0], after_eager, tolerance, compiled_again=b[1:], eager_again=again)
    restored = restored_verdict(ref, b, a, root, timed=how.timed, backend=how.backend, kept=how.kept)
    if restored is not None:
        return restored
    if ref.band is not None and ref.band > tolerance.rtol:
        widened = judge(b, a, banded(tolerance, ref.band), root, timed=how.timed, backend=how.backend, kept=how.kept)
        if widened.numerics is not None and widened.numerics.equal:
            own = ref.compiled
            same = (
                ""
                if own is None
                else "; the patched compiled run equals its eager run bit for bit"
                if spread(own) == 0
                else f"; the patched compiled run differs from its eager run by {spread(own):.2g} relative"
            )
            widened = widened.noted(f"numerics equal within the noise band ({ref.band_text()}{same})", first=True)
            return replace(widened, reference=ref)
    v = v.noted(ref.band_text())
    if v.verdict == REFUSED_VERDICT:
        v = v.refused(Reason(ref.kind, ref.describe()))
    return replace(v, reference=ref)
