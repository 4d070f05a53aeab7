"""What a command runs with, resolved once: the command line over `[tool.torchmend]` over the defaults
(`config.Config.resolve(cli_values)` builds it; `Settings()` is the defaults alone). Frozen values that the pipeline
and the commands read; nothing here reads a file or prints.

    settings.selection     which rules are reported: select / ignore prefixes and the per-file ignores
    settings.tolerance     how far losses and final parameters may move (rtol, atol)
    settings.backend       the scan's backend; settings.verify_backend the verification runs' (None: the script's own)
    settings.budget        steps and timeout of each child run (settings.steps, settings.timeout)
    settings.unsafe, .random_stream, .remote, .base, .exclude, .project_root

Selection, Tolerance and Budget are torchmend.values': the ground floor every stage takes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from torchmend.values import Budget, Selection, Tolerance, glob_matches, relative_to


@dataclass(frozen=True)
class Settings:
    selection: Selection = field(default_factory=Selection)
    tolerance: Tolerance = field(default_factory=Tolerance)
    backend: str | None = None  # every torch.compile call's backend in the scan (None: the script's own)
    verify_backend: str | None = None  # the verification runs' (fix falls back on `backend`)
    steps: int | None = None
    timeout: float | None = None
    unsafe: bool = False  # --yes/--diff and lint --fix apply the unsafe changes too
    random_stream: bool = False  # ... and the changes of the random stream
    project_root: Path | None = None  # --project / project-root (absolute); None: found from the script
    remote: str = "origin"
    base: str | None = None  # the branch a pull request goes into
    exclude: tuple[str, ...] = ()  # globs lint's file walk leaves out
    exclude_base: Path | None = None

    def excluded(self, path: str | Path) -> bool:
        """Whether `exclude` leaves `path` out (a pattern that matches a folder leaves out what is in it)."""
        rel = relative_to(self.exclude_base, path)
        return rel is not None and any(glob_matches(p, rel) for p in self.exclude)

    @property
    def budget(self) -> Budget:
        """How long each child run may go on (steps, timeout)."""
        return Budget(self.steps, self.timeout)
