"""`lint_paths`: the static check of a project, from paths to findings. Reads files, never runs or imports them.

    files     every Python file of the project (files.py: git's view, virtualenvs and caches left out)
    triage    which of them can compile anything (triage.py: a text hint, then Python's own parser)
    regions   for each of those, libcst and the shared analysis: what it compiles and what that code calls,
              across files, parsed on demand and once per run (regions.py)
    checks    what each compiled def does that breaks a graph or recompiles (checks.py, optimizers.py)

Compile calls are looked for in the whole project, so a model file given alone (as a pre-commit hook gives
changed files) is still known to be compiled by the training script; findings are kept for the given paths.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from torchmend import sources
from torchmend.lint.cache import LintCache
from torchmend.lint.files import python_files
from torchmend.lint.unparsable import unparsable
from torchmend.model import Finding
from torchmend.values import Root, Selection

log = logging.getLogger("torchmend")

_ORDER = {"likely": 0, "possible": 1}


@dataclass
class LintResult:
    """What lint found. `files_checked`: the Python files under the given paths; `files_parsed`: those libcst
    parsed in this run (the rest were not needed, or came from the cache); `errors`: internal errors, one line
    per compiling file whose analysis failed (its other files were still checked)."""

    findings: list[Finding]
    files_checked: int
    files_parsed: int = 0
    compiling_files: int = 0
    cached: int = 0
    seconds: float = 0.0
    errors: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)  # the Python files under the given paths, absolute
    hidden: int = 0  # possible findings left out of the report (the CLI without --show-possible)


def _under(path: Path, roots: Sequence[Path]) -> bool:
    return any(path == r or r in path.parents for r in roots)


def lint_paths(
    paths: Sequence[Path | str],
    root: Root | Path | str,
    *,
    selection: Selection = Selection(),
    cache: bool = True,
    read: Callable[[str], str] = sources.read_source,
    excluded: Callable[[Path], bool] | None = None,
) -> LintResult:
    """Lint the Python files under `paths` (files or folders) of the project at `root`. Raises
    files.PathNotFound for a path that does not exist; a file that does not parse is a TM904 finding. `excluded`:
    files to leave out (the configuration's `exclude`), for the project walk and the given paths alike."""
    started = time.perf_counter()
    root = Root.of(root)
    given = [Path(os.path.abspath(p)) for p in paths]
    files = python_files(given)
    project = sorted(set(python_files([root.path])) | set(files)) if root.path.is_dir() else files
    if excluded is not None:  # the configuration's `exclude` globs: never read, as if they were not there
        files = [f for f in files if not excluded(f)]
        project = [f for f in project if not excluded(f)]
    store = LintCache(root, project, enabled=cache)
    findings: list[Finding] = []
    compiling: list[Path] = []
    for path in project:
        t = store.triage(path)
        if t.error is not None:
            findings.append(unparsable(str(path), root, *t.error))
        elif t.compiles:
            compiling.append(path)

    errors: list[str] = []
    parsed = 0
    todo = []
    for path in compiling:
        kept = store.entry(path)
        if kept is None:
            todo.append(path)
        else:
            findings += kept
    if todo:  # libcst and the analysis are imported only when a file must be parsed again
        from torchmend.lint.analyse import analyse

        parsed = analyse(todo, root, read, store, findings, errors)
    store.save()

    kept_findings = _dedupe(f for f in findings if _under(Path(f.path), given))
    kept_findings = [f for f in kept_findings if selection.selects(f.rule)]
    return LintResult(
        findings=sorted(kept_findings, key=lambda f: (f.file, f.line, f.rule)),
        files_checked=len(files),
        files_parsed=parsed,
        compiling_files=len(compiling),
        cached=store.hits,
        seconds=time.perf_counter() - started,
        errors=errors,
        files=[str(f) for f in files],
    )


def _dedupe(findings: Iterable[Finding]) -> list[Finding]:
    """One finding per (rule, file, line): the surer one when two compiled entries reach the same line."""
    best: dict[tuple[str, str, int], Finding] = {}
    for f in findings:
        key = (f.rule, f.path, f.line)
        old = best.get(key)
        if old is None or _ORDER.get(f.confidence or "", 2) < _ORDER.get(old.confidence or "", 2):
            best[key] = f
    return list(best.values())
