"""Recording a block of code's compilation in this process (the pytest plugin: the test's objects are live, so
there is no child to run them in). It imports torch: only the plugin's marked tests and fixture load it.

The events are the child's, made by the same pieces: the collector's TraceHandler on PyTorch's structured-trace
logger (records.py turns each record into an event, so a test and a scan read a record alike), a START event as
child.py writes it, and an END event for how the block ended. `findings.analyse()` takes them unchanged.

What is changed while recording is put back when it stops: the trace logger's level, its handlers (those not
torch's are taken off while recording), its propagation, and torch._logging's `_init_logs` (wrapped, as the child
wraps it, so a `set_logs()` inside the block keeps the handler). Dynamo is reset before (the block compiles from scratch: what it shows is its own compilation) and
after (the next test starts from nothing it left).
"""

from __future__ import annotations

import functools
import logging
import time
import traceback
from typing import Any

import torch
import torch._logging._internal as _tlog

from torchmend.profiler import collector
from torchmend.profiler.child import start_fields
from torchmend.profiler.events import END, START, EventSink


class MemorySink(EventSink):
    """An EventSink that keeps its events in a list instead of a file."""

    def __init__(self) -> None:  # no file: EventSink's own __init__ opens one
        self._t0 = time.monotonic()
        self.events: list[dict[str, Any]] = []

    def emit(self, ev: str, **fields: Any) -> None:
        fields["ev"] = ev
        fields["t"] = round(time.monotonic() - self._t0, 4)
        self.events.append(fields)


def _interned() -> dict[int, str]:
    """The file names PyTorch interned before recording began: each is written to the trace only the first time,
    so a handler added later must be told them, or a stack would name files by number."""
    try:
        from torch._logging.structured import INTERN_TABLE
    except ImportError:  # a torch without the table: file names interned from now on still arrive
        return {}
    return {index: text for text, index in INTERN_TABLE.items()}


class Recording:
    """Records what torch.compile does between start() and stop(); stop() returns the events."""

    def __init__(self, reset: bool = True) -> None:
        self.reset = reset
        self.sink = MemorySink()
        self._handler: collector.TraceHandler | None = None
        self._level = logging.NOTSET
        self._propagate = False
        self._detached: list[logging.Handler] = []
        self._init_logs: Any = None
        self._t0 = 0.0

    def start(self) -> None:
        if self.reset:
            torch._dynamo.reset()
        self.sink.emit(START, **start_fields(torch), in_process=True)
        handler = collector.TraceHandler(self.sink)
        handler.converter.strings.update(_interned())
        self._level = _tlog.trace_log.level
        _tlog.trace_log.setLevel(logging.DEBUG)
        # At DEBUG each trace record would reach every other handler: the root logger's through propagation, and
        # those pytest's log capture puts on non-propagating loggers too (pytest 9), which showed hundreds of empty
        # `torch.__trace` lines under each failure. Kept from both while recording, as torch's set_logs() keeps
        # it from the root's; torch's own handlers (TORCH_TRACE's) stay.
        self._propagate = _tlog.trace_log.propagate
        _tlog.trace_log.propagate = False
        self._detached = [h for h in _tlog.trace_log.handlers if not type(h).__module__.startswith("torch.")]
        for h in self._detached:
            _tlog.trace_log.removeHandler(h)
        _tlog.trace_log.addHandler(handler)
        self._handler = handler
        self._init_logs = _tlog._init_logs

        @functools.wraps(self._init_logs)
        def _init_logs(*args: Any, **kwargs: Any) -> None:  # set_logs() clears the trace logger's handlers
            self._init_logs(*args, **kwargs)
            if handler not in _tlog.trace_log.handlers:
                _tlog.trace_log.addHandler(handler)

        _tlog._init_logs = _init_logs
        self._t0 = time.monotonic()

    def stop(self, error: BaseException | None = None) -> list[dict[str, Any]]:
        """Stop recording; `error`: the exception that ended the block (its END says so, as a failed script's
        does, so a dynamo crash is named as scan names it)."""
        wall = time.monotonic() - self._t0
        if self._handler is not None:
            _tlog.trace_log.removeHandler(self._handler)
            _tlog.trace_log.setLevel(self._level)
            _tlog.trace_log.propagate = self._propagate
            for h in self._detached:
                _tlog.trace_log.addHandler(h)
            self._detached = []
            _tlog._init_logs = self._init_logs
            self._handler = None
        if error is None:
            self.sink.emit(END, reason="finished", exit_code=0, steps=0, wall_s=round(wall, 4))
        else:
            self.sink.emit(
                END,
                reason="error",
                error=f"{type(error).__name__}: {error}",
                traceback="".join(traceback.format_exception(type(error), error, error.__traceback__)),
                steps=0,
                wall_s=round(wall, 4),
            )
        if self.reset:
            torch._dynamo.reset()
        return self.sink.events
