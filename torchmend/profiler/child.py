"""Child-process entry: `python -m torchmend.profiler.child` with its settings in $TORCHMEND_CHILD.

Installs the collector, then runs the user's script as `python SCRIPT ARGS` would: same argv,
script directory first on sys.path, run as `__main__`. Every outcome ends with an END event.
"""

from __future__ import annotations

import json
import os
import runpy
import sys
import sysconfig
import traceback
from typing import Any

from torchmend.profiler.events import CHILD_ENV, END, START, EventSink


def _library_roots() -> list[str]:
    paths = sysconfig.get_paths()
    roots = {paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths}
    roots.update(p for p in sys.path if p.endswith(("site-packages", "dist-packages")))
    return sorted(os.path.realpath(r) for r in roots)


# Libraries with known hot spots (profiler/hotspots.py), whose release decides which advice applies.
_VERSIONED = ("transformers", "diffusers", "accelerate", "timm")


def _library_versions() -> dict[str, str]:
    from importlib import metadata

    versions = {}
    for name in _VERSIONED:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return versions


def start_fields(torch: Any) -> dict[str, Any]:
    """What the START event says about the process that runs the script (the child, or a test's own process for
    the pytest plugin): the torch and Python releases, where libraries live, and their versions."""
    return {
        "torch": torch.__version__,
        "python": sys.version.split()[0],
        "library_roots": _library_roots(),
        "torch_root": os.path.dirname(os.path.realpath(torch.__file__)),
        "pid": os.getpid(),
        "libraries": _library_versions(),
    }


def _user_traceback(exc: BaseException) -> str:
    """The traceback without torchmend's own frames, as the user would see it from plain python."""
    own = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the torchmend package
    tb = exc.__traceback__
    while tb is not None and (
        tb.tb_frame.f_code.co_filename.startswith(own) or tb.tb_frame.f_code.co_filename.startswith("<frozen runpy")
    ):
        tb = tb.tb_next
    return "".join(traceback.format_exception(type(exc), exc, tb))


def main() -> None:
    cfg = json.loads(os.environ.pop(CHILD_ENV))
    events = cfg["events"]
    if cfg.get("per_rank"):  # one child per rank under torchrun: each writes its own stream
        events = events.replace(".jsonl", f".rank{os.environ.get('RANK', '0')}.jsonl")
    sink = EventSink(events)
    script = cfg["script"]
    sys.argv = [script, *cfg["args"]]
    sys.path[0] = os.path.dirname(os.path.abspath(script))

    try:
        import torch
    except ImportError as e:
        sink.emit(END, reason="no_torch", error=str(e))
        sys.exit(1)

    sink.emit(START, **start_fields(torch))
    try:
        from torchmend.profiler import collector

        collector.install_trace_handler(sink)
        counter = collector.install_step_counter(sink, cfg.get("steps"))
        collector.install_terminate_handler(sink, counter)
        collector.install_numerics(tuple(cfg.get("outputs_of") or ()))
        if cfg.get("seed") is not None:  # both arms of a numerics comparison start alike
            from torchmend.profiler.numerics import seed_everything

            seed_everything(cfg["seed"])
        if cfg.get("backend") or cfg.get("compile"):
            collector.override_compile(cfg.get("backend"), sink, **cfg.get("compile", {}))
        else:
            collector.record_compile_calls(sink)
    except Exception as e:  # this torch lacks a hook we rely on: say so rather than run unobserved
        sink.emit(END, reason="internal_error", error=f"{type(e).__name__}: {e}", traceback=traceback.format_exc())
        sys.exit(1)

    texts: dict[str, str] = {}
    if cfg.get("overlay"):
        from torchmend.profiler import overlay

        with open(cfg["overlay"], encoding="utf-8") as f:
            texts = json.load(f)
        overlay.install(texts)
    try:
        if texts:
            overlay.run_main(script, texts)
        else:
            runpy.run_path(script, run_name="__main__")
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        if code != 0 and not isinstance(e.code, int):
            print(e.code, file=sys.stderr)
        sink.emit(
            END,
            reason="finished" if code == 0 else "exit",
            exit_code=code,
            **counter.fields(),
            **collector.memory_fields(),
            **collector.numerics_fields(),
        )
        _leave(code)
    except BaseException as e:  # the user's crash: report it as plain python would, then exit 1
        text = _user_traceback(e)
        sys.stderr.write(text)
        sink.emit(
            END,
            reason="error",
            error=f"{type(e).__name__}: {e}",
            traceback=text,
            **counter.fields(),
            **collector.memory_fields(),
            **collector.numerics_fields(),
        )
        _leave(1)
    sink.emit(
        END,
        reason="finished",
        exit_code=0,
        **counter.fields(),
        **collector.memory_fields(),
        **collector.numerics_fields(),
    )
    _leave(0)


def _leave(code: int) -> None:
    """Exit once the END event is out: the script's atexit handlers run (a DataLoader's workers, logging, a
    tracker's flush), then the process leaves without the interpreter's teardown, which after compiling takes
    1 to 2 s of every run (freeing dynamo's and the modules' objects) and changes nothing a run reports."""
    import atexit

    from torchmend.profiler.collector import flush_output

    flush_output()
    try:
        atexit._run_exitfuncs()
    finally:
        flush_output()
        os._exit(code)


if __name__ == "__main__":
    main()
