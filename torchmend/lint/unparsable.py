"""TM904: the finding for a file Python cannot parse. Kept apart from findings.py, which needs libcst: a lint
served from the cache reports these without loading it."""

from __future__ import annotations

import os

from torchmend import rules
from torchmend.model import Finding, Severity, Where


def display(path: str, root: str) -> str:
    """The path as findings show it: relative to the project root when inside it."""
    rel = os.path.relpath(path, root)
    return path if rel.startswith("..") else rel


def unparsable(path: str, root: str, line: int, message: str, who: str = "Python") -> Finding:
    rule = rules.BY_CODE["TM904"]
    return Finding(
        rule="TM904",
        kind=rule.kind,
        title=rule.title,
        file=display(path, root),
        line=line,
        function="<module>",
        path=path,
        where=Where.PROJECT,
        reason=f"{who} cannot parse this file: {message}; nothing in it was checked.",
        count=1,
        severity=Severity.NOTE,
        confidence="likely",
    )
