"""The event stream between the child and the parent: one JSON object per line, appended as it happens.

The child writes it (see collector.py); the parent reads it while the child runs (live progress) and
after it ends. A killed child can leave a half-written last line: readers skip it.
No torch here: both processes import this module.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

# Event names ("ev" field).
START = "start"  # child is up: versions, library paths
COMPILE_START = "compile_start"  # dynamo_start: a frame begins compiling, with the Python stack
COMPILE_END = "compile_end"  # compilation_metrics: outcome of one frame compile
GRAPH_BREAK = "graph_break"  # dynamo_graph_break_reason artifact
STEP = "step"  # optimizer steps so far (throttled)
END = "end"  # the script ended: finished | steps | error | exit
# The detection backend failed on a graph: does the script's own backend compile it? (see collector.py)
BACKEND_CHECK = "backend_check"
COMPILE_CALL = "compile_call"  # a torch.compile call of the script, with what it asked for (tune; verify's backend)

CHILD_ENV = "TORCHMEND_CHILD"
# Our step counter is wrapped in torch._dynamo.disable with this reason: the break it causes is ours, not the user's.
OWN_MARKER = "torchmend step counter"


class EventSink:
    """Appends events to a file and flushes each one, so a killed process loses nothing it saw."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._f = open(path, "a", encoding="utf-8", buffering=1)
        self._t0 = time.monotonic()

    def emit(self, ev: str, **fields: Any) -> None:
        fields["ev"] = ev
        fields["t"] = round(time.monotonic() - self._t0, 4)
        if ev == END:  # wall clock: which of several ranks failed first
            fields["at"] = round(time.time(), 4)
        self._f.write(json.dumps(fields, default=str) + "\n")
        self._f.flush()


def read_events(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    return list(iter_events(path))


def iter_events(path: str | os.PathLike[str]) -> Iterator[dict[str, Any]]:
    p = Path(path)
    if not p.exists():
        return
    with p.open(encoding="utf-8", errors="replace") as f:
        for line in f:
            if not line.endswith("\n"):
                return  # a line the child was killed while writing
            try:
                yield json.loads(line)
            except json.JSONDecodeError:
                continue


class EventTail:
    """Reads only what was appended since the last call (for live progress)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._path = Path(path)
        self._pos = 0
        self._partial = ""

    def new(self) -> list[dict[str, Any]]:
        if not self._path.exists():
            return []
        with self._path.open(encoding="utf-8", errors="replace") as f:
            f.seek(self._pos)
            chunk = f.read()
            self._pos = f.tell()
        text = self._partial + chunk
        lines = text.split("\n")
        self._partial = lines.pop()
        out = []
        for line in lines:
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                continue
        return out
