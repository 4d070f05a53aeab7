"""torchmend as a Python API: the stages behind `torchmend fix`, returning values and yielding events.

    scan()           run the script in a child process under the collector: findings and counts (a Scan)
    scan_trace()     the same from a TORCH_TRACE directory written elsewhere (nothing runs)
    scan_events()    the same from the events of a run already made (`scan --keep-events`)
    select()         the one stage that applies the selection (select, ignore, per-file ignores) and the
                     suppression comments; the scans above apply it to their findings, lint's callers call it
    propose()        a proposed change, or why there is none, for every finding (Fixes)
    review()         the accept/reject loop as a generator (send it y/n/a/d/q); accept_all() for --yes
    verify_rounds()  re-run before/after with the accepted changes served from memory; events per round
    write()          write the changed files all or nothing, and save the undo record

Every stage takes the project (torchmend.project.Project; a plain root path stands for the project there, its
[tool.torchmend] read from that folder) and the resolved settings (torchmend.settings.Settings; None: the project's
configuration alone), so that the CLI and a caller of this module get the same answers. Nothing here prints,
prompts or exits: torchmend/cli parses options, renders these values and maps them to exit codes. The parent process never imports torch (the script and torch live in the child), and importing
this module imports neither libcst nor the runner: each stage imports what it needs. docs/api.md has an
example.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Union

from torchmend import sources, store
from torchmend.model import EndedBy, Finding, Summary
from torchmend.project import Project
from torchmend.settings import Settings
from torchmend.suppress import SCAN_HINT, Applied, apply_suppressions
from torchmend.verify.numerics import ATOL, RTOL
from torchmend.versions import installed_torch  # noqa: F401 (the API's name for it: docs/api.md)

if TYPE_CHECKING:  # heavy (libcst, the runner): imported by the stage that needs it
    from torchmend.codemods.base import NoFix, Proposal
    from torchmend.codemods.engine import Session
    from torchmend.codemods.review import Ask, Decision
    from torchmend.profiler.pathmap import Mapping
    from torchmend.profiler.runner import Progress, RunOutcome, RunSpec
    from torchmend.profiler.tracedir import Trace
    from torchmend.verify.attribution import ChangeEffect
    from torchmend.verify.compare import Verification
    from torchmend.verify.failure import RunFailure
    from torchmend.verify.runs import ArmRun

WriteRefused = store.WriteRefused  # raised by write(): nothing was written, the message says why
ProjectBusy = store.ProjectBusy  # a WriteRefused: another torchmend held the project's lock too long
UNSAFE_OPTION = "--unsafe-fixes"  # the one spelling of the opt-in, in what a refused unsafe change says


def _root(project: Project | Path) -> Path:
    return project.root if isinstance(project, Project) else Path(project)


def _settings(project: Project, settings: Settings | None) -> Settings:
    return settings if settings is not None else project.config.resolve()


# ---------------------------------------------------------------------------------------------------- select


def select(
    findings: Iterable[Finding],
    project: Project | Path,
    settings: Settings | None = None,
    *,
    files: Iterable[str] | None = None,
    hint: str | None = None,
) -> Applied:
    """The one stage that decides what is reported and fixed: (kept, suppressed, unused). A finding is suppressed
    when the selection leaves its rule out (select, ignore, the per-file ignores) or a `# torchmend: ignore[...]`
    comment covers its line; a comment that suppressed nothing is an informational TM903 finding (`unused`; `hint`
    is added to its reason). `files`: where else to look for comments (default: the files the findings point at)."""
    project = Project.of(project)
    chosen = _settings(project, settings).selection
    return apply_suppressions(findings, project.root, selection=chosen, files=files, hint=hint)


# ------------------------------------------------------------------------------------------------------ scan


@dataclass
class Scan:
    """What one run (or one trace) showed: the findings the selection and the suppression comments keep (select()),
    those they left out, and the comments that suppressed nothing."""

    findings: list[Finding]
    summary: Summary
    outcome: RunOutcome
    suppressed: list[Finding] = field(default_factory=list)
    unused: list[Finding] = field(default_factory=list)  # TM903: a suppression comment that suppressed nothing
    spec: RunSpec | None = None  # the run as asked for (None: from a trace)
    cold: bool = False  # compiled with empty caches of its own: it can stand in for verify's first before-run
    trace: Trace | None = None  # scan_trace: the logs read instead of a run
    path_maps: tuple[Mapping, ...] = ()  # scan_trace: every mapping applied, given and guessed
    guessed: tuple[Mapping, ...] = ()  # scan_trace: the mappings guessed from the recorded paths
    unmapped: tuple[str, ...] = ()  # scan_trace: recorded source files not found in this checkout

    @property
    def reported(self) -> list[Finding]:
        """What a report lists: the kept findings, then the unused suppressions."""
        return self.findings + self.unused

    @property
    def failed(self) -> bool:
        return self.outcome.failed

    @property
    def compiled(self) -> bool:
        """Whether the run compiled anything (or hit the recompile limit): otherwise there is nothing to fix."""
        return self.summary.compiles > 0 or self.summary.recompile_limit_hits > 0


def _analysed(
    events: list[dict[str, Any]], project: Project, settings: Settings | None, ended_by: str, wall_s: float
) -> tuple[Applied, Summary]:
    from torchmend.profiler.findings import analyse

    findings, summary = analyse(events, project.root, ended_by, wall_s)
    return select(findings, project, settings, hint=SCAN_HINT), summary


def scan(
    spec: RunSpec,
    root: Project | Path,
    settings: Settings | None = None,
    *,
    on_progress: Callable[[Progress], None] | None = None,
    keep_events: Path | None = None,
    own_caches: bool = True,
) -> Scan:
    """Run the script under the collector and analyse what it did. `root` is the project: findings in files
    under it are the user's to fix. With `own_caches` (the default) the run compiles with empty inductor and
    triton caches of its own, so verify_rounds() can use it as its first before-run (a warm cache would make
    the original look faster). How the run ended is `scan.outcome.ended_by`; nothing is raised for it. The
    findings are select()ed with `settings` (None: the project's configuration)."""
    from torchmend.profiler.runner import run

    project = Project.of(root)
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
    (kept, suppressed, unused), summary = _analysed(outcome.events, project, settings, outcome.ended_by, outcome.wall_s)
    return Scan(kept, summary, outcome, suppressed, unused, spec=spec, cold=caches is not None)


def scan_events(
    events: list[dict[str, Any]],
    root: Project | Path,
    settings: Settings | None = None,
    *,
    ended_by: str = "finished",
    wall_s: float = 0.0,
) -> Scan:
    """The same from the events of a run made already (`torchmend scan --keep-events DIR` keeps them in
    DIR/events.jsonl: profiler.events.read_events reads them); nothing runs."""
    from torchmend.profiler.runner import RunOutcome

    (kept, suppressed, unused), summary = _analysed(events, Project.of(root), settings, ended_by, wall_s)
    return Scan(kept, summary, RunOutcome(events, EndedBy(ended_by), None, wall_s, "", {}), suppressed, unused)


def scan_trace(
    trace_dir: Path, root: Project | Path, path_maps: Sequence[Mapping] = (), settings: Settings | None = None
) -> Scan:
    """Findings from a TORCH_TRACE directory, its source paths mapped onto this checkout (`path_maps`, plus
    mappings guessed from recorded files that do not exist here). Raises profiler.tracedir.TraceError."""
    from torchmend.profiler import pathmap
    from torchmend.profiler.runner import RunOutcome
    from torchmend.profiler.tracedir import read_trace

    project = Project.of(root)
    root = project.root
    trace = read_trace(trace_dir)
    events = trace.events()
    recorded = pathmap.recorded_paths(events)
    maps = list(path_maps)
    guessed = pathmap.guess(recorded, root, maps)
    maps += guessed
    missing = pathmap.unmapped(recorded, maps)
    events = pathmap.apply(events, maps)
    (kept, suppressed, unused), summary = _analysed(events, project, settings, "trace", 0.0)
    return Scan(
        kept,
        summary,
        RunOutcome(events, EndedBy.TRACE, None, 0.0, "", {}),
        suppressed,
        unused,
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

    def change_diffs(self) -> list[tuple[Proposal, str]]:
        """Each accepted proposal with its own unified diff (on top of the ones accepted before it)."""
        from torchmend.codemods.engine import unified_diff

        return [(p, unified_diff(self.session.display(p.path), a, b)) for p, a, b in self.session.steps()]

    def diff(self) -> str:
        """One unified diff of the accepted changes (applies with `git apply` from the project root)."""
        from torchmend.codemods.engine import unified_diff

        return "".join(
            unified_diff(self.session.display(path), before, after) for path, (before, after) in self.changes().items()
        )


def propose(
    findings: Iterable[Finding],
    root: Project | Path,
    select: list[str] | None = None,
    ignore: list[str] | None = None,
    read: Callable[[str], str] = sources.read_source,
    torch_version: str | None = None,
) -> Fixes:
    """A proposal (or a NoFix with the reason) for every finding; nothing is accepted yet. `torch_version`: the
    release the code runs on (the scanned run's, or installed_torch()), whose spelling of the torch APIs the fixes
    write (analysis/torch_api.py); None: the newest read. The findings are taken as they are: a scan's are
    select()ed already; `select`/`ignore` skip rules here too (for findings from elsewhere)."""
    from torchmend.analysis.source import Context
    from torchmend.codemods.base import NoFix, Proposal
    from torchmend.codemods.engine import Session, span
    from torchmend.profiler.hotspots import parse_version

    session = Session(Context(str(_root(root)), read, torch_version=parse_version(torch_version)))
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


def accept_all(fixes: Fixes, unsafe: bool = False, random_stream: bool = False) -> list[Decision]:
    """Accept every safe proposal (the unsafe ones too with `unsafe`, the random-stream ones only with
    `random_stream`: Settings.unsafe and .random_stream), skipping those that overlap."""
    from torchmend.codemods.review import accept_all as accept

    return accept(fixes.session, fixes.proposals, unsafe, UNSAFE_OPTION, random_stream)


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
    root: Project | Path,
    repeat: int = 1,
    rtol: float = RTOL,
    atol: float = ATOL,
    reuse_before: tuple[ArmRun, ...] = (),
    on_run: Callable[[RunStarted], None] | None = None,
    reference: bool = False,
    eager: dict[str, ArmRun] | None = None,
) -> tuple[Verification, list[ArmRun], list[ArmRun]]:
    """Run both arms `repeat` times, interleaved, and judge: (verdict, before-runs, after-runs).
    `reuse_before` stands in for the first before-runs (runs already made with the same spec). With `reference`,
    numbers that differ get the eager reference (verify/reference.py): both scripts run once more without
    compiling; the original's compiled-vs-eager spread is the noise band the numbers are judged within, and a
    refusal says whose difference it is. `eager` keeps the original's eager run between calls ("before")."""
    from torchmend.verify.compare import judge
    from torchmend.verify.runs import run_arms

    root = _root(root)
    total = repeat * 2 - min(len(reuse_before), repeat)
    count = iter(range(1, total + 1))

    def started(arm: str, i: int) -> None:
        if on_run is not None:
            on_run(RunStarted(arm, i, next(count), total))

    b, a = run_arms(before, after, root, repeat, started, reuse_before)
    v = judge(b, a, rtol, atol, root)
    n = v.numerics
    if not reference or v.failure is not None or n is None or n.equal or not n.compared:
        return v, b, a
    return _with_reference(v, before, after, b, a, root, rtol, atol, on_run, {} if eager is None else eager), b, a


def _with_reference(
    v: Verification,
    before: RunSpec,
    after: RunSpec,
    b: list[ArmRun],
    a: list[ArmRun],
    root: Path,
    rtol: float,
    atol: float,
    on_run: Callable[[RunStarted], None] | None,
    eager: dict[str, ArmRun],
) -> Verification:
    """The verdict again with the eager reference: equal within the noise band, or refused with whose it is."""
    from torchmend.verify.compare import REFUSED as REFUSED_VERDICT
    from torchmend.verify.compare import judge, restored_verdict
    from torchmend.verify.reference import EAGER_COMPILE, reference, spread, tolerance
    from torchmend.verify.runs import run_one

    def one(spec: RunSpec, arm: str) -> ArmRun:
        if on_run is not None:
            on_run(RunStarted(arm, 0, 1, 1))
        return run_one(replace(spec, compile=EAGER_COMPILE), root, arm)

    if "before" not in eager:
        eager["before"] = one(before, "before (eager)")
    ref = reference(b[0], eager["before"], a[0], one(after, "after (eager)"), rtol, atol)
    restored = restored_verdict(ref, b, a, root)
    if restored is not None:
        return restored
    if ref.band is not None and ref.band > rtol:
        banded = judge(b, a, tolerance(rtol, ref.band), atol, root)
        if banded.numerics is not None and banded.numerics.equal:
            own = ref.compiled
            same = (
                ""
                if own is None
                else "; the patched compiled run equals its eager run bit for bit"
                if spread(own) == 0
                else f"; the patched compiled run differs from its eager run by {spread(own):.2g} relative"
            )
            banded.notes.insert(0, f"numerics equal within the noise band ({ref.band_text()}{same})")
            return replace(banded, reference=ref)
    v.notes.append(ref.band_text())
    if v.verdict == REFUSED_VERDICT:
        v.reasons.append(ref.describe())
    return replace(v, reference=ref)


@dataclass(frozen=True)
class Round:
    """One verification round: the verdict and, unless it refused, what each accepted change did."""

    number: int  # 1, 2, ...
    verification: Verification
    effects: tuple[ChangeEffect, ...]  # empty when the verdict is a refusal


@dataclass(frozen=True)
class Retry:
    """The changes that removed none of their findings were withdrawn; the rest is verified once more."""

    withdrawn: tuple[Proposal, ...]


@dataclass(frozen=True)
class Probe:
    """While looking for the change a refusal is due to: `changes` alone, verified (the after-arm only)."""

    changes: tuple[Proposal, ...]
    verification: Verification


@dataclass(frozen=True)
class Refusal:
    """A change verification refused, how it was singled out, and why (what its verdict said)."""

    proposal: Proposal
    found_by: str  # how: "the failure names its line" | "the only change" | "bisection" | "refused only together"
    reasons: tuple[str, ...]
    fallback: Proposal | None = None  # the next candidate for its findings, tried in its place


@dataclass(frozen=True)
class Dropped:
    """The changes a refusal was due to were withdrawn (their fallbacks, if any, take their place); the rest is
    verified again."""

    refused: tuple[Refusal, ...]


VERIFIED, REFUSED, NONE_HELPED, STILL_UNHELPFUL = "verified", "refused", "none_helped", "still_unhelpful"
MAX_ROUNDS = 6  # verification rounds (refusals recovered from, and the one retry without unhelpful changes)
MAX_PROBES = 6  # runs spent singling out the changes one refusal is due to


@dataclass(frozen=True)
class Verified:
    """The last event of verify_rounds(). `outcome`: verified (write `accepted`), refused (the verdict
    refused the changes), none_helped (every change was withdrawn), still_unhelpful (after the second
    round a change still removed none of its findings). `tried`: every change refused on the way, and why."""

    outcome: str
    accepted: tuple[Proposal, ...]  # what is left accepted in the session
    verification: Verification  # the last round's
    tried: tuple[Refusal, ...] = ()

    @property
    def ok(self) -> bool:
        return self.outcome == VERIFIED


Event = Union[Round, Retry, Probe, Dropped, Verified]


class _Judge:
    """The runs of one verify_rounds(): the original's compiled runs (reused), its eager run (made once, when a
    difference in numbers first needs the eager reference), and a verdict for any set of the changes."""

    def __init__(
        self,
        before: RunSpec,
        root: Path,
        repeat: int,
        rtol: float,
        atol: float,
        on_run: Callable[[RunStarted], None] | None,
        reuse: tuple[ArmRun, ...],
    ) -> None:
        self.before, self.root, self.repeat, self.rtol, self.atol = before, root, repeat, rtol, atol
        self.on_run, self.reuse = on_run, reuse
        self.eager: dict[str, ArmRun] = {}  # the original's eager run, made once

    def verify(
        self, session: Session, proposals: Sequence[Proposal], versions: dict[str, str]
    ) -> tuple[Verification, list[ArmRun], list[ArmRun]]:
        """These changes applied, against the original: the verdict (with the eager reference and the noise band
        when the numbers differ, and the known PyTorch hazard of a change's shape when the compiler is to blame),
        the before-runs and the after-runs."""
        from torchmend.codemods.base import RANDOM_STREAM
        from torchmend.profiler.hazards import hazards_for
        from torchmend.verify.compare import REFUSED as REFUSED_VERDICT
        from torchmend.verify.failure import caused_by
        from torchmend.verify.reference import COMPILER, KNOWN_DIVERGENCES, RESTORED

        after = replace(self.before, overlay=_overlay(session, proposals))
        if any(p.safety == RANDOM_STREAM for p in proposals):
            strict = [p for p in proposals if p.safety != RANDOM_STREAM]
            restored: list[str] = []
            if strict:  # the strict changes keep the strict gate: verified alone first, number for number
                v, b_runs, a_runs = self.verify(session, strict, versions)
                if v.verdict == REFUSED_VERDICT:
                    # its failing line is one of the strict-only text, not of every change's: the culprit search
                    # bisects instead of reading it
                    failure = v.failure and replace(v.failure, line=0)
                    return replace(v, failure=failure), b_runs, a_runs
                if v.reference is not None and v.reference.whose == RESTORED:  # checked against the eager run
                    restored = [f"the other changes, verified alone first: {v.notes[0]}"]
            dv, b_runs, a_runs = self._in_distribution(after)
            dv.notes[:0] = restored
            return dv, b_runs, a_runs
        v, b_runs, a_runs = verify(
            self.before, after, self.root, self.repeat, self.rtol, self.atol, self.reuse, self.on_run, True, self.eager
        )
        self.reuse = tuple(b_runs)
        why = caused_by(v.failure, {p.shape for p in proposals}) if v.failure is not None else ""
        if why:
            v.reasons[:] = [r + f"; {why}" if r.startswith("the patched script failed") else r for r in v.reasons]
        if v.reference is not None and v.reference.whose == COMPILER:
            known = {h.name: h for p in proposals for h in hazards_for(p.shape, versions)}
            hazards = "".join(f"; a known PyTorch hazard: {h.describe()}" for h in known.values())
            v.reasons[:] = [r + hazards if r.startswith("the compiler mis-compiled") else r for r in v.reasons]
        if v.reference is not None and v.reference.whose == RESTORED:
            causes = dict.fromkeys(KNOWN_DIVERGENCES[p.shape] for p in proposals if p.shape in KNOWN_DIVERGENCES)
            said = v.reference.describe()
            v.notes[:] = [v.reference.describe("; ".join(causes)) if n == said else n for n in v.notes]
        return v, b_runs, a_runs

    def _in_distribution(self, after: RunSpec) -> tuple[Verification, list[ArmRun], list[ArmRun]]:
        """A change of the random stream among these: each arm once per seed, the counts judged on the first
        seed's runs, the numbers as distributions (verify/stochastic.py) instead of bit for bit."""
        from torchmend.verify.compare import REFUSED as REFUSED_VERDICT
        from torchmend.verify.compare import judge
        from torchmend.verify.stochastic import compare_distributions, failed_seeds, seeded_runs, seeds_for

        seeds = seeds_for(self.before)
        total = len(seeds) * 2 - (1 if self.reuse and self.before.seed is not None else 0)
        count = iter(range(1, total + 1))

        def started(arm: str, i: int) -> None:
            if self.on_run is not None:
                self.on_run(RunStarted(f"{arm} (seed {seeds[i]})", i, next(count), total))

        reuse = self.reuse[0] if self.reuse and self.before.seed is not None else None
        b, a = seeded_runs(self.before, after, self.root, seeds, reuse, started)
        self.reuse = (b[0],)
        # counts and failures; the numbers are judged below. A huge finite tolerance, not inf: inf * 0 is nan, which
        # would refuse a parameter whose magnitude is 0 (measured on SeamlessM4TModel).
        v = judge(b[:1], a[:1], 1e300, 1e300, self.root)
        dist = compare_distributions(seeds, [r.end for r in b], [r.end for r in a])
        failed = failed_seeds(seeds, b, a, self.root)
        if failed:  # a run without losses is its failure, named with its seed (a LayerDrop path that crashes)
            dist = replace(dist, problem=failed)
        v.numerics, v.distribution = None, dist
        if not dist.equivalent and v.failure is None:
            v.reasons.append(dist.describe())
            v.verdict = REFUSED_VERDICT
        return v, b[:1], a[:1]


def _overlay(session: Session, proposals: Sequence[Proposal]) -> tuple[tuple[str, str], ...]:
    """(path, text) for every file these proposals change, as the child serves them."""
    from torchmend.codemods.engine import apply

    out = []
    for path in dict.fromkeys(p.path for p in proposals):
        source = session.ctx.file(path)
        text = apply(source, [p for p in proposals if p.path == path])
        if text != source.text:
            out.append((source.path, text))
    return tuple(out)


def _by_line(session: Session, proposals: Sequence[Proposal], failure: RunFailure | None) -> list[Proposal]:
    """The changes whose edited lines hold the line the patched run failed at (mapped back to the original)."""
    from torchmend.codemods.engine import span
    from torchmend.verify.attribution import new_to_old

    if failure is None or not failure.line:
        return []
    changes = session.changed()
    path = next((p for p in changes if os.path.abspath(p) == failure.path), None)
    if path is None:
        return []
    old = new_to_old(*changes[path]).get(failure.line, failure.line)
    mine = [p for p in proposals if p.path == path]
    spans = {id(p): span(session.ctx.file(path), p) for p in mine}
    exact = [p for p in mine if spans[id(p)][0] <= old <= spans[id(p)][1]]
    return exact or [p for p in mine if spans[id(p)][0] <= old <= spans[id(p)][1] + 1]


def _culprits(
    judge: _Judge, session: Session, v: Verification, versions: dict[str, str], probes: list[Probe]
) -> tuple[list[Proposal], str, Verification]:
    """The accepted changes a refusal is due to, how they were found, and the verdict that refused them: the
    change whose lines the failure names; the only change; else a bisection over the changes, each half verified
    alone (MAX_PROBES runs at most); a refusal no half shows alone is the whole set's."""
    from torchmend.verify.compare import REFUSED as REFUSED_VERDICT

    accepted = list(session.accepted)
    named = _by_line(session, accepted, v.failure)
    if named:
        return named, "the failure names its line", v
    if len(accepted) == 1:
        return accepted, "the only change", v
    suspects, verdict = accepted, v
    while len(suspects) > 1 and len(probes) < MAX_PROBES:
        half = len(suspects) // 2
        found: tuple[list[Proposal], Verification] | None = None
        for part in (suspects[:half], suspects[half:]):
            if len(probes) >= MAX_PROBES:
                break
            pv, _, _ = judge.verify(session, part, versions)
            probes.append(Probe(tuple(part), pv))
            if pv.verdict == REFUSED_VERDICT:
                found = (part, pv)
                break
        if found is None:
            break  # neither half is refused alone (or the probes are spent): the changes fail together
        suspects, verdict = found
    return suspects, ("bisection" if len(suspects) < len(accepted) else "refused only together"), verdict


def verify_rounds(
    scan: Scan,
    fixes: Fixes,
    root: Project | Path,
    settings: Settings | None = None,
    *,
    backend: str | None = None,
    repeat: int = 1,
    rtol: float | None = None,
    atol: float | None = None,
    on_run: Callable[[RunStarted], None] | None = None,
) -> Iterator[Event]:
    """Run the original and the patched sources (served from memory: nothing is written) and judge, round by
    round. A refusal costs only the changes it is due to (found by the failing line, else by bisection):
    they are withdrawn, their next candidate fix (`Proposal.fallbacks`) takes their place, and the rest is
    verified again. A change whose targeted findings are all still there after the patch did not help: it is
    withdrawn and the rest verified again, once. Yields a Round per round (Probes while bisecting, Dropped after
    a refusal, Retry before the retry) and a Verified last. `backend` overrides the script's own for these runs
    (None keeps it); the scan is reused as the first before-run when it ran cold on the same backend. `rtol` and
    `atol` default to the settings' tolerance (None: the project's configuration's)."""
    from torchmend.codemods.engine import Conflict
    from torchmend.verify.attribution import attribute
    from torchmend.verify.compare import REFUSED as REFUSED_VERDICT
    from torchmend.verify.runs import from_outcome

    if scan.spec is None:
        raise ValueError("a scan from a trace ran nothing here: there is no run to compare against")
    project = Project.of(root)
    root = project.root
    tolerance = _settings(project, settings).tolerance
    rtol = tolerance.rtol if rtol is None else rtol
    atol = tolerance.atol if atol is None else atol
    session = fixes.session
    before = replace(scan.spec, backend=backend, overlay=())
    reuse: tuple[ArmRun, ...] = (
        (from_outcome("before", 0, scan.outcome, root),) if scan.cold and backend == scan.spec.backend else ()
    )
    judge = _Judge(before, root, repeat, rtol, atol, on_run, reuse)
    versions = {"torch": scan.summary.torch_version or ""}
    tried: list[Refusal] = []
    retried = False
    for number in range(1, MAX_ROUNDS + 1):
        changes = session.changed()
        v, _, a_runs = judge.verify(session, list(session.accepted), versions)
        if v.verdict == REFUSED_VERDICT:
            yield Round(number, v, ())
            probes: list[Probe] = []
            culprits, found_by, why = _culprits(judge, session, v, versions, probes)
            yield from probes
            # Culprits with a next candidate are swapped for it first and the others kept: changes refused only
            # together may verify once one of them takes another form. Without candidates, the culprits go.
            swappable = [p for p in culprits if any(_no_less_safe(fb, p) for fb in p.fallbacks)]
            if swappable:
                culprits = swappable
            elif len(culprits) == len(session.accepted):
                tried += [Refusal(p, found_by, tuple(why.reasons)) for p in culprits]
                yield Verified(REFUSED, tuple(session.accepted), v, tuple(tried))
                return
            refused = []
            for p in culprits:
                session.withdraw(p)
                fallback = next((fb for fb in p.fallbacks if _no_less_safe(fb, p)), None)
                if fallback is not None:
                    rest = tuple(fb for fb in p.fallbacks if fb is not fallback)
                    fallback = replace(fallback, findings=p.findings, fallbacks=rest)
                    try:
                        session.accept(fallback)
                    except Conflict:
                        fallback = None
                refused.append(Refusal(p, found_by, tuple(why.reasons), fallback))
            tried += refused
            yield Dropped(tuple(refused))
            if not session.accepted:
                yield Verified(REFUSED, (), v, tuple(tried))
                return
            continue
        effects = attribute(list(session.accepted), a_runs[0].findings, changes)
        yield Round(number, v, tuple(effects))
        useless = tuple(e.proposal for e in effects if not e.helped)
        if not useless:
            yield Verified(VERIFIED, tuple(session.accepted), v, tuple(tried))
            return
        for p in useless:
            session.withdraw(p)
        if not session.accepted or retried:
            break
        retried = True
        yield Retry(useless)
    else:
        yield Verified(REFUSED, tuple(session.accepted), v, tuple(tried))
        return
    yield Verified(STILL_UNHELPFUL if session.accepted else NONE_HELPED, tuple(session.accepted), v, tuple(tried))


def _no_less_safe(fallback: Proposal, p: Proposal) -> bool:
    """A fallback takes a refused change's place only when it is no less safe (what the user accepted covers it)."""
    from torchmend.codemods.base import SAFE

    return fallback.safety == SAFE or p.safety != SAFE


# ----------------------------------------------------------------------------------------------------- write


def write(fixes: Fixes, root: Project | Path, report: str | None = None) -> store.UndoRecord:
    """Write every file the accepted changes touch, all or nothing (raises WriteRefused, and then nothing was
    written), journaled: the undo record exists before the first file is replaced (store.write_fix; `torchmend
    undo` puts the files back from it; `record.patch` is the diff). `report` (Markdown, e.g. torchmend.vcs.body.fix_report) is kept in the record for `torchmend pr`."""
    summary = "; ".join(f"{p.rule} {fixes.where(p)}" for p in fixes.session.accepted)
    return store.write_fix(fixes.changes(), _root(root), patch_bytes(fixes), summary, report=report)


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
