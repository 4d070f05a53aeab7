"""scan(), scan_trace(), scan_events() and select(): what a run (or a trace) showed, the selection and the
suppression comments applied once."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from torchmend.model import EndedBy, Finding, Placement, Summary
from torchmend.pipeline.inputs import settings_for
from torchmend.project import Project
from torchmend.settings import Settings
from torchmend.suppress import SCAN_HINT, Applied, apply_suppressions

if TYPE_CHECKING:  # heavy (libcst, the runner): imported by the stage that needs it
    from torchmend.profiler.pathmap import Mapping
    from torchmend.profiler.runner import Progress, RunOutcome, RunSpec
    from torchmend.profiler.tracedir import Trace


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
    chosen = settings_for(project, settings).selection
    return apply_suppressions(findings, project.folder, chosen, files=files, hint=hint)


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

    @cached_property
    def placements(self) -> tuple[Placement, ...]:
        """Where a whole-model compile broke inside, the submodules that compiled without a break
        (profiler/placement.py)."""
        from torchmend.profiler.placement import placements

        return placements(self.outcome.events)

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
    guessed = pathmap.guess(recorded, project.folder, maps)
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
