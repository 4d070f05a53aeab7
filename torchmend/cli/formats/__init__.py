"""Findings in the formats that CI systems read: SARIF 2.1.0 (code scanning: sarif.py) and GitHub workflow commands
(annotations on a pull request: github.py). Both are plain functions over `torchmend.model.Finding` records, so any
command that has findings (scan, fix --check, lint) prints them with one call:

    print(report(format, findings, root), end="")       # format: "sarif" or "github" (or cli.app.Format)

or, to choose the fixes (TextFix: a codemod's proposal as a text edit) itself:

    print(json.dumps(to_sarif(findings, root, text_fixes(pipeline.propose(findings, root))), indent=2))
    print(to_github(findings, text_fixes(pipeline.propose(findings, root))), end="")

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
    torch_version: str | None = None,
) -> str:
    """The findings as the text of `format` ("sarif" or "github"), ending in a newline. `fixes`: the changes to
    attach; None asks the codemods (pipeline.propose) for the project's findings, spelled for `torch_version`."""
    findings = list(findings)
    if fixes is None:
        from torchmend import pipeline

        fixes = text_fixes(pipeline.propose(findings, Path(root), torch_version=torch_version))
    if format == "sarif":
        return json.dumps(to_sarif(findings, root, fixes, run_properties=run_properties), indent=2) + "\n"
    if format == "github":
        return to_github(findings, fixes)
    raise ValueError(f"not a machine-read format: {format!r}")
