"""Suppression comments: `# torchmend: ignore[TM101]`, `# torchmend: ignore[TM101, TM2]` (code prefixes, as
--select takes them) or a bare `# torchmend: ignore` (every rule), read with the tokenize module (a `#` inside a
string is not a comment).

Which lines a comment covers: its own line; and when it sits on the first or the last line of a statement that
spans several lines (a logical line: a call over several lines, a bracketed condition, a multi-line string),
every line of that statement. A finding outside the project is matched at the frame of yours that reached it.

apply_suppressions() splits findings into kept and suppressed (the Selection: select/ignore and the per-file
ignores, apply in the same pass) and reports each comment, or code in one, that suppressed nothing as an
informational TM903 finding. add_ignores() writes comments for the findings that remain (lint --add-ignore).
Nothing here prints or writes files except write_ignores(), through torchmend.store.
"""

from __future__ import annotations

import io
import os
import re
import tokenize
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from torchmend import rules
from torchmend.model import Finding, Severity, Where
from torchmend.sources import read_source
from torchmend.values import Root, Selection

UNUSED = "TM903"
DIRECTIVE = re.compile(r"#\s*torchmend\s*:\s*ignore\b(?:\[([^\]]*)\])?")
SCAN_HINT = "A hint only: a run sees just the code that ran and compiled (`torchmend lint` reads all the source)"


@dataclass(frozen=True)
class Suppression:
    path: str  # absolute
    line: int  # the comment's line
    codes: tuple[str, ...] | None  # code prefixes; None: every rule
    covers: frozenset[int]  # the lines it applies to
    text: str  # the directive as written


@dataclass
class SourceComments:
    """What one file's tokens say: its suppressions, its statements' line spans and its comments' positions."""

    suppressions: list[Suppression] = field(default_factory=list)
    statement: dict[int, tuple[int, int]] = field(default_factory=dict)  # line -> (first, last) of its statement
    comments: dict[int, tuple[int, str]] = field(default_factory=dict)  # line -> (column, text) of its comment
    no_comment: set[int] = field(default_factory=set)  # lines that end inside a string or with a backslash
    lines: list[str] = field(default_factory=list)  # the physical lines, with their line endings


def _codes(group: str | None) -> tuple[str, ...] | None:
    if group is None:
        return None
    return tuple(c for c in (part.strip() for part in group.split(",")) if c)


def read_comments(path: str, text: str) -> SourceComments:
    """The suppressions and statement spans of a source text; a file tokenize rejects has none."""
    result = SourceComments(lines=io.StringIO(text, newline="").readlines())
    raw: list[tuple[int, int, str]] = []
    first: int | None = None
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text, newline="").readline):
            if tok.type == tokenize.COMMENT:
                raw.append((tok.start[0], tok.start[1], tok.string))
                result.comments[tok.start[0]] = (tok.start[1], tok.string)
                continue
            if tok.type in (tokenize.NL, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER):
                continue
            if first is None:
                first = tok.start[0]
            if tok.end[0] > tok.start[0] and tok.type != tokenize.NEWLINE:  # a string over several lines
                result.no_comment.update(range(tok.start[0], tok.end[0]))
            if tok.type == tokenize.NEWLINE:
                for n in range(first, tok.start[0] + 1):
                    result.statement[n] = (first, tok.start[0])
                first = None
    except (tokenize.TokenError, SyntaxError):  # not Python (lint reports it as TM904): no suppressions
        return SourceComments(lines=result.lines)
    for n, physical in enumerate(result.lines, 1):
        if n not in result.comments and physical.rstrip("\r\n").endswith("\\"):
            result.no_comment.add(n)
    for line, _, comment in raw:
        for m in DIRECTIVE.finditer(comment):
            first_line, last_line = result.statement.get(line, (line, line))
            covers = range(first_line, last_line + 1) if line in (first_line, last_line) else range(line, line + 1)
            result.suppressions.append(Suppression(path, line, _codes(m.group(1)), frozenset(covers), m.group(0)))
    return result


def _target(f: Finding, root: Root) -> tuple[str, int] | None:
    """Where a comment for this finding goes: its own line in the project, else the frame of yours that reached
    it; None when neither is in the project."""
    if root.contains(f.path) and f.where == Where.PROJECT:
        return f.path, f.line
    if f.user_frame is not None and root.contains(f.user_frame.path):
        return f.user_frame.path, f.user_frame.line
    return None


def _matches(code: str, prefixes: Iterable[str]) -> bool:
    return any(code.startswith(p) for p in prefixes)


class Applied(NamedTuple):
    kept: list[Finding]  # reported (and fixed)
    suppressed: list[Finding]  # left out by a comment, per-file-ignores or select/ignore
    unused: list[Finding]  # TM903: a suppression that suppressed nothing


def apply_suppressions(
    findings: Iterable[Finding],
    root: Root | Path | str,
    selection: Selection = Selection(),
    *,
    files: Iterable[str] | None = None,
    hint: str | None = None,
    texts: dict[str, str] | None = None,
) -> Applied:
    """Split `findings` into kept and suppressed, and report unused suppressions as TM903 findings.

    A finding is suppressed when `selection`'s select/ignore (Settings.selection: the command line over the
    configuration) leave its rule out, when its per-file ignores match its file, or when a suppression comment covers
    its line. Unused suppressions are looked for in `files` (absolute paths; default: the project files the findings point at), for rules the run
    could have reported there (selected, not ignored for the file); `hint` is added to their reason (scan:
    SCAN_HINT). `texts`: sources already read, by path (default: read from disk).
    """
    findings = list(findings)
    root = Root.of(root)
    targets = {id(f): _target(f, root) for f in findings}
    paths = dict.fromkeys(t[0] for t in targets.values() if t is not None)
    if files is not None:
        paths.update(dict.fromkeys(os.path.abspath(p) for p in files))
    comments = {p: _comments(p, texts) for p in paths}
    used: set[tuple[str, int, str, str | None]] = set()  # (path, line, directive, code or None)
    kept: list[Finding] = []
    suppressed: list[Finding] = []
    for f in findings:
        target = targets[id(f)]
        if not selection.selects(f.rule, None if target is None else target[0]):
            suppressed.append(f)
            continue
        hit = False
        if target is not None:
            for s in comments[target[0]].suppressions:
                if target[1] not in s.covers:
                    continue
                for code in s.codes if s.codes is not None else (None,):
                    if code is None or f.rule.startswith(code):
                        used.add((s.path, s.line, s.text, code))
                        hit = True
        (suppressed if hit else kept).append(f)
    unused: list[Finding] = []
    for path, source in comments.items():
        if not selection.selects(UNUSED, path):
            continue  # TM903 is a rule like the others: --ignore TM903 turns it off
        possible = [c for c in rules.BY_CODE if c != UNUSED and selection.selects(c, path)]
        for s in source.suppressions:
            codes = s.codes if s.codes is not None else (None,)
            idle = [c for c in codes if (s.path, s.line, s.text, c) not in used]
            unknown = [c for c in idle if c is not None and not any(r.startswith(c) for r in rules.BY_CODE)]
            could = [c for c in idle if c not in unknown and _seen(c, possible)]
            if unknown or could:
                unused.append(_unused(s, root, source, could, unknown, hint))
    return Applied(kept, suppressed, unused)


def _seen(code: str | None, possible: list[str]) -> bool:
    """Whether the run could have reported a finding this code (None: any rule) suppresses."""
    return any(code is None or r.startswith(code) for r in possible)


def _comments(path: str, texts: dict[str, str] | None) -> SourceComments:
    try:
        text = texts[path] if texts and path in texts else read_source(path)
    except (OSError, ValueError):
        return SourceComments()
    return read_comments(path, text)


def _unused(
    s: Suppression,
    root: Root,
    source: SourceComments,
    idle: Sequence[str | None],
    unknown: Sequence[str | None],
    hint: str | None,
) -> Finding:
    parts = []
    if idle:
        what = "every rule" if idle == [None] else ", ".join(c for c in idle if c)
        parts.append(f"`{s.text}` suppressed nothing here ({what}) in this run: remove it, or the codes it names")
    if unknown:
        parts.append(f"{', '.join(c for c in unknown if c)} is no rule code (`torchmend rules` lists them)")
    reason = "; ".join(parts) + (f". {hint}" if hint and idle else "")
    rule = rules.BY_CODE[UNUSED]
    code = source.lines[s.line - 1].strip() if s.line <= len(source.lines) else ""
    return Finding(
        rule=UNUSED,
        kind=rule.kind,
        title=rule.title,
        file=root.display(s.path),
        line=s.line,
        function="",
        path=s.path,
        where=Where.PROJECT,
        reason=reason,
        count=1,
        severity=Severity.INFO,
        code=code,
    )


# ------------------------------------------------------------------------------------ writing suppressions


def add_ignores(findings: Iterable[Finding], root: Root, texts: dict[str, str] | None = None) -> dict[str, str]:
    """The new text of each project file where a `# torchmend: ignore[CODES]` comment must be added so that
    `findings` are suppressed (like `ruff --add-noqa`): on the finding's line, or the last line of its statement
    when a comment cannot end that line (inside a multi-line string, after a backslash); merged into a torchmend
    comment already there, after any other comment (`# noqa`). Findings already suppressed add nothing, so a
    second run returns {}. Files outside `root` are never included. Informational TM903 findings are skipped."""
    wanted: dict[str, dict[int, set[str]]] = {}
    for f in findings:
        target = _target(f, root)
        if target is None or f.rule == UNUSED:
            continue
        wanted.setdefault(target[0], {}).setdefault(target[1], set()).add(f.rule)
    result: dict[str, str] = {}
    for path, by_line in wanted.items():
        try:
            text = texts[path] if texts and path in texts else read_source(path)
        except (OSError, ValueError):
            continue
        new = _add_to_text(path, text, by_line)
        if new != text:
            result[path] = new
    return result


def _add_to_text(path: str, text: str, by_line: dict[int, set[str]]) -> str:
    source = read_comments(path, text)
    lines = list(source.lines)
    place: dict[int, set[str]] = {}
    for line, codes in by_line.items():
        if line < 1 or line > len(lines):
            continue
        covered = [s for s in source.suppressions if line in s.covers]
        missing = {c for c in codes if not any(s.codes is None or _matches(c, s.codes) for s in covered)}
        if not missing:
            continue
        at = line if line not in source.no_comment else source.statement.get(line, (line, line))[1]
        place.setdefault(at, set()).update(missing)
    for at, codes in place.items():
        lines[at - 1] = _with_codes(lines[at - 1], source.comments.get(at), codes)
    return "".join(lines)


def _with_codes(line: str, comment: tuple[int, str] | None, codes: set[str]) -> str:
    body = line.rstrip("\r\n")
    ending = line[len(body) :]
    if comment is not None:
        column, text = comment
        m = DIRECTIVE.search(text)
        if m is not None:  # merge into the torchmend directive already there
            merged = sorted(set(_codes(m.group(1)) or ()) | codes)
            directive = f"# torchmend: ignore[{', '.join(merged)}]"
            new_comment = text[: m.start()] + directive + text[m.end() :]
            return body[:column] + new_comment + body[column + len(text) :] + ending
    return body.rstrip(" \t") + f"  # torchmend: ignore[{', '.join(sorted(codes))}]" + ending


def write_ignores(findings: Iterable[Finding], root: Root) -> list[str]:
    """Add the comments add_ignores() computes and write them atomically (torchmend.store: all files or none,
    never outside `root`); the paths written. Raises store.WriteRefused."""
    from torchmend import store

    new = add_ignores(findings, root)
    if new:
        store.write_all({p: (read_source(p), text) for p, text in new.items()}, root.path)
    return sorted(new)
