"""From PyTorch's structured-trace records (what TORCH_TRACE writes, one JSON metadata object plus an optional
payload per record) to torchmend's events. Shared by the live collector and the trace-directory reader, so
both see a record the same way. No torch here: the parent reads trace files without importing it.
"""

from __future__ import annotations

from typing import Any

from torchmend.profiler.events import COMPILE_END, COMPILE_START, GRAPH_BREAK

# compilation_metrics fields worth keeping (the record has ~90, most about caches and configs).
METRIC_KEYS = (
    "compile_id",
    "co_name",
    "co_filename",
    "co_firstlineno",
    "cache_size",
    "accumulated_cache_size",
    "fail_type",
    "fail_reason",
    "fail_user_frame_filename",
    "fail_user_frame_lineno",
    "recompile_reason",
    "entire_frame_compile_time_s",
    "backend_compile_time_s",
    "graph_op_count",
    "has_guarded_code",
    "cudagraph_skip_reason",  # reduce-overhead / max-autotune ran this graph without CUDA graphs, and why
)


def compile_id(md: dict[str, Any]) -> str | None:
    if "frame_id" not in md:
        return None
    return f"{md['frame_id']}/{md.get('frame_compile_id', 0)}"


class RecordConverter:
    """Turns records into (event name, fields); keeps the table of interned file names the trace builds up."""

    def __init__(self) -> None:
        self.strings: dict[int, str] = {}

    def convert(self, md: dict[str, Any], payload: str | None) -> tuple[str, dict[str, Any]] | None:
        if "str" in md:
            text, idx = md["str"]
            self.strings[idx] = text
        elif "dynamo_start" in md:
            stack = [
                [self.strings.get(f.get("filename"), str(f.get("filename"))), f.get("line"), f.get("name")]
                for f in md["dynamo_start"].get("stack", [])
            ]
            return COMPILE_START, {"compile_id": compile_id(md), "stack": stack}
        elif "compilation_metrics" in md:
            m = md["compilation_metrics"]
            fields = {k: m.get(k) for k in METRIC_KEYS}
            fields["compile_id"] = fields["compile_id"] or compile_id(md)
            return COMPILE_END, fields
        elif "artifact" in md and md["artifact"].get("name") == "dynamo_graph_break_reason":
            return GRAPH_BREAK, {"compile_id": compile_id(md), "text": payload or ""}
        return None
