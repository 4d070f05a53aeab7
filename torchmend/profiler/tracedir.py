"""Read a TORCH_TRACE directory written by a run elsewhere (one log file per rank, the files tlparse reads)
into the same events the live collector writes, tagged by rank.

A trace line is `<glog prefix>] {metadata JSON}`, followed by the record's payload as lines that start
with a tab. Only the records the collector forwards matter (records.py); the rest are skipped unparsed.
"""

from __future__ import annotations

import gzip
import json
import re
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from torchmend.profiler.events import START
from torchmend.profiler.records import RecordConverter

PREFIX = "dedicated_log_torch_trace_"
_RANK_IN_NAME = re.compile(r"rank_(\d+)_")
_WANTED = ('{"str"', '{"dynamo_start"', '{"compilation_metrics"', '{"artifact"')


class TraceError(Exception):
    """The path holds no readable trace: the message says what was expected."""


@dataclass
class TraceFile:
    path: Path
    rank: int | None
    pid: int | None
    torch_version: str | None
    events: list[dict[str, Any]] = field(default_factory=list)


def _open(path: Path) -> IO[str]:
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8", errors="replace")
    return path.open(encoding="utf-8", errors="replace")


def _records(path: Path) -> Iterator[tuple[str, dict[str, Any], str | None]]:
    """(glog prefix, metadata, payload) for each record worth converting."""
    prefix: str | None = None
    md: dict[str, Any] | None = None
    payload: list[str] = []
    with _open(path) as f:
        for line in f:
            if line.startswith("\t"):
                if md is not None:
                    payload.append(line[1:].rstrip("\n"))
                continue
            if md is not None and prefix is not None:
                yield prefix, md, "\n".join(payload) if payload else None
            md, payload = None, []
            cut = line.find("] {")
            if cut < 0:
                continue
            body = line[cut + 2 :]
            if not body.startswith(_WANTED):
                continue
            try:
                md = json.loads(body)
            except json.JSONDecodeError:
                md = None
                continue
            prefix = line[:cut]
    if md is not None and prefix is not None:
        yield prefix, md, "\n".join(payload) if payload else None


def read_file(path: Path) -> TraceFile:
    converter = RecordConverter()
    m = _RANK_IN_NAME.search(path.name)
    trace = TraceFile(path, int(m.group(1)) if m else None, None, None)
    for prefix, md, payload in _records(path):
        if trace.pid is None:
            parts = prefix.split()
            trace.pid = int(parts[2]) if len(parts) > 2 and parts[2].isdigit() else None
        if isinstance(md.get("rank"), int):
            trace.rank = md["rank"]
        artifact = md.get("artifact") or {}
        if artifact.get("name") == "torch_version" and payload:
            try:
                trace.torch_version = json.loads(payload).get("pytorch_version")
            except (json.JSONDecodeError, AttributeError):
                pass
            continue
        converted = converter.convert(md, payload)
        if converted is not None:
            ev, fields = converted
            trace.events.append({"ev": ev, **fields})
    return trace


def trace_files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise TraceError(f"no such file or directory: {path}")
    files = sorted(
        p for p in path.iterdir() if p.is_file() and p.name.startswith(PREFIX) and p.name.endswith((".log", ".log.gz"))
    )
    if not files:
        raise TraceError(
            f"{path} holds no trace logs ({PREFIX}*.log): point --from-trace at the directory "
            "TORCH_TRACE named when the job ran"
        )
    return files


@dataclass
class Trace:
    files: list[TraceFile]  # the ones used, one per rank
    ignored: list[Path]  # older files for a rank already covered (earlier runs into the same directory)

    @property
    def ranks(self) -> list[int]:
        return sorted(f.rank for f in self.files if f.rank is not None)

    @property
    def torch_version(self) -> str | None:
        return next((f.torch_version for f in self.files if f.torch_version), None)

    def events(self) -> list[dict[str, Any]]:
        """Every file's events after a START event of its own; tagged with the rank when the run had ranks."""
        out: list[dict[str, Any]] = []
        for f in self.files:
            tag = {"rank": f.rank} if f.rank is not None else {}
            out.append({"ev": START, "torch": f.torch_version, "library_roots": [], "pid": f.pid, **tag})
            out.extend({**e, **tag} for e in f.events)
        return out


def read_trace(path: Path) -> Trace:
    """The newest trace file per rank under `path` (a TORCH_TRACE directory, or one log file)."""
    by_rank: dict[int | None, list[TraceFile]] = defaultdict(list)
    for p in trace_files(path):
        by_rank[(t := read_file(p)).rank].append(t)
    ignored: list[Path] = []
    if len(by_rank) > 1 and None in by_rank:  # files from before the process group existed, or other runs
        ignored += [t.path for t in by_rank.pop(None)]
    used = []
    for rank in sorted(by_rank, key=lambda r: -1 if r is None else r):
        newest = sorted(by_rank[rank], key=lambda t: t.path.stat().st_mtime)
        used.append(newest[-1])
        ignored += [t.path for t in newest[:-1]]
    if not any(t.events for t in used):
        raise TraceError(
            f"the trace logs under {path} record no compilation (no dynamo_start or "
            "compilation_metrics records): was the job compiled with torch.compile?"
        )
    return Trace(used, ignored)
