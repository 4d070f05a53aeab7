"""The whole zoo: every `transformers` model class that builds from its config at train_model.py's small size and
runs one eager step, written to models-zoo.txt (one class a line, with how the list was made; the classes left out
and why, as comments at the end).

    /work/corpus/venv/bin/python benchmarks/corpus/make_zoo.py [--jobs 2] [--timeout 120] [--out FILE]

Runs in the benchmark venv (transformers installed). The candidates are the names `transformers` exports that end
in `Model` and are `PreTrainedModel` subclasses with a `config_class` (the `...PreTrainedModel` bases are not).
Each candidate is checked exactly as run.py's check stage does (`train_model.py NAME --eager --steps 1`, train mode),
but in a child forked from this process, which has imported transformers and every modeling module already: one
import instead of one per class. A class passes when that child exits 0 within the time limit. The models of
models-eval.txt and models-eval-26.txt are never run (not even checked): they are left out of the zoo by name.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import signal
import sys
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
NEVER = ("models-eval.txt", "models-eval-26.txt")  # evaluation sets: never run while developing


def read_names(path: Path) -> list[str]:
    if not path.exists():
        return []
    return [n for n in (line.split("#", 1)[0].strip() for line in path.read_text().splitlines()) if n]


def candidates() -> tuple[list[str], dict[str, str]]:
    """(model classes, {name: why not a candidate} for the `*Model` names that fail to import)."""
    import transformers  # type: ignore[import-not-found]

    found, skipped = [], {}
    for name in sorted(dir(transformers)):
        if not name.endswith("Model") or name.endswith("PreTrainedModel") or name.startswith(("TF", "Flax")):
            continue
        try:
            obj = getattr(transformers, name)
        except Exception as e:  # an optional dependency missing: the class is not available here
            skipped[name] = f"import: {type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}"
            continue
        if not (isinstance(obj, type) and issubclass(obj, transformers.PreTrainedModel)):
            continue
        if getattr(obj, "config_class", None) is None:
            skipped[name] = "no config_class"
            continue
        found.append(name)
    return found, skipped


def child(name: str, log: Path) -> None:
    """In the forked child: train_model.main(NAME --eager --steps 1), output to `log`; exits 0 or 1."""
    import torch
    import train_model

    torch.set_num_threads(1)
    code = 0
    with log.open("w") as f, contextlib.redirect_stdout(f), contextlib.redirect_stderr(f):
        try:
            train_model.main([name, "--eager", "--steps", "1"])
        except BaseException as e:  # SystemExit too: the script's own "no generic input" refusal
            code = e.code if isinstance(e, SystemExit) and isinstance(e.code, int) else 1
            traceback.print_exc()
        f.flush()
    os._exit(code)


def last_error(log: Path) -> str:
    lines = [ln.strip() for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    for ln in reversed(lines):
        if "Error" in ln or "Exception" in ln or ln.startswith("no generic input") or "SystemExit" in ln:
            return ln[:200]
    return (lines[-1] if lines else "no output")[:200]


def check_all(names: list[str], jobs: int, timeout: float, logs: Path) -> dict[str, str | None]:
    """{name: None (passed) or why it failed}, `jobs` forked children at a time."""
    logs.mkdir(parents=True, exist_ok=True)
    todo = list(names)
    running: dict[int, tuple[str, float]] = {}
    result: dict[str, str | None] = {}
    while todo or running:
        while todo and len(running) < jobs:
            name = todo.pop(0)
            pid = os.fork()
            if pid == 0:
                child(name, logs / f"{name}.log")
            running[pid] = (name, time.monotonic())
        time.sleep(0.05)
        for pid, (name, start) in list(running.items()):
            done, status = os.waitpid(pid, os.WNOHANG)
            if done == 0:
                if time.monotonic() - start > timeout:
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
                    result[name] = f"timeout ({timeout:.0f} s)"
                    del running[pid]
                continue
            del running[pid]
            code = os.waitstatus_to_exitcode(status)
            result[name] = None if code == 0 else f"exit {code}: {last_error(logs / f'{name}.log')}"
            print(f"[{len(result)}/{len(names)}] {name}: {result[name] or 'ok'}", flush=True)
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=2, help="children at a time (default 2)")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per class (default 120)")
    ap.add_argument("--out", type=Path, default=HERE / "models-zoo.txt")
    ap.add_argument("--logs", type=Path, default=Path(os.environ.get("TMPDIR", "/tmp")) / "corpus-zoo-logs")
    a = ap.parse_args()
    sys.path.insert(0, str(HERE))
    never = {n for f in NEVER for n in read_names(HERE / f)}
    start = time.time()
    with contextlib.redirect_stderr(io.StringIO()):  # import-time warnings of ~400 modeling modules
        names, skipped = candidates()
    import torch
    import transformers

    run = [n for n in names if n not in never]
    print(f"{len(names)} candidates, {len(names) - len(run)} evaluation models left out, {len(run)} to check",
          flush=True)  # fmt: skip
    result = check_all(run, a.jobs, a.timeout, a.logs)
    ok = [n for n in run if result.get(n) is None]
    failed = {n: why for n in run if (why := result.get(n))}
    header = [
        f"# The whole zoo: transformers {transformers.__version__} model classes that build from their config at",
        "# train_model.py's small size and run one eager train step (`train_model.py NAME --eager --steps 1`).",
        f"# Made by benchmarks/corpus/make_zoo.py (torch {torch.__version__}, {time.strftime('%Y-%m-%d', time.gmtime())},"
        f" {time.time() - start:.0f} s, --jobs {a.jobs} --timeout {a.timeout:.0f}):",
        f"# {len(names)} `*Model` classes with a config_class; {len(names) - len(run)} evaluation models never run"
        " (models-eval.txt, models-eval-26.txt) and not listed;",
        f"# {len(ok)} pass (listed), {len(failed)} fail (commented at the end); {len(skipped)} `*Model` names not"
        " importable or without a config.",
    ]
    lines = header + ok + ["", "# fail the eager check:"]
    lines += [f"# {n}: {why}" for n, why in failed.items()]
    lines += ["", "# not candidates:"] + [f"# {n}: {why}" for n, why in sorted(skipped.items())]
    a.out.write_text("\n".join(lines) + "\n")
    print(f"wrote {a.out}: {len(ok)} pass, {len(failed)} fail")


if __name__ == "__main__":
    main()
