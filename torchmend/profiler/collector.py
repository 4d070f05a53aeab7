"""Torch-side hooks, installed in the child before the user's code runs (this module imports torch).

- A handler on PyTorch's structured-trace logger (`torch.__trace`, the records TORCH_TRACE writes)
  turns dynamo_start / compilation_metrics / dynamo_graph_break_reason records into our events.
- A global optimizer step post-hook counts steps and ends the run at the step budget.
- Optionally, every torch.compile call gets its backend replaced (scan --backend), or its mode and dynamic, or
  no compile at all (tune's settings).
- Every END event carries the peak memory (memory_fields).
- Unless $TORCHMEND_NO_NUMERICS is set, losses and final-parameter fingerprints for a numerics
  comparison (numerics.py); every END event carries them.
"""

from __future__ import annotations

import functools
import logging
import os
import signal
import sys
import time
from collections.abc import Callable
from types import FrameType
from typing import Any

import torch
import torch._logging._internal as _tlog
from torch.optim.optimizer import register_optimizer_step_post_hook

from torchmend.profiler.events import BACKEND_CHECK, COMPILE_CALL, COMPILE_START, END, OWN_MARKER, STEP, EventSink
from torchmend.profiler.numerics import DISABLE_ENV, NumericsCapture, install_backward_hooks
from torchmend.profiler.outputs import callable_name, install_output_hooks
from torchmend.profiler.records import RecordConverter

_numerics: NumericsCapture | None = None  # set by install_numerics


def _live_callers() -> list[list[Any]]:
    """The live Python stack, outermost first, without torch's own frames.

    The trace's dynamo_start stack can skip the frame that called the compiled function (a decorated
    function called from `main` lists `<module>` but not `main`); the live stack, read while dynamo
    starts compiling, still holds it.
    """
    stack: list[FrameType] = []
    f: FrameType | None = sys._getframe(1)
    while f is not None:
        stack.append(f)
        f = f.f_back
    frames = []
    contexts = getattr(sys.modules.get("torch._dynamo.eval_frame"), "_TorchDynamoContext", ())
    traced = False  # whether torch.compile's frame hook is on for the frames from here inwards
    for f in reversed(stack):
        name = f.f_code.co_filename
        if name == _EVAL_FRAME:
            context = f.f_locals.get("self")
            if contexts and isinstance(context, contexts):
                # compile_wrapper (an optimize context) turns the hook on; a disable context's _fn turns it off
                traced = callable(getattr(context, "callback", None))
        elif not name.startswith(_SKIP_DIRS):
            # A 4th element marks a frame that runs inside a compiled call (a resumed frame, or one called after a
            # graph break): a line added there is traced by dynamo, not run before the compiled call.
            frames.append([name, f.f_lineno, f.f_code.co_name, *([1] if traced else [])])
    return frames


_EVAL_FRAME = os.path.join(os.path.dirname(str(torch.__file__)), "_dynamo", "eval_frame.py")
# torch, torchmend and the logging package (the handler runs under it) are never the user's caller.
_SKIP_DIRS = tuple(os.path.dirname(str(m.__file__)) + os.sep for m in (torch, logging, sys.modules["torchmend"]))


class TraceHandler(logging.Handler):
    """Receives every structured-trace record in-process and forwards the few that matter."""

    def __init__(self, sink: EventSink) -> None:
        super().__init__(level=logging.DEBUG)
        self.sink = sink
        self.converter = RecordConverter()

    def emit(self, record: logging.LogRecord) -> None:
        md = getattr(record, "metadata", None)
        if not isinstance(md, dict):
            return
        try:
            converted = self.converter.convert(md, getattr(record, "payload", None))
            if converted is None:
                return
            ev, fields = converted
            if ev == COMPILE_START:
                fields["callers"] = _live_callers()
            self.sink.emit(ev, **fields)
        except Exception as e:  # a collector bug must never break the user's run
            self.sink.emit("collector_error", error=repr(e))


def install_trace_handler(sink: EventSink) -> TraceHandler:
    handler = TraceHandler(sink)
    _tlog.trace_log.setLevel(logging.DEBUG)
    _tlog.trace_log.addHandler(handler)

    # torch._logging.set_logs() (called by user scripts) clears the trace logger's handlers: re-add ours.
    original_init_logs = _tlog._init_logs

    @functools.wraps(original_init_logs)
    def _init_logs(*args: Any, **kwargs: Any) -> None:
        original_init_logs(*args, **kwargs)
        if handler not in _tlog.trace_log.handlers:
            _tlog.trace_log.addHandler(handler)

    _tlog._init_logs = _init_logs
    return handler


def install_numerics(outputs_of: tuple[str, ...] = ()) -> NumericsCapture | None:
    """Record losses (backward targets) and, at the end, fingerprints of the optimizers' parameters; the outputs of
    compiled callables, or with `outputs_of` those of the modules of these classes alone (NumericsCapture)."""
    global _numerics
    if os.environ.get(DISABLE_ENV, "") not in ("", "0"):
        return None
    _numerics = NumericsCapture(outputs_of=outputs_of)
    install_backward_hooks(_numerics)
    install_output_hooks(_numerics)
    return _numerics


def numerics_fields(budget_s: float | None = None) -> dict[str, Any]:
    """The END event's `losses`, `params` and `numerics`; nothing when the capture is off."""
    return _numerics.end_fields(budget_s) if _numerics is not None else {}


def end_now(sink: EventSink, reason: str, **fields: Any) -> None:
    """Record why the run ended and leave at once: user code gets no chance to swallow it."""
    if reason == "timeout" and _numerics is not None:
        # The parent kills us 3 s after its SIGTERM, and reading losses and parameters may wait on a
        # device (a hung one, even): write the event without them first; the parent keeps the last END.
        sink.emit(END, reason=reason, **fields, **memory_fields())
        sink.emit(END, reason=reason, **fields, **memory_fields(), **numerics_fields(budget_s=1.0))
    else:
        sink.emit(END, reason=reason, **fields, **memory_fields(), **numerics_fields())
    flush_output()
    os._exit(0)


def flush_output() -> None:
    """Python's stdout and stderr, then C's stdio (an extension's printf): os._exit flushes neither."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    try:
        import ctypes

        ctypes.CDLL(None).fflush(None)
    except Exception:
        pass


class StepCounter:
    """Counts optimizer steps through PyTorch's global post-hook; ends the run at the budget. Every step() of every
    optimizer is one step, so a script stepping two (a GAN's generator and discriminator) runs half as many
    iterations as steps: `optimizers` says how many stepped, for the report to say so."""

    def __init__(self, sink: EventSink, budget: int | None) -> None:
        self.sink = sink
        self.budget = budget
        self.steps = 0
        self.times: list[float] = []  # seconds since the counter was installed, at the end of each step
        self.optimizers: set[int] = set()  # id() of each optimizer that stepped (each lives as long as the run)
        self._t0 = time.monotonic()
        self._last_report = 0.0
        self._sync = False

    def fields(self) -> dict[str, Any]:
        """What an END event says of the steps."""
        return {"steps": self.steps, "step_times": self.times, "optimizers": len(self.optimizers)}

    def __call__(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        self.steps += 1
        self.optimizers.add(id(optimizer))
        if _numerics is not None:
            _numerics.see_optimizer(optimizer)
        if self._sync or torch.cuda.is_initialized():
            self._sync = True
            torch.cuda.synchronize()  # GPU work is asynchronous: a step ends when its kernels do
        now = time.monotonic()
        self.times.append(round(now - self._t0, 5))
        if self.budget is not None and self.steps >= self.budget:
            self.sink.emit(STEP, steps=self.steps)
            end_now(self.sink, "steps", **self.fields())
        if now - self._last_report > 0.25:
            self._last_report = now
            self.sink.emit(STEP, steps=self.steps)


def install_terminate_handler(sink: EventSink, counter: StepCounter) -> None:
    """The parent sends SIGTERM at the time budget: record the final step count before leaving."""

    def on_term(signum: int, frame: Any) -> None:
        end_now(sink, "timeout", **counter.fields())

    signal.signal(signal.SIGTERM, on_term)


def install_step_counter(sink: EventSink, budget: int | None) -> StepCounter:
    counter = StepCounter(sink, budget)
    # Disabled for dynamo: when the user compiles optimizer.step, the hook still runs eagerly each
    # step (a break after step()'s own deliberate graph_break) instead of being traced away.
    try:
        hook = torch._dynamo.disable(counter, reason=OWN_MARKER)
    except TypeError:  # a torch without disable(reason=)
        hook = torch._dynamo.disable(counter)
    register_optimizer_step_post_hook(hook)
    return counter


def override_backend(backend: str, sink: EventSink | None = None) -> None:
    """Make every torch.compile call in the script use `backend` (mode/options only mean something to inductor).

    With a sink, a failure of `backend` is checked against the backend the script asked for (see
    _CheckedBackend), so a report can say when the two disagree."""
    override_compile(backend, sink)


def override_compile(backend: str | None, sink: EventSink | None = None, **settings: Any) -> None:
    """Make every torch.compile call in the script use `backend` and the `settings` (tune's arms):
    `mode` (an inductor mode; the script's `options=` are dropped, since torch takes one or the other),
    `dynamic` (None, True or False), and `eager` (no compile at all: the model or function comes back as it is,
    the eager baseline). With a sink, each call is recorded as a COMPILE_CALL event (what the script asked for)."""
    original: Callable[..., Any] = torch.compile
    # One checking backend per (detection backend, script's backend), shared by every call: dynamo guards on the
    # backend's identity (BACKEND_MATCH), so a new one per call recompiled each module compiled from the same code
    # (FSDP2's blocks compiled one by one: a recompile per block that the script's own backend does not make).
    checkers: dict[tuple[str, str], _CheckedBackend] = {}

    @functools.wraps(original)
    def compile(model: Any = None, **kwargs: Any) -> Any:
        # The decorator form comes back from torch's own module with the function: it was recorded already.
        if sink is not None and sys._getframe(1).f_code.co_filename != torch.__file__:
            sink.emit(COMPILE_CALL, **_asked(kwargs), **_described(model))
        if settings.get("eager"):  # watched as a compiled callable would be: the outputs compare across modes
            watch = _numerics.watch if _numerics is not None and _numerics.watch is not None else None
            if watch is None:
                return model if model is not None else (lambda fn: fn)
            if model is not None:
                return watch(model, callable_name(model))
            return lambda fn: watch(fn, callable_name(fn))
        own = kwargs.get("backend", "inductor")
        target = own if backend is None else backend
        if "mode" in settings and target == "inductor":
            kwargs["mode"] = settings["mode"]
            kwargs.pop("options", None)
        if "dynamic" in settings:
            kwargs["dynamic"] = settings["dynamic"]
        if target != "inductor":
            kwargs.pop("mode", None)
            kwargs.pop("options", None)
        if backend is not None:
            # Only a named backend is tried on a failing graph (a callable of the script's own may count its calls),
            # and only for scan's detection backend: tune measures the backend it names, mode and all.
            checked = sink is not None and not settings and isinstance(own, str) and own != backend
            if checked and sink is not None:
                if (backend, own) not in checkers:
                    checkers[(backend, own)] = _CheckedBackend(backend, own, sink)
                kwargs["backend"] = checkers[(backend, own)]
            else:
                kwargs["backend"] = backend
        return original(model, **kwargs) if model is not None else original(**kwargs)

    torch.compile = compile


def record_compile_calls(sink: EventSink) -> None:
    """Record each torch.compile call of the script as a COMPILE_CALL event and change nothing (runs on the
    script's own backend: verify judges their times only when that backend is not a proxy)."""
    original: Callable[..., Any] = torch.compile

    @functools.wraps(original)
    def compile(model: Any = None, **kwargs: Any) -> Any:
        if sys._getframe(1).f_code.co_filename != torch.__file__:
            sink.emit(COMPILE_CALL, **_asked(kwargs), **_described(model))
        return original(model, **kwargs) if model is not None else original(**kwargs)

    torch.compile = compile


def _asked(kwargs: dict[str, Any]) -> dict[str, Any]:
    """What a torch.compile call asked for, as JSON: backend, mode, dynamic, and the names of its options."""
    backend = kwargs.get("backend", "inductor")
    return {
        "backend": backend if isinstance(backend, str) else _backend_name(backend),
        "mode": kwargs.get("mode"),
        "dynamic": kwargs.get("dynamic"),
        "options": sorted(kwargs.get("options") or {}),
    }


def _described(model: Any) -> dict[str, Any]:
    """Where the call is and, for a module, its tree (modtree.py): what compile placement reads."""
    from torchmend.profiler.modtree import caller_outside_torch, module_tree

    try:  # a description that fails costs the placement advice, never the user's run
        tree = module_tree(model) if model is not None else None
        return {"at": caller_outside_torch(), **({"modules": tree} if tree is not None else {})}
    except Exception:  # noqa: BLE001
        return {}


def memory_fields() -> dict[str, Any]:
    """The END event's peak memory: the process's peak resident set (MiB) and, when the script allocated memory
    on CUDA, torch.cuda.max_memory_allocated (MiB) and the device's name.

    CUDA being initialised is not the script using it: inductor initialises CUDA while it compiles a model that
    lives on the CPU (seen on torch 2.11, H100), and such a run's GPU peak is 0. Reporting that 0 as the run's
    peak made `tune` show a CPU script's compiled settings at 0 MiB beside eager's resident set (issue 32)."""
    import resource

    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux, bytes on macOS
    fields: dict[str, Any] = {"peak_rss_mb": round(rss / (1024 * 1024 if sys.platform == "darwin" else 1024), 1)}
    try:
        if torch.cuda.is_initialized() and (peak := torch.cuda.max_memory_allocated()) > 0:
            fields["cuda_peak_mb"] = round(peak / 2**20, 2)
            fields["cuda_device"] = torch.cuda.get_device_name()
    except Exception:  # a broken device: the run's other figures still stand
        pass
    return fields


def _backend_name(backend: Any) -> str:
    return backend if isinstance(backend, str) else getattr(backend, "__name__", type(backend).__name__)


class _CheckedBackend:
    """The detection backend, which, when it fails on a graph, hands the same graph to the script's own
    backend and records whether that one compiles it (then re-raises: dynamo sees the detection backend's
    failure, as it would without the check). Only failures pay for the second compile."""

    def __init__(self, detect: str, own: Any, sink: EventSink) -> None:
        from torch._dynamo.backends.registry import lookup_backend

        self.detect, self.own, self.sink = detect, own, sink
        self.__name__ = detect  # torch names the backend after this in its messages
        self._detect_fn = lookup_backend(detect)

    def __call__(self, gm: Any, example_inputs: Any, **kwargs: Any) -> Any:
        try:
            return self._detect_fn(gm, example_inputs, **kwargs)
        except Exception:
            from torch._dynamo.backends.registry import lookup_backend
            from torch._guards import CompileContext

            cid = CompileContext.current_compile_id()
            error = None
            try:
                lookup_backend(self.own)(gm, example_inputs)
            except Exception as e:  # the script's backend fails too
                error = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300]
            frame = f"{cid.frame_id}/{cid.frame_compile_id}" if cid is not None else None  # as compile_end's id
            self.sink.emit(
                BACKEND_CHECK,
                compile_id=frame,
                detect=self.detect,
                own=_backend_name(self.own),
                own_compiles=error is None,
                own_error=error,
            )
            raise

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        # A compiled model the script pickles names its backend: make that the plain detection backend, never
        # torchmend (pickling must behave as it does without the check).
        from torch._dynamo.backends.registry import lookup_backend

        return lookup_backend, (self.detect,)
