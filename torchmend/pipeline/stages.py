"""verify_rounds(): the verification stages. A screening stage (a quick backend, one run per arm) may go first; the
judging stage (the script's own backend, several timed runs per arm) decides what is written. A global compiler
setting is written only when the script's own backend measured the run faster; a screening backend that fails the
original where eager runs is PyTorch's failure, and screening goes on with eager."""

from __future__ import annotations

import functools
from collections.abc import Callable, Generator, Iterator
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from torchmend.pipeline.comparison import RunStarted
from torchmend.pipeline.events import (
    NONE_HELPED,
    VERIFIED,
    Dropped,
    Event,
    FoundBy,
    ProxyFailed,
    Refusal,
    Stage,
    StageKind,
    Verified,
)
from torchmend.pipeline.inputs import settings_for
from torchmend.pipeline.rounds import Judge, no_less_safe, rounds
from torchmend.project import Project
from torchmend.settings import Settings
from torchmend.values import Root
from torchmend.verify.reasons import Reason, ReasonKind
from torchmend.verify.speed import PROXY_BACKENDS, own_proxy

if TYPE_CHECKING:  # heavy (libcst, the runner) or annotations only: imported by the stage that needs it
    from torchmend.codemods.base import Proposal
    from torchmend.codemods.engine import Session
    from torchmend.pipeline.fixes import Fixes
    from torchmend.pipeline.scans import Scan
    from torchmend.profiler.runner import RunSpec
    from torchmend.verify.compare import Verification
    from torchmend.verify.runs import ArmRun


def verify_rounds(
    scan: Scan,
    fixes: Fixes,
    root: Project | Path,
    settings: Settings | None = None,
    *,
    backend: str | None = None,
    screen: str | None = None,
    repeat: int = 1,
    on_run: Callable[[RunStarted], None] | None = None,
    follow_up: bool = False,
) -> Iterator[Event]:
    """Run the original and the patched sources (served from memory: nothing is written) and judge, stage by stage
    and round by round. With `screen` (a quick backend, e.g. aot_eager, other than `backend`), a screening stage
    goes first: one run per arm, counts, coverage and numerics, no timing; what it verifies goes on to the judging
    stage, `repeat` timed runs per arm on `backend` (None: the script's own), whose verdict decides what is written.
    When the screening backend fails the original where eager runs (PyTorch's failure, not the user's), screening
    goes on with eager (ProxyFailed). In each stage a refusal costs only the changes it is due to (found by the
    failing line, else by bisection): they are withdrawn, their next candidate fix (`Proposal.fallbacks`) takes their
    place, and the rest is verified again; a change whose targeted findings are all still there did not help: it is
    withdrawn and the rest verified again, once. A global compiler setting (`Proposal.global_setting`) is kept only
    when the judging stage ran on the script's own backend and measured a gain (verdict improved); otherwise it is
    withdrawn (Dropped) and the rest judged again; where the judging stage cannot measure a gain (a named backend,
    a proxy, one run per arm), before the first run, its local fallback screened and judged in its place. Yields
    Stage as each stage begins, Rounds (Probes while bisecting, Dropped after a refusal, Retry before the retry) and
    one Verified last. The scan is reused as the
    first before-run of the stage whose backend it ran on, when it ran cold. The numbers are judged with the
    settings' tolerance. With `follow_up` (fix --yes: nobody is asked), a verified round whose patched run shows a
    finding a safe last resort fixes adds that change and verifies once more (FollowUp), in the first stage."""
    if scan.spec is None:
        raise ValueError("a scan from a trace ran nothing here: there is no run to compare against")
    project = Project.of(root)
    folder = project.folder
    resolved = settings_for(project, settings)
    # the safeties the settings opt into: a global setting's local fallback of these may take its place
    opted = frozenset(k for k, on in (("unsafe", resolved.unsafe), ("random-stream", resolved.random_stream)) if on)
    session = fixes.session
    versions = {"torch": scan.summary.torch_version or ""}
    tried: list[Refusal] = []
    screened: Verified | None = None  # the screening stage's outcome, where one ran

    runs_on, timed, judged_repeat = _judging(scan, backend, repeat)
    unwritable = _globals_unwritable(backend, runs_on, timed, judged_repeat)
    if unwritable is not None and _leaves_a_change(session, opted):
        # Known before the first run: no round of the most expensive runs is spent on a setting only to withdraw it
        # after; a local fallback takes its place now and is screened and judged as the other changes are.
        yield from _withhold_globals(session, tried, unwritable, opted, ahead=True)

    made: dict[str | None, tuple[ArmRun, ...]] = {}  # an original's cold run by backend, made before a stage
    reused = functools.partial(_reused, scan, folder, made)

    if screen is not None and screen != backend:
        spec = replace(scan.spec, backend=screen, overlay=())
        reuse = reused(screen)
        if reuse and reuse[0].failed:
            proxy = yield from _proxy_failed(spec, reuse[0], folder, on_run)
            if proxy is not None:
                spec, reuse = proxy
                made[spec.backend] = reuse
                screen = spec.backend
    if screen is not None and screen != backend:
        yield Stage(StageKind.SCREEN, spec.backend, 1)
        screening = Judge(spec, folder, 1, resolved.tolerance, on_run, reuse, timed=False)
        screened = yield from rounds(screening, session, versions, tried, follow_up)
        if not screened.ok:
            yield screened
            return
        follow_up = False  # the judging stage judges what screening kept
    if unwritable is not None and screened is not None and any(p.global_setting for p in session.accepted):
        # what screening kept holds a global setting the judging stage cannot write (one with no local fallback,
        # or added by a follow-up): withdrawn before that stage's runs too
        yield from _withhold_globals(session, tried, unwritable, opted)
        if not session.accepted:
            yield Verified(NONE_HELPED, (), screened.verification, tuple(tried))
            return
    repeat = judged_repeat
    yield Stage(StageKind.JUDGE, backend, repeat, timed)
    spec = replace(scan.spec, backend=runs_on, overlay=())
    reuse = reused(backend)
    if screened is not None and not reuse:
        first = yield from _original_on_judging(spec, folder, on_run, session, tried, opted, backend, screened)
        if first is None:
            return
        reuse = (first,)
    judging = Judge(spec, folder, repeat, resolved.tolerance, on_run, reuse, timed=timed)
    done = yield from rounds(judging, session, versions, tried, follow_up)
    if done.ok and any(p.global_setting for p in session.accepted):
        from torchmend.verify.compare import IMPROVED

        v = done.verification
        if backend is not None or v.verdict != IMPROVED:  # a named backend is not the script's own: unconfirmed
            yield from _withhold_globals(session, tried, _not_confirmed(backend) if backend else _no_gain(v), opted)
            if not session.accepted:
                yield Verified(NONE_HELPED, (), v, tuple(tried))
                return
            done = yield from rounds(judging, session, versions, tried, False)
    if backend is not None:  # judged on a backend the user named: say it is not the script's own
        device = f" ({done.verification.device})" if done.verification.device else ""
        done = replace(done, verification=replace(done.verification, unconfirmed=f"the script's own backend{device}"))
    yield done


def _original_on_judging(
    spec: RunSpec,
    folder: Root,
    on_run: Callable[[RunStarted], None] | None,
    session: Session,
    tried: list[Refusal],
    opted: frozenset[str],
    backend: str | None,
    screened: Verified,
) -> Generator[Event, None, ArmRun | None]:
    """The original's first run on the judging backend, made first when screening ran. When it fails there (no
    compiler for it, a PyTorch failure) while screening ran it, what screening verified stands for the local
    changes, said as such, and a global setting is not confirmed: yields that Verified and returns None."""
    from torchmend.verify.failure import failure_of

    first = _original_run(spec, folder, on_run)
    failed = failure_of(first, folder)
    if failed is None:
        return first
    own = backend or "the script's own backend"
    unconfirmed = Reason(
        ReasonKind.NOT_CONFIRMED,
        f"a global compiler setting is written only when the script's own backend measures the run faster, and the "
        f"original fails on {own}",
    )
    # no fallback here: what screening did not run is not verified at all
    yield from _withhold_globals(session, tried, unconfirmed, opted, fallback=False)
    device = " (cuda)" if first.end.get("cuda_device") else " (cpu)"
    where = f"{own}{device}, where the original fails ({failed.describe()})"
    v = replace(screened.verification, unconfirmed=where)
    yield Verified(VERIFIED if session.accepted else NONE_HELPED, tuple(session.accepted), v, tuple(tried))
    return None


def _reused(
    scan: Scan, root: Root, made: dict[str | None, tuple[ArmRun, ...]], backend: str | None
) -> tuple[ArmRun, ...]:
    """The original's cold run on `backend` a stage may start from: one made before it, else the scan's."""
    from torchmend.verify.runs import from_outcome

    if backend in made:
        return made[backend]
    cold = scan.cold and scan.spec is not None and backend == scan.spec.backend
    return (from_outcome("before", 0, scan.outcome, root),) if cold else ()


def _judging(scan: Scan, backend: str | None, repeat: int) -> tuple[str | None, bool, int]:
    """The judging stage's backend for its runs, whether they are timed, and runs per arm. A proxy's times are not
    the user's training's: never judged, also where every torch.compile call of the script asks for the same proxy
    (its runs then name it, which runs them as the script does); untimed, a repeat measures nothing."""
    proxy = own_proxy(scan.outcome.events) if backend is None else None
    timed = (backend or proxy) not in PROXY_BACKENDS
    return backend or proxy, timed, repeat if timed else 1


def _globals_unwritable(backend: str | None, runs_on: str | None, timed: bool, repeat: int) -> Reason | None:
    """Why the judging stage cannot write a global compiler setting whatever its runs show, or None: it runs on a
    backend that is not the script's own, or it is not timed (the script's own backend is a proxy), or it makes one
    run per arm (no noise band, so no measured gain)."""
    if backend is not None:
        return _not_confirmed(backend)
    if not timed:
        return Reason(
            ReasonKind.NO_GAIN,
            f"a global compiler setting is written only when measured faster, and the script's own backend, "
            f"{runs_on}, is a proxy whose times are not judged",
        )
    if repeat < 2:
        return Reason(
            ReasonKind.NO_GAIN,
            "a global compiler setting is written only when measured faster, and one run per arm measures no noise "
            "band (--repeat 3 or more does)",
        )
    return None


def _leaves_a_change(session: Session, opted: frozenset[str]) -> bool:
    """Whether withholding the accepted global settings leaves a change to judge: a local one, or the local
    fallback of a global one."""
    return any(not p.global_setting or _local_fallback(p, opted) is not None for p in session.accepted)


def _local_fallback(p: Proposal, opted: frozenset[str]) -> Proposal | None:
    """The first local fallback of a global setting that may take its place: no less safe, or of a safety the
    settings opt into."""
    return next(
        (fb for fb in p.fallbacks if not fb.global_setting and (no_less_safe(fb, p) or fb.safety in opted)), None
    )


def _not_confirmed(backend: str) -> Reason:
    return Reason(
        ReasonKind.NOT_CONFIRMED,
        f"a global compiler setting is written only when the script's own backend measures the run faster; these "
        f"runs used {backend}",
    )


def _no_gain(v: Verification) -> Reason:
    return Reason(
        ReasonKind.NO_GAIN,
        f"a global compiler setting is written only when measured faster, and it was not: {v.speed_text()}",
    )


def _withhold_globals(
    session: Session,
    tried: list[Refusal],
    reason: Reason,
    opted: frozenset[str] = frozenset(),
    fallback: bool = True,
    ahead: bool = False,
) -> Iterator[Event]:
    """Withdraw the accepted global compiler settings, each refused for `reason` (Dropped), when there are any; with
    `fallback`, a local fallback of one takes its place, to be judged in its turn, when it is no less safe or the
    settings opt into its safety (`opted`: --unsafe-fixes, --allow-random-stream). `ahead`: before the first run."""
    from torchmend.codemods.engine import Conflict

    withheld = [p for p in session.accepted if p.global_setting]
    if not withheld:
        return
    refused = []
    for p in withheld:
        session.withdraw(p)
        local = _local_fallback(p, opted) if fallback else None
        if local is not None:
            local = replace(local, findings=p.findings, fallbacks=())
            try:
                session.accept(local)
            except Conflict:
                local = None
        refused.append(Refusal(p, FoundBy.GLOBAL_RULE, (reason,), local))
    tried += refused
    yield Dropped(tuple(refused), again=bool(session.accepted), ahead=ahead)


def _original_run(spec: RunSpec, root: Root, on_run: Callable[[RunStarted], None] | None) -> ArmRun:
    """The original's first run of a stage, made before the stage's rounds (which reuse it)."""
    from torchmend.verify.runs import run_one

    if on_run is not None:
        on_run(RunStarted("before", 0, 1, 1))
    return run_one(spec, root, "before")


def _proxy_failed(
    spec: RunSpec, scanned: ArmRun, root: Root, on_run: Callable[[RunStarted], None] | None
) -> Generator[Event, None, tuple[RunSpec, tuple[ArmRun, ...]] | None]:
    """The original failed on the screening backend: run it once with eager. When eager runs it to its end, the
    screening backend's failure is PyTorch's, not the user's (ProxyFailed): screening goes on with eager, that run as
    its first before-run. None when eager fails too (the script's own failure, judged as such)."""
    from torchmend.verify.compare import failure_line
    from torchmend.verify.runs import run_one

    eager = replace(spec, backend="eager")
    if on_run is not None:
        on_run(RunStarted("before (eager backend)", 0, 1, 1))
    run = run_one(eager, root, "before")
    if run.failed:
        return None
    yield ProxyFailed(spec.backend or "", failure_line(scanned.outcome), "eager")
    return eager, (run,)
