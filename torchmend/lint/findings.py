"""A hit of a check made into a `Finding`, the record scan makes, with what only lint has: its confidence, and a
reason that says the finding is static and how to confirm it."""

from __future__ import annotations

import libcst as cst

from torchmend import rules
from torchmend.analysis.source import SourceFile
from torchmend.lint.checks import LIKELY, Hit
from torchmend.lint.regions import Reached
from torchmend.model import Finding, Location, Pattern, Severity, Where
from torchmend.values import Root

CONFIRM = "static: lint read the source and ran nothing; `torchmend scan SCRIPT` confirms it"


def _location(src: SourceFile, node: cst.CSTNode, root: Root, function: str) -> Location:
    line = src.line_of(node)
    return Location(file=root.display(src.path), line=line, function=function, path=src.path, code=_line(src, line))


def _line(src: SourceFile, line: int) -> str:
    lines = src.text.splitlines()
    return lines[line - 1].strip() if 0 < line <= len(lines) else ""


def _function(src: SourceFile, node: cst.CSTNode) -> str:
    fn = node if isinstance(node, cst.FunctionDef) else src.enclosing(node, cst.FunctionDef)
    return fn.name.value if isinstance(fn, cst.FunctionDef) else "<module>"


def to_finding(src: SourceFile, hit: Hit, root: Root, reached: Reached | None = None) -> Finding:
    rule = rules.BY_CODE[hit.rule]
    line = src.line_of(hit.node)
    compiled = None
    where = ""
    if reached is not None:
        entry = reached.root
        compiled = _location(entry.src, entry.fn, root, entry.fn.name.value)
        site = f"{root.display(reached.site_src.path)}:{reached.site_src.line_of(reached.site)}"
        where = f" (compiled at {site}" + (f", through {entry.fn.name.value}()" if reached.entry else "") + ")"
    return Finding(
        rule=hit.rule,
        kind=rule.kind,
        title=rule.title,
        file=root.display(src.path),
        line=line,
        function=_function(src, hit.node),
        path=src.path,
        where=Where.PROJECT,
        reason=f"{hit.what}{where}. {hit.confidence.capitalize()} ({CONFIRM}).",
        count=1,
        severity=Severity.FIX if hit.confidence == LIKELY and not hit.once else Severity.NOTE,
        pattern=Pattern.ONCE if hit.once else None,
        variable=hit.variable,
        code=_line(src, line),
        compiled_function=compiled,
        call_site=_location(*hit.call_site, root, _function(*hit.call_site)) if hit.call_site else None,
        confidence=hit.confidence,
    )
