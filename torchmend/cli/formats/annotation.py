"""What a machine-read format says about one finding: where it is reported (file, line, column) and its message; and
the text edit a codemod proposes for it (TextFix). Shared by sarif.py and github.py, so the two never disagree.

Where: a finding in the project at its own line. A finding in a library (or outside the project) at the user's frame
that reached it when there is one, since that is the line the user can change and the file a code-scanning service
has; otherwise at the library line itself, by absolute path.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from torchmend import sources
from torchmend.model import STORM_FROM, Finding, Kind, Where

if TYPE_CHECKING:  # only a type here: text_fixes() is handed the pipeline's Fixes
    from torchmend.pipeline import Fixes

# SARIF's lines end at \r\n, \n or \r (§3.30.2), not at the other breaks str.splitlines() knows (\f, \x1c, \u2028).
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")


def split_lines(text: str) -> list[str]:
    """The text's lines, each with its own newline (SARIF's line model)."""
    return _LINE.findall(text)


@dataclass(frozen=True)
class Place:
    """Where a finding is reported."""

    file: str  # POSIX path relative to the project root when in the project, else absolute
    path: str  # absolute
    line: int
    column: int  # 1-based: the line's first non-blank character (1 when the file cannot be read)
    in_project: bool
    reached_from: bool = False  # a library finding reported at the user's frame that reached it


class Lines:
    """The source lines of the files findings name, read once each (as on disk, in their own encoding)."""

    def __init__(self) -> None:
        self._files: dict[str, list[str] | None] = {}

    def line(self, path: str, number: int) -> str | None:
        if path not in self._files:
            try:
                self._files[path] = split_lines(sources.read_source(path))
            except OSError:  # gone, unreadable, or not decodable as Python (sources.NotSource)
                self._files[path] = None
        lines = self._files[path]
        return lines[number - 1] if lines is not None and 0 < number <= len(lines) else None

    def column(self, path: str, number: int) -> int:
        text = self.line(path, number)
        if text is None or not text.strip():
            return 1
        return len(text) - len(text.lstrip()) + 1


def _relative(file: str) -> str:
    return Path(file).as_posix()


def place(f: Finding, lines: Lines) -> Place:
    """Where `f` is reported (see the module's docstring)."""
    if f.where == Where.PROJECT:
        return Place(_relative(f.file), f.path, f.line, lines.column(f.path, f.line), True)
    if f.user_frame is not None:
        u = f.user_frame
        inside = not os.path.isabs(u.file)
        return Place(_relative(u.file), u.path, u.line, lines.column(u.path, u.line), inside, reached_from=True)
    return Place(f.path, f.path, f.line, lines.column(f.path, f.line), False)


@dataclass(frozen=True)
class TextFix:
    """A codemod's proposal as a text edit of one project file: the file before and after it alone."""

    findings: tuple[Finding, ...]  # the findings it fixes (the very records given to propose())
    path: str  # absolute
    before: str
    after: str
    description: str  # the proposal's one-line why
    safety: str  # safe | unsafe

    def fixes(self, f: Finding) -> bool:
        return any(g is f for g in self.findings)


def text_fixes(fixes: Fixes) -> list[TextFix]:
    """Every proposal of `fixes` (pipeline.propose()) as a TextFix, each applied alone to the file as it is."""
    out = []
    for p in fixes.proposals:
        alone = fixes.alone(p)
        if alone.after != alone.before:
            out.append(TextFix(p.findings, alone.path, alone.before, alone.after, p.why, p.safety))
    return out


def fix_for(f: Finding, fixes: Sequence[TextFix]) -> TextFix | None:
    return next((x for x in fixes if x.fixes(f)), None)


_PATTERN = {"once": "one-time", "limit": "until the recompile limit"}


def message(f: Finding, where: Place, fix: TextFix | None = None) -> str:
    """The finding in words, the same in every format: what, why, how often, where else, and what fixes it."""
    parts = [f"{f.title}: {f.reason}" if f.reason else f.title]
    storm = f.pattern == "storm" and f.count >= STORM_FROM  # two recompiles are no storm: "Seen 2×" says it
    pattern = _PATTERN.get(f.pattern or "") or ("a recompile storm" if storm else None)
    seen = f"Seen {f.count}×" + (f" ({pattern})" if pattern else "")
    if f.ranks:
        seen += " on ranks " + ", ".join(f"{r} ({n}×)" for r, n in sorted(f.ranks.items()))
        if f.divergent:
            seen += "; rank-divergent: the other ranks wait for this one at the next collective"
    confidence = f.confidence  # lint's likely | possible; None for a runtime finding
    if confidence is None:  # a static finding has no count: nothing ran
        parts.append(seen + ".")
    if where.reached_from:
        parts.append(f"It happens in {f.file}:{f.line} ({f.function}), a library's code, reached from this line.")
    elif f.call_site is not None and (f.call_site.file, f.call_site.line) != (f.file, f.line):
        parts.append(f"The compiled function is called from {f.call_site.file}:{f.call_site.line}.")
    if f.hint:
        parts.append(f"PyTorch's hint: {f.hint}")
    # A check's reason says it is static itself (lint/findings.CONFIRM); lint's finding about a file it cannot parse
    # (a source finding, TM904) does not.
    if confidence is not None and f.kind == Kind.SOURCE:
        parts.append(f"Static finding ({confidence}): `torchmend scan` confirms it by running the script.")
    if fix is not None:
        parts.append(f"`torchmend fix` proposes a change ({fix.safety}): {fix.description}")
    if f.docs_url:
        parts.append(f"PyTorch's page: {f.docs_url}")
    return "\n".join(parts)


def in_order(findings: Iterable[Finding], lines: Lines) -> list[tuple[Finding, Place]]:
    """Each finding with its place, the project's first, then by file and line (the order a reviewer reads)."""
    placed = [(f, place(f, lines)) for f in findings]
    return sorted(placed, key=lambda fp: (not fp[1].in_project, fp[1].file, fp[1].line, fp[0].rule))
