"""What a command runs with, resolved once: the command line over `[tool.torchmend]` over the defaults
(`config.Config.resolve(cli_values)` builds it; `Settings()` is the defaults alone). Frozen values that the pipeline
and the commands read; nothing here reads a file or prints.

    settings.selection     which rules are reported: select / ignore prefixes and the per-file ignores
    settings.tolerance     how far losses and final parameters may move (rtol, atol)
    settings.backend       the scan's backend; settings.verify_backend the verification runs' (None: the script's own)
    settings.steps, .timeout, .unsafe, .random_stream, .remote, .base, .exclude, .project_root

The globs of per-file-ignores and exclude (relative to the pyproject.toml's folder) are matched here too.
"""

from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from torchmend.verify.numerics import ATOL, RTOL


@dataclass(frozen=True)
class Selection:
    """The rules a command reports: `select` (code prefixes; None: every rule), `ignore`, and per-file ignores
    (glob, code prefixes) whose globs are relative to `base` (the configuration's folder)."""

    select: tuple[str, ...] | None = None
    ignore: tuple[str, ...] = ()
    per_file: tuple[tuple[str, tuple[str, ...]], ...] = ()
    base: Path | None = None

    def selects(self, code: str, path: str | Path | None = None) -> bool:
        """Whether `code` is reported (in `path`, when given: its per-file ignores count too)."""
        if self.select and not code.startswith(self.select):
            return False
        if code.startswith(self.ignore):
            return False
        return path is None or not code.startswith(tuple(self.ignored_codes(path)))

    def ignored_codes(self, path: str | Path) -> list[str]:
        """The code prefixes that the per-file ignores leave out in `path` (absolute, or relative to the cwd)."""
        rel = relative_to(self.base, path)
        if rel is None:
            return []
        return [code for pattern, codes in self.per_file if glob_matches(pattern, rel) for code in codes]

    def ignoring(self, *codes: str) -> Selection:
        """This selection with more code prefixes ignored (the pytest plugin's marker adds its own)."""
        return Selection(self.select, (*self.ignore, *codes), self.per_file, self.base)


@dataclass(frozen=True)
class Tolerance:
    """How far losses and final parameters may move between the original and the patched run."""

    rtol: float = RTOL
    atol: float = ATOL


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


def relative_to(base: Path | None, path: str | Path) -> str | None:
    """`path` as a posix path relative to `base`; None when there is no base or the path is outside it."""
    if base is None:
        return None
    rel = os.path.relpath(os.path.abspath(path), base)
    return None if rel.startswith("..") else Path(rel).as_posix()


# ------------------------------------------------------------------------------------------------ globs


@functools.lru_cache(maxsize=1024)  # lint asks for every file: each pattern is compiled once
def _glob_regex(pattern: str) -> re.Pattern[str]:
    out, i = [], 0
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
            continue
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            end = pattern.find("]", i + 1)
            if end == -1:
                out.append(re.escape(c))
            else:
                body = pattern[i + 1 : end]
                out.append("[" + ("^" + body[1:] if body.startswith("!") else body) + "]")
                i = end
        else:
            out.append(re.escape(c))
        i += 1
    return re.compile("".join(out) + r"\Z")


def glob_matches(pattern: str, rel: str) -> bool:
    """Whether a glob (relative to the config's directory; `**` crosses folders, `*` does not) matches the posix
    path `rel` or a folder it is in. A pattern without a slash matches a name at any depth (`__init__.py`,
    `.venv`), as in Ruff and .gitignore."""
    pattern = pattern.strip().removeprefix("./").rstrip("/")
    if not pattern:
        return False
    regex = _glob_regex(pattern)
    parts = rel.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    if "/" not in pattern:
        return any(regex.match(name) for name in parts)
    return any(regex.match(p) for p in prefixes)
