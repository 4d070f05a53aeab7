"""The scan report as data: what `--format json` prints (schema documented in docs/scan-json.md)."""

from __future__ import annotations

from typing import Any

from torchmend import __version__
from torchmend.profiler.findings import Finding, Summary
from torchmend.profiler.runner import RunOutcome, RunSpec

SCHEMA = "torchmend.scan/1"


def scan_report(spec: RunSpec, project_root: str, findings: list[Finding], summary: Summary,
                outcome: RunOutcome) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "torchmend_version": __version__,
        "torch_version": summary.torch_version,
        "script": str(spec.script),
        "args": list(spec.args),
        "project_root": project_root,
        "backend": spec.backend,
        "budget": {"steps": spec.steps, "timeout_s": spec.timeout},
        "summary": summary.to_json(),
        "error": outcome.end.get("error") if outcome.ended_by in ("error", "exit") else None,
        "findings": [f.to_json() for f in findings],
    }
