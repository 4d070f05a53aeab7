"""Findings in the formats that CI systems read: SARIF 2.1.0 (code scanning: sarif.py) and GitHub workflow commands
(annotations on a pull request: github.py). Both are plain functions over `torchmend.model.Finding` records, so any
command that has findings (scan, fix --check, lint) prints them with one call, the fixes (TextFix: a codemod's
proposal as a text edit) given by the command, which has proposed them already (formatting never runs a codemod):

    print(report(format, findings, root, text_fixes(fixes)), end="")    # format: "sarif" or "github"
    print(json.dumps(to_sarif(findings, root, text_fixes(fixes)), indent=2))
    print(to_github(findings, text_fixes(fixes)), end="")              # fixes: pipeline.propose(findings, project)

Where a finding is reported and what its message says is annotation.py, shared by both. Nothing here imports torch;
libcst only in text_fixes(), which turns codemod proposals into text edits.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from torchmend.cli.formats.annotation import TextFix, text_fixes
from torchmend.cli.formats.github import to_github
from torchmend.cli.formats.sarif import to_sarif
from torchmend.model import Finding

__all__ = ["TextFix", "report", "text_fixes", "to_github", "to_sarif"]


def report(
    format: str,
    findings: Iterable[Finding],
    root: Path | str,
    fixes: Sequence[TextFix] | None = None,
    *,
    run_properties: dict[str, Any] | None = None,
) -> str:
    """The findings as the text of `format` ("sarif" or "github"), ending in a newline. `fixes`: the changes to
    attach (text_fixes() of the command's proposals); None: none."""
    findings = list(findings)
    fixes = fixes or []
    if format == "sarif":
        return json.dumps(to_sarif(findings, root, fixes, run_properties=run_properties), indent=2) + "\n"
    if format == "github":
        return to_github(findings, fixes)
    raise ValueError(f"not a machine-read format: {format!r}")
