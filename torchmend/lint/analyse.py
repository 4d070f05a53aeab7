"""The part of lint that needs libcst: parse the files that compile, find what they compile and what that code
calls (regions.py), and check each compiled def (checks.py, optimizers.py). run.py imports it only when some file
must be parsed again, so a lint served from the cache never loads libcst."""

from __future__ import annotations

import logging
import multiprocessing
import os
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from torchmend import sources
from torchmend.analysis.source import Context, SourceError, SourceFile
from torchmend.lint.cache import LintCache
from torchmend.lint.checks import LIKELY, Hit, check
from torchmend.lint.deep import deeply, python_refuses, too_deep
from torchmend.lint.findings import to_finding
from torchmend.lint.optimizers import compiled_step, stepped
from torchmend.lint.regions import compiled_region
from torchmend.lint.saves import compiled_saves
from torchmend.lint.scalars import changing_numbers
from torchmend.lint.unparsable import unparsable
from torchmend.model import Finding
from torchmend.values import Root

log = logging.getLogger("torchmend")


# From this many files to parse on, the work is shared among processes (one per CPU): parsing with libcst is what
# a cold lint spends its time on, and each file's analysis is independent of the others'.
PARALLEL_FROM = 16

Outcome = tuple[Path, set[str], "list[Finding] | None", str]  # path, files reached, findings, internal error


def analyse(
    paths: list[Path],
    root: Root,
    read: Callable[[str], str],
    store: LintCache,
    findings: list[Finding],
    errors: list[str],
) -> int:
    """Lint each compiling file of `paths` into `findings` (and the cache); returns how many files were parsed."""
    workers = min(os.cpu_count() or 1, len(paths) // (PARALLEL_FROM // 2))
    if workers > 1 and read is sources.read_source:
        chunks = [paths[i::workers] for i in range(workers)]
        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
            done = list(pool.map(_chunk, chunks, [root] * workers))
        outcomes = [o for outs, _ in done for o in outs]
        parsed = sum(n for _, n in done)
    else:
        outcomes, parsed = _chunk(paths, root, read)
    for path, touched, found, error in sorted(outcomes, key=lambda o: o[0]):
        if found is None:
            errors.append(error)
            continue
        store.store(path, touched, found)
        findings += found
    return parsed


def _chunk(
    paths: list[Path], root: Root, read: Callable[[str], str] = sources.read_source
) -> tuple[list[Outcome], int]:
    """Lint these files with one Context (a callee file is parsed once for all of them), in a thread whose stack
    and recursion limit hold deeply nested code (deep.py)."""
    return deeply(_chunk_here, paths, root, read)


def _chunk_here(paths: list[Path], root: Root, read: Callable[[str], str]) -> tuple[list[Outcome], int]:
    ctx = Recording(str(root), read, whole_files=True, torch_version=installed_torch())
    outcomes: list[Outcome] = []
    for path in paths:
        ctx.touched = set()
        try:
            found = lint_entry(ctx, path, root)
        except SourceError as e:
            found = [unparsable(str(path), root, 1, str(e))]
        except Exception as e:  # an analysis bug costs this file's findings, never the run
            if too_deep(e):  # deeper than even deeply() holds: the file is one TM904, as Python's refusal is
                found = [unparsable(str(path), root, 1, _TOO_DEEP, who="torchmend")]
            else:
                log.debug("internal error linting %s", path, exc_info=True)
                outcomes.append((path, set(), None, f"{os.path.relpath(path, root.path)}: internal error: {_said(e)}"))
                continue
        outcomes.append((path, set(ctx.touched), found, ""))
    return outcomes, ctx.parsed


_TOO_DEEP = "it is nested too deeply for torchmend's analysis (maximum recursion depth exceeded)"


def _said(e: BaseException) -> str:
    """The error in one short line. Its text may be a libcst node's repr, itself too deep to build."""
    try:
        text = str(e)
    except Exception:
        text = ""
    text = text.splitlines()[0] if text.strip() else ""
    return f"{type(e).__name__}: {text[:200]}" if text else type(e).__name__


def lint_entry(ctx: Context, path: Path, root: Root) -> list[Finding]:
    src = ctx.file(str(path))
    region = compiled_region(src, ctx)
    found: list[Finding] = []
    for r in region.functions:
        if not ctx.in_project(r.src.path):
            continue
        for hit in [*check(r), *stepped(r, ctx), *changing_numbers(r, ctx)]:
            found.append(to_finding(r.src, hit, root, r))
    for step in region.steps:
        for hit_src, hit in compiled_step(step, ctx):
            found.append(to_finding(hit_src, hit, root))
    for d in region.disabled:
        what = f"`{d.callee.fn.name.value}` is wrapped in torch.compiler.disable: calling it ends the graph"
        found.append(to_finding(d.src, Hit("TM105", d.call, LIKELY, what), root, d.caller))
    if ctx.in_project(src.path):
        found += [to_finding(src, hit, root) for hit in compiled_saves(src)]
    return found


def installed_torch() -> tuple[int, ...] | None:
    """The release of the torch installed beside torchmend (its metadata; torch is not imported): what lint judges
    the source against (a tensor `assert` compiles without a break from 2.13)."""
    from torchmend.profiler.hotspots import parse_version
    from torchmend.versions import installed_torch as text

    return parse_version(text())


class Recording(Context):
    """A Context that remembers which files were asked for (the cache's dependencies) and how many it parsed."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.touched: set[str] = set()
        self.parsed = 0
        self.refused: dict[str, tuple[int, str] | None] = {}  # python_refuses, per file

    def file(self, path: str) -> SourceFile:
        real = os.path.realpath(path)
        self.touched.add(real)
        if real in self._files:
            return self._files[real]
        self.parsed += 1
        if real not in self.refused:  # libcst would take hours on what Python cannot parse
            self.refused[real] = python_refuses(self.text_of(real))
        refused = self.refused[real]
        if refused is not None:
            raise SourceError(f"{path} does not parse: {refused[1]} (line {refused[0]})")
        try:
            return super().file(path)
        except Exception as e:
            if too_deep(e):
                raise SourceError(f"{path} does not parse: {_TOO_DEEP}") from e
            raise
