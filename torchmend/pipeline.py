"""torchmend as a Python API: the stages behind `torchmend fix`, returning values and yielding events.

    scan()           run the script in a child process under the collector: findings and counts (a Scan)
    scan_trace()     the same from a TORCH_TRACE directory written elsewhere (nothing runs)
    propose()        a proposed change, or why there is none, for every finding (Fixes)
    review()         the accept/reject loop as a generator (send it y/n/a/d/q); accept_all() for --yes
    verify_rounds()  re-run before/after with the accepted changes served from memory; events per round
    write()          write the changed files all or nothing, and save the undo record

Nothing here prints, prompts or exits: torchmend/cli parses options, renders these values and maps them to
exit codes. The parent process never imports torch (the script and torch live in the child), and importing
this module imports neither libcst nor the runner: each stage imports what it needs. docs/api.md has an
example.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Union

from torchmend import sources, store
from torchmend.model import Finding, Summary
from torchmend.verify.numerics import ATOL, RTOL

if TYPE_CHECKING:  # heavy (libcst, the runner): imported by the stage that needs it
    from torchmend.codemods.base import NoFix, Proposal
    from torchmend.codemods.engine import Session
    from torchmend.codemods.review import Ask, Decision
    from torchmend.profiler.pathmap import Mapping
    from torchmend.profiler.runner import Progress, RunOutcome, RunSpec
    from torchmend.profiler.tracedir import Trace
    from torchmend.verify.attribution import ChangeEffect
    from torchmend.verify.compare import Verification
    from torchmend.verify.runs import ArmRun

WriteRefused = store.WriteRefused  # raised by write(): nothing was written, the message says why


# ------------------------------------------------------------------------------------------------------ scan


@dataclass
class Scan:
    """What one run (or one trace) showed."""

    findings: list[Finding]
    summary: Summary
    outcome: RunOutcome
    spec: RunSpec | None = None  # the run as asked for (None: from a trace)
    cold: bool = False  # compiled with empty caches of its own: it can stand in for verify's first before-run
    trace: Trace | None = None  # scan_trace: the logs read instead of a run
    path_maps: tuple[Mapping, ...] = ()  # scan_trace: every mapping applied, given and guessed
    guessed: tuple[Mapping, ...] = ()  # scan_trace: the mappings guessed from the recorded paths
    unmapped: tuple[str, ...] = ()  # scan_trace: recorded source files not found in this checkout

    @property
    def failed(self) -> bool:
        return self.outcome.failed

    @property
    def compiled(self) -> bool:
        """Whether the run compiled anything (or hit the recompile limit): otherwise there is nothing to fix."""
        return self.summary.compiles > 0 or self.summary.recompile_limit_hits > 0


def scan(
    spec: RunSpec,
    root: Path,
    *,
    on_progress: Callable[[Progress], None] | None = None,
    keep_events: Path | None = None,
    own_caches: bool = True,
) -> Scan:
    """Run the script under the collector and analyse what it did. `root` is the project: findings in files
    under it are the user's to fix. With `own_caches` (the default) the run compiles with empty inductor and
    triton caches of its own, so verify_rounds() can use it as its first before-run (a warm cache would make
    the original look faster). How the run ended is `scan.outcome.ended_by`; nothing is raised for it."""
    from torchmend.profiler.findings import analyse
    from torchmend.profiler.runner import run

    caches = Path(tempfile.mkdtemp(prefix="torchmend-scan-cache-")) if own_caches else None
    run_spec = (
        spec
        if caches is None
        else replace(
            spec,
            env=(
                *spec.env,
                ("TORCHINDUCTOR_CACHE_DIR", str(caches / "inductor")),
                ("TRITON_CACHE_DIR", str(caches / "triton")),
            ),
        )
    )
    try:
        outcome = run(run_spec, on_progress=on_progress, keep_dir=keep_events)
    finally:
        if caches is not None:
            shutil.rmtree(caches, ignore_errors=True)
    findings, summary = analyse(outcome.events, root, outcome.ended_by, outcome.wall_s)
    return Scan(findings, summary, outcome, spec=spec, cold=caches is not None)


def scan_trace(trace_dir: Path, root: Path, path_maps: Sequence[Mapping] = ()) -> Scan:
    """Findings from a TORCH_TRACE directory, its source paths mapped onto this checkout (`path_maps`, plus
    mappings guessed from recorded files that do not exist here). Raises profiler.tracedir.TraceError."""
    from torchmend.profiler import pathmap
    from torchmend.profiler.findings import analyse
    from torchmend.profiler.runner import RunOutcome
    from torchmend.profiler.tracedir import read_trace

    trace = read_trace(trace_dir)
    events = trace.events()
    recorded = pathmap.recorded_paths(events)
    maps = list(path_maps)
    guessed = pathmap.guess(recorded, root, maps)
    maps += guessed
    missing = pathmap.unmapped(recorded, maps)
    events = pathmap.apply(events, maps)
    findings, summary = analyse(events, root, "trace", 0.0)
    return Scan(
        findings,
        summary,
        RunOutcome(events, "trace", None, 0.0, "", {}),
        trace=trace,
        path_maps=tuple(maps),
        guessed=tuple(guessed),
        unmapped=tuple(missing),
    )


# --------------------------------------------------------------------------------------------------- propose


@dataclass
class Fixes:
    """The proposals for a scan's findings and the session that accepts them; what is accepted is what gets
    verified and written (`session.accepted`)."""

    session: Session
    proposals: list[Proposal]  # in file and line order: the order review() asks in
    unfixed: list[NoFix]  # findings no codemod could fix, each with the reason (the skipped ones left out)

    @property
    def accepted(self) -> list[Proposal]:
        return list(self.session.accepted)

    def where(self, p: Proposal) -> str:
        """`path:line` of a proposal, the path relative to the project."""
        from torchmend.codemods.engine import span

        return f"{self.session.display(p.path)}:{span(self.session.ctx.file(p.path), p)[0]}"

    def changes(self) -> dict[str, tuple[str, str]]:
        """path -> (text now, text with the accepted changes) for every file they change."""
        return self.session.changed()

    def diff(self) -> str:
        """One unified diff of the accepted changes (applies with `git apply` from the project root)."""
        from torchmend.codemods.engine import unified_diff

        return "".join(
            unified_diff(self.session.display(path), before, after) for path, (before, after) in self.changes().items()
        )


def propose(
    findings: Iterable[Finding],
    root: Path,
    select: list[str] | None = None,
    ignore: list[str] | None = None,
    read: Callable[[str], str] = sources.read_source,
) -> Fixes:
    """A proposal (or a NoFix with the reason) for every finding; nothing is accepted yet."""
    from torchmend.codemods.base import NoFix, Proposal
    from torchmend.codemods.engine import Session, span
    from torchmend.codemods.source import Context

    session = Session(Context(str(root), read))
    results = session.propose(findings, select, ignore)
    proposals = sorted(
        (r for r in results if isinstance(r, Proposal)), key=lambda p: (p.path, span(session.ctx.file(p.path), p))
    )
    unfixed = [r for r in results if isinstance(r, NoFix) and not r.skipped]
    return Fixes(session, proposals, unfixed)


# ---------------------------------------------------------------------------------------------------- review


def review(fixes: Fixes) -> Generator[Ask, str, list[Decision]]:
    """The accept/reject loop (codemods/review.py): `next()` gives the first Ask (the proposal and its diff
    against what is accepted so far), `send(key)` with a git-add-p key (y n a d q) the next; StopIteration
    carries the Decisions."""
    from torchmend.codemods.review import review as loop

    return loop(fixes.session, fixes.proposals)


def accept_all(fixes: Fixes, unsafe: bool = False, unsafe_flag: str = "--unsafe") -> list[Decision]:
    """Accept every safe proposal (the unsafe ones too with `unsafe`), skipping those that overlap."""
    from torchmend.codemods.review import accept_all as accept

    return accept(fixes.session, fixes.proposals, unsafe, unsafe_flag)


# ---------------------------------------------------------------------------------------------------- verify


@dataclass(frozen=True)
class RunStarted:
    """A verification run is about to start (run `number` of `total` in this round)."""

    arm: str  # before | after
    repeat: int  # 0-based
    number: int
    total: int


def verify(
    before: RunSpec,
    after: RunSpec,
    root: Path,
    repeat: int = 1,
    rtol: float = RTOL,
    atol: float = ATOL,
    reuse_before: tuple[ArmRun, ...] = (),
    on_run: Callable[[RunStarted], None] | None = None,
) -> tuple[Verification, list[ArmRun], list[ArmRun]]:
    """Run both arms `repeat` times, interleaved, and judge: (verdict, before-runs, after-runs).
    `reuse_before` stands in for the first before-runs (runs already made with the same spec)."""
    from torchmend.verify.compare import judge
    from torchmend.verify.runs import run_arms

    total = repeat * 2 - min(len(reuse_before), repeat)
    count = iter(range(1, total + 1))

    def started(arm: str, i: int) -> None:
        if on_run is not None:
            on_run(RunStarted(arm, i, next(count), total))

    b, a = run_arms(before, after, root, repeat, started, reuse_before)
    return judge(b, a, rtol, atol, root), b, a


@dataclass(frozen=True)
class Round:
    """One verification round: the verdict and, unless it refused, what each accepted change did."""

    number: int  # 1 or 2
    verification: Verification
    effects: tuple[ChangeEffect, ...]  # empty when the verdict is a refusal


@dataclass(frozen=True)
class Retry:
    """The changes that removed none of their findings were withdrawn; the rest is verified once more."""

    withdrawn: tuple[Proposal, ...]


VERIFIED, REFUSED, NONE_HELPED, STILL_UNHELPFUL = "verified", "refused", "none_helped", "still_unhelpful"


@dataclass(frozen=True)
class Verified:
    """The last event of verify_rounds(). `outcome`: verified (write `accepted`), refused (the verdict
    refused the changes), none_helped (every change was withdrawn), still_unhelpful (after the second
    round a change still removed none of its findings)."""

    outcome: str
    accepted: tuple[Proposal, ...]  # what is left accepted in the session
    verification: Verification  # the last round's

    @property
    def ok(self) -> bool:
        return self.outcome == VERIFIED


Event = Union[Round, Retry, Verified]


def verify_rounds(
    scan: Scan,
    fixes: Fixes,
    root: Path,
    *,
    backend: str | None = None,
    repeat: int = 1,
    rtol: float = RTOL,
    atol: float = ATOL,
    on_run: Callable[[RunStarted], None] | None = None,
) -> Iterator[Event]:
    """Run the original and the patched sources (served from memory: nothing is written) and judge, in up to
    two rounds. A change whose targeted findings are all still there after the patch did not help: it is
    withdrawn from the session and the rest verified again, once. Yields a Round per round, a Retry before
    the second, and a Verified last. `backend` overrides the script's own for these runs (None keeps it);
    the scan is reused as the first before-run when it ran cold on the same backend."""
    from torchmend.verify.attribution import attribute
    from torchmend.verify.compare import REFUSED as REFUSED_VERDICT
    from torchmend.verify.runs import from_outcome

    if scan.spec is None:
        raise ValueError("a scan from a trace ran nothing here: there is no run to compare against")
    session = fixes.session
    before = replace(scan.spec, backend=backend, overlay=())
    reuse: tuple[ArmRun, ...] = (
        (from_outcome("before", 0, scan.outcome, root),) if scan.cold and backend == scan.spec.backend else ()
    )
    for number in (1, 2):
        changes = session.changed()
        after = replace(before, overlay=tuple((p, new) for p, (_, new) in changes.items()))
        v, b_runs, a_runs = verify(before, after, root, repeat, rtol, atol, reuse, on_run)
        reuse = tuple(b_runs)
        if v.verdict == REFUSED_VERDICT:
            yield Round(number, v, ())
            yield Verified(REFUSED, tuple(session.accepted), v)
            return
        effects = attribute(list(session.accepted), a_runs[0].findings, changes)
        yield Round(number, v, tuple(effects))
        useless = tuple(e.proposal for e in effects if not e.helped)
        if not useless:
            yield Verified(VERIFIED, tuple(session.accepted), v)
            return
        for p in useless:
            session.withdraw(p)
        if not session.accepted or number == 2:
            break
        yield Retry(useless)
    yield Verified(STILL_UNHELPFUL if session.accepted else NONE_HELPED, tuple(session.accepted), v)


# ----------------------------------------------------------------------------------------------------- write


def write(fixes: Fixes, root: Path, report: str | None = None) -> store.UndoRecord:
    """Write every file the accepted changes touch, all or nothing (raises WriteRefused, and then nothing was
    written), journaled: the undo record exists before the first file is replaced (store.write_fix; `torchmend
    undo` puts the files back from it; `record.patch` is the diff). `report` (Markdown, e.g. torchmend.vcs.body.fix_report) is kept in the record for `torchmend pr`."""
    summary = "; ".join(f"{p.rule} {fixes.where(p)}" for p in fixes.session.accepted)
    return store.write_fix(fixes.changes(), root, patch_bytes(fixes), summary, report=report)


def patch_bytes(fixes: Fixes) -> bytes:
    """Fixes.diff() as `git apply` and `patch -p1` need it against the files on disk: each file's part in that
    file's encoding (PEP 263 coding line, BOM), what --diff prints and the undo record keeps."""
    from torchmend.codemods.engine import unified_diff

    def diff_of(path: str) -> Callable[[str, str], str]:
        return lambda b, a: unified_diff(fixes.session.display(path), b, a)

    return b"".join(
        sources.encode_diff(diff_of(path), before, after, sources.source_encoding(path))
        for path, (before, after) in fixes.changes().items()
    )
