"""TM904: the finding for a file Python cannot parse. Kept apart from findings.py, which needs libcst: a lint
served from the cache reports these without loading it."""

from __future__ import annotations

from torchmend import rules
from torchmend.model import Finding, Severity, Where
from torchmend.values import Root


def unparsable(path: str, root: Root, line: int, message: str, who: str = "Python") -> Finding:
    rule = rules.BY_CODE["TM904"]
    return Finding(
        rule="TM904",
        kind=rule.kind,
        title=rule.title,
        file=root.display(path),
        line=line,
        function="<module>",
        path=path,
        where=Where.PROJECT,
        reason=f"{who} cannot parse this file: {message}; nothing in it was checked.",
        count=1,
        severity=Severity.NOTE,
        confidence="likely",
    )
