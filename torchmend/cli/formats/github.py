"""Findings as GitHub Actions workflow commands: one `::warning file=...,line=...,col=...,title=...::message` line per
finding, which the runner turns into an annotation on that line of the pull request's diff.

Escaping is GitHub's (the runner's `escapeData` / `escapeProperty`): in the message `%`, `\\r` and `\\n`; in a
property value also `:` and `,`, which would otherwise end the value.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from torchmend.cli.formats.annotation import Lines, TextFix, fix_for, in_order, message
from torchmend.model import Finding, Kind

if TYPE_CHECKING:
    from torchmend.verify.compare import Verification


def escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def command(name: str, text: str, **properties: str | int) -> str:
    """One workflow command line, e.g. command("warning", "msg", file="a.py", line=3) -> `::warning file=a.py,line=3::msg`."""
    props = ",".join(f"{key}={escape_property(str(value))}" for key, value in properties.items())
    return f"::{name}{' ' + props if props else ''}::{escape_data(text)}"


def annotation_level(f: Finding) -> str:
    """fix → warning (error when compiling broke the script itself); note and info → notice."""
    if f.severity != "fix":
        return "notice"
    return "error" if f.kind == Kind.SCRIPT_FAILURE else "warning"


def to_github(findings: Iterable[Finding], fixes: Sequence[TextFix] = ()) -> str:
    """Every finding as one workflow command line (the text ends with a newline unless there are none). Paths are
    relative to the project root, which GitHub needs to be the repository's (the job's working directory); a finding
    outside the project with no frame of the user's is annotated without a file, so the run's summary still shows it."""
    lines = Lines()
    out = []
    for f, where in in_order(findings, lines):
        fix = fix_for(f, fixes) if where.in_project else None
        title = f"{f.rule} {f.title}"
        text = message(f, where, fix)
        if where.in_project:
            out.append(
                command(annotation_level(f), text, file=where.file, line=where.line, col=where.column, title=title)
            )
        else:
            out.append(command(annotation_level(f), f"{where.file}:{where.line}: {text}", title=title))
    return "".join(line + "\n" for line in out)


def verification(v: Verification) -> str:
    """`torchmend verify --format github`: the verdict with its reasons, the before → after counts and times, and the
    numerics, as one run-level workflow command."""
    from torchmend.verify.report import rows

    lines = [
        *map(str, v.reasons),
        v.speed_text(),
        *(f"{label}: {before} → {after}" for label, before, after, _ in rows(v)),
    ]
    if v.numerics is not None:
        lines.append(f"numerics (rtol {v.numerics.rtol:g}, atol {v.numerics.atol:g}): {v.numerics_text()}")
    lines += [f"note: {n}" for n in v.notes]
    return verdict_command(v.verdict, lines)


def verdict_command(verdict: str, lines: Sequence[str]) -> str:
    """`torchmend verify`'s verdict as one workflow command (a run-level annotation, no file): improved → notice,
    no_change → warning, refused → error."""
    name = {"improved": "notice", "no_speed_change": "notice", "no_change": "warning"}.get(verdict, "error")
    return command(name, "\n".join(lines), title=f"torchmend verify: {verdict.replace('_', ' ')}") + "\n"


def error_command(code: int, name: str, message: str, detail: str = "") -> str:
    """The run-level `::error` command of a command that failed: the exit code and its name in the title, the
    message (and its detail, the script's output's tail) as the text."""
    return command("error", f"{message}\n{detail}" if detail else message, title=f"torchmend exited {code} ({name})")
