"""The ground floor of values every stage takes: plain, frozen, and importing nothing of torchmend, so settings,
config, the stages and the CLI all stand on it.

    Tolerance(rtol, atol)      how far losses and final parameters may move: |a - b| <= atol + rtol * max(|a|, |b|)
    Selection(select, ignore, per_file, base)
                               which rule codes a command reports; `selects(code, path)` is the one decision
    Budget(steps, timeout)     how long a child run may go on
    Root(path)                 the project's folder, and how a path under it is shown (`display`)

The globs of per-file ignores and exclude (relative to the pyproject.toml's folder) are matched here too
(`glob_matches`, `relative_to`).
"""

from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Tolerance:
    """How far losses and final parameters may move between two runs that compute the same thing."""

    rtol: float = 1e-4
    atol: float = 1e-6


@dataclass(frozen=True)
class Selection:
    """The rules a command reports: `select` (code prefixes; None or empty: every rule), `ignore`, and per-file
    ignores (glob, code prefixes) whose globs are relative to `base` (the configuration's folder)."""

    select: tuple[str, ...] | None = None
    ignore: tuple[str, ...] = ()
    per_file: tuple[tuple[str, tuple[str, ...]], ...] = ()
    base: Path | None = None

    @classmethod
    def of(cls, select: list[str] | None = None, ignore: list[str] | None = None) -> Selection:
        """A selection from lists as --select/--ignore give them (no per-file ignores)."""
        return cls(None if select is None else tuple(select), tuple(ignore or ()))

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
class Budget:
    """How long a child run may go on: training steps (None: the script's own) and seconds (None: no limit)."""

    steps: int | None = None
    timeout: float | None = None


@dataclass(frozen=True)
class Root:
    """The project's folder (absolute, links not followed) and how a path is shown to its user."""

    path: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", Path(os.path.abspath(self.path)))

    def __str__(self) -> str:
        return str(self.path)

    def contains(self, path: str | Path) -> bool:
        """Whether `path` (absolute, as recorded; links not followed) is under the folder."""
        return str(path).startswith(str(self.path) + os.sep)

    def display(self, path: str | Path) -> str:
        """A path as the project's user reads it: relative to the folder when it is under it, else as it is. Links
        are not followed: a caller that shows where a file really is passes its realpath to a real root."""
        return os.path.relpath(path, self.path) if self.contains(path) else str(path)

    @classmethod
    def of(cls, root: Root | str | Path) -> Root:
        """A caller's root as a Root: the public functions also take a project's folder as a path."""
        return root if isinstance(root, Root) else cls(Path(root))

    def real(self) -> Root:
        """This folder with its links followed (the root a realpath is shown against)."""
        return Root(Path(os.path.realpath(self.path)))


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
