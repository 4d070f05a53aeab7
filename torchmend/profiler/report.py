"""The scan report as data: what `--format json` prints (schema documented in docs/scan-json.md)."""

from __future__ import annotations

from typing import Any

from torchmend import __version__
from torchmend.model import Finding, Placement, Summary
from torchmend.profiler.pathmap import Mapping
from torchmend.profiler.runner import RunOutcome, RunSpec
from torchmend.profiler.tracedir import Trace

SCHEMA = "torchmend.scan/1"


def scan_report(
    spec: RunSpec | None,
    project_root: str,
    findings: list[Finding],
    summary: Summary,
    outcome: RunOutcome,
    trace: Trace | None = None,
    path_maps: tuple[Mapping, ...] = (),
    placements: tuple[Placement, ...] = (),
) -> dict[str, Any]:
    """`spec` is None for findings read from a trace (`trace` then says which logs)."""
    return {
        "schema": SCHEMA,
        "torchmend_version": __version__,
        "torch_version": summary.torch_version,
        "script": str(spec.script) if spec else None,
        "args": list(spec.args) if spec else [],
        "launcher": list(spec.launcher) if spec else [],
        "trace": {
            "files": [str(f.path) for f in trace.files],
            "ignored": [str(p) for p in trace.ignored],
            "path_map": [{"old": m.old, "new": m.new, "guessed": m.guessed} for m in path_maps],
        }
        if trace
        else None,
        "project_root": project_root,
        "backend": spec.backend if spec else None,
        "budget": {"steps": spec.steps, "timeout_s": spec.timeout} if spec else None,
        "summary": summary.to_json(),
        "error": outcome.end.get("error") if outcome.ended_by in ("error", "exit") else None,
        "error_rank": outcome.end.get("rank") if outcome.ended_by in ("error", "exit") else None,
        "findings": [f.to_json() for f in findings],
        "placements": [p.to_json() for p in placements],
    }
