"""Parent side of a profiled run: start the child, enforce the time budget, report progress, collect events.

Never imports torch: the user's script, and torch with it, live only in the child.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from torchmend.interrupts import STOPPING, shielded
from torchmend.model import EndedBy
from torchmend.profiler import forkserver, sandbox
from torchmend.profiler.events import (
    CHILD_ENV,
    COMPILE_END,
    COMPILE_START,
    END,
    GRAPH_BREAK,
    STEP,
    EventTail,
    read_events,
)

_POLL_S = 0.1
_TERM_GRACE_S = 3.0
# Every process a run starts inherits this variable (value: a token of the run), so those that leave its process
# group (setsid, start_new_session=True) can still be found in /proc and stopped when the run ends.
RUN_MARKER = "TORCHMEND_RUN"
# The echo of a failed script's output: its last lines, and never more than this many bytes (a 50 MB line).
TAIL_LINES = 30
TAIL_BYTES = 8192
_LINE_BYTES = 1000


@dataclass(frozen=True)
class RunSpec:
    script: Path
    args: tuple[str, ...] = ()
    steps: int | None = None
    timeout: float | None = None
    backend: str | None = None
    cwd: Path | None = None
    python: str = sys.executable
    env: tuple[tuple[str, str], ...] = ()  # extra environment for the child (e.g. a seed)
    overlay: tuple[tuple[str, str], ...] = ()  # (absolute path, text): run these sources instead of the files
    seed: int | None = None  # seed torch, random and numpy before the script runs (numerics comparisons)
    launcher: tuple[str, ...] = ()  # torchrun options (e.g. --nproc-per-node 2): run one child per rank under it
    # tune's settings for every torch.compile call: mode, dynamic, eager (no compile); see collector.override_compile
    compile: tuple[tuple[str, Any], ...] = ()
    stdin: bool = False  # pass on torchmend's stdin if a pipe or file (not a terminal: prompts are captured)
    # modules (class names) whose calls' outputs are recorded, not each compiled callable's (profiler/outputs.py)
    outputs_of: tuple[str, ...] = ()

    @property
    def ranked(self) -> bool:
        return bool(self.launcher)

    def command(self) -> list[str]:
        if self.ranked:  # torchrun starts `python -m torchmend.profiler.child` once per rank
            return [self.python, "-m", "torch.distributed.run", *self.launcher, "-m", "torchmend.profiler.child"]
        return [self.python, "-m", "torchmend.profiler.child"]


@dataclass
class Progress:
    """What the run has shown so far; updated from the event stream while the child runs."""

    steps: int = 0
    compiles: int = 0
    breaks: int = 0
    recompiles: int = 0
    elapsed_s: float = 0.0

    def update(self, ev: dict[str, Any]) -> None:
        kind = ev.get("ev")
        if kind == STEP:
            self.steps = max(self.steps, ev.get("steps", 0))
        elif kind == COMPILE_START:
            self.compiles += 1
        elif kind == GRAPH_BREAK:
            self.breaks += 1
        elif kind == COMPILE_END and ev.get("recompile_reason"):
            self.recompiles += 1
        elif kind == END and ev.get("steps") is not None:
            self.steps = max(self.steps, ev["steps"])


@dataclass
class RunOutcome:
    events: list[dict[str, Any]]
    ended_by: EndedBy
    returncode: int | None
    wall_s: float
    output_tail: str
    end: dict[str, Any] = field(default_factory=dict)  # the END event, if the child wrote one
    # How a run without its END ended, in words: the signal, the real exit status, a full disk (ended_without_end)
    detail: str = ""
    # Processes the script started outside its process group (setsid): those stopped, those that could not be
    stopped: tuple[str, ...] = ()
    left_running: tuple[str, ...] = ()
    # The run worked in a copy of its working folder (profiler/sandbox.py): what was linked to the originals
    # instead of copied (large files, what was over the caps, a VCS's or an environment's folders), relative to it.
    linked: tuple[str, ...] = ()
    # Forked from the fork server (profiler/forkserver.py): torch, dynamo and inductor were imported before it began,
    # so its first compile and first step do not include those imports; only runs started alike are timed together.
    forked: bool = False

    def __post_init__(self) -> None:
        self.ended_by = EndedBy(self.ended_by)  # a word read from the END record: one of the set, or a ValueError

    @property
    def failed(self) -> bool:
        """The script itself failed (an exception, a non-zero exit, killed, gone without its end record), as
        opposed to a budget ending it."""
        return self.ended_by.failed

    @property
    def start(self) -> dict[str, Any]:
        return next((e for e in self.events if e.get("ev") == "start"), {})


def _tail(path: Path, max_lines: int = TAIL_LINES, max_bytes: int = TAIL_BYTES) -> str:
    """The last lines of the script's output, read from the end of the file: at most `max_lines` lines and
    `max_bytes` bytes, a line longer than _LINE_BYTES cut to its end (what was cut is said)."""
    try:
        with path.open("rb") as f:
            size = f.seek(0, os.SEEK_END)
            f.seek(max(0, size - 4 * max_bytes))
            data = f.read()
    except OSError:
        return ""
    lines = data.decode("utf-8", errors="replace").splitlines()
    if size > len(data) and lines:
        lines = lines[1:] or lines  # the first line read is a part of one
    shown: list[str] = []
    total = 0
    for line in reversed(lines[-max_lines:]):
        raw = len(line.encode("utf-8", errors="replace"))
        if raw > _LINE_BYTES:
            line = f"[... {raw - _LINE_BYTES} bytes of this line left out] " + line[-_LINE_BYTES:]
        if total + len(line) > max_bytes:
            break
        shown.append(line)
        total += len(line) + 1
    if size > total:
        skipped = size - total
        if not shown or skipped > len(data):
            shown.append(f"[... the output's first {skipped} bytes left out]")
    return "\n".join(reversed(shown))


def disk_full(folder: Path, output: str = "", look: bool = True) -> bool:
    """Whether a run's failure is a full disk: the output says ENOSPC, or (`look`) the folder's file system has
    less than 1 MiB free."""
    if "No space left on device" in output or "[Errno 28]" in output:
        return True
    if not look:
        return False
    try:
        st = os.statvfs(folder)
    except OSError:
        return False
    return st.f_bavail * st.f_frsize < 1 << 20


def ended_without_end(returncode: int | None, full_disk: bool, folder: Path) -> tuple[str, str]:
    """(ended_by, detail) for a child that ended without its END record: "killed" by a signal (the returncode
    is negative), else "lost": it exited with that status before the record could be written."""
    disk = (
        f"; the disk holding {folder} is full (No space left on device): free space there or point TMPDIR elsewhere"
        if full_disk
        else ""
    )
    if returncode is not None and returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        oom = " (the kernel's out-of-memory killer sends it)" if returncode == -signal.SIGKILL else ""
        return "killed", f"the script was killed by {name}{oom}{disk}"
    if returncode == 0:
        return "lost", (
            "the script exited with status 0 without torchmend's end record (os._exit in the script, or an exit "
            f"from a thread or a forked copy){disk}"
        )
    return "lost", (
        f"the script exited with status {returncode} before its end record could be written (an exception "
        f"whose traceback could not be written: a closed stderr, a full disk?){disk}"
    )


def _stop(proc: subprocess.Popen[bytes], workers: AbstractSet[int] = frozenset()) -> None:
    """Stop the child and everything it started (its own process group), and torchrun's workers, which torchrun
    starts in sessions of their own: SIGTERM, a grace period for the child to end, then SIGKILL for whatever is
    left of the groups (a subprocess that ignores SIGTERM, or that outlives its parent, is stopped too)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pgid in (*workers, proc.pid):
            try:
                os.killpg(pgid, sig)
            except (ProcessLookupError, PermissionError):
                pass
        if sig == signal.SIGTERM:
            _exited(proc, _TERM_GRACE_S)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5.0)


def _ended(proc: subprocess.Popen[bytes]) -> bool:
    """Whether the child has ended, without reaping it (as _exited): its pid, its process group's id, stays taken
    until the group is stopped."""
    if proc.returncode is not None:
        return True
    try:
        return os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except (AttributeError, ChildProcessError):
        return proc.poll() is not None


def _proc_fields(pid: str) -> list[str] | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _live_members(pgids: AbstractSet[int]) -> list[int]:
    """Live processes (not zombies) of these process groups, from /proc (empty where there is none)."""
    members = []
    for entry in os.scandir("/proc") if os.path.isdir("/proc") else ():
        if entry.name.isdigit():
            fields = _proc_fields(entry.name)
            if fields and fields[0] != "Z" and int(fields[2]) in pgids:
                members.append(int(entry.name))
    return members


def _marked(marker: str) -> list[int]:
    """Live processes (not this one) whose environment carries the run's marker: everything the run started,
    in its process group or escaped from it."""
    needle = marker.encode() + b"\0"
    found = []
    for entry in os.scandir("/proc") if os.path.isdir("/proc") else ():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = Path(f"/proc/{entry.name}/environ").read_bytes()
        except OSError:
            continue
        if (b"\0" + environ).find(b"\0" + needle) >= 0:
            fields = _proc_fields(entry.name)
            if fields and fields[0] != "Z":
                found.append(int(entry.name))
    return found


def _describe(pid: int) -> str:
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        cmd = ""
    return f"pid {pid} ({cmd[:80]})" if cmd else f"pid {pid}"


def _stop_leftovers(proc: subprocess.Popen[bytes], marker: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """At the end of every run: stop what is left of the script's process group, then whatever carries the run's
    marker outside it (setsid, start_new_session=True, torchrun's workers' groups): SIGTERM, a grace period,
    SIGKILL. Returns the escaped processes stopped, and those that could not be (named in a warning)."""
    # Only while the child is not reaped is its pid its group's id for sure (no other process can take it); the
    # workers' pids may have been reused by now, so what is left of their groups is found by the marker below.
    group = {proc.pid} if proc.returncode is None else set()
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if not group or not _live_members(group):  # the child itself is a zombie by now: not counted
            break
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
        deadline = time.monotonic() + (_TERM_GRACE_S if sig == signal.SIGTERM else 1.0)
        while _live_members(group) and time.monotonic() < deadline:
            time.sleep(0.05)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5.0)
    escaped = [pid for pid in _marked(marker) if pid != proc.pid]
    if not escaped:
        return (), ()
    names = {pid: _describe(pid) for pid in escaped}
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in escaped:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
        deadline = time.monotonic() + (_TERM_GRACE_S if sig == signal.SIGTERM else 1.0)
        while time.monotonic() < deadline:
            escaped = [pid for pid in escaped if _alive(pid)]
            if not escaped:
                break
            time.sleep(0.05)
    left = tuple(names[pid] for pid in escaped)
    return tuple(n for pid, n in names.items() if pid not in escaped), left


def _alive(pid: int) -> bool:
    fields = _proc_fields(str(pid))
    return fields is not None and fields[0] != "Z"


def _exited(proc: subprocess.Popen[bytes], timeout: float) -> None:
    """Wait up to `timeout` for the child to end, without reaping it: while it is a zombie its pid, which is its
    process group's id, cannot be taken by a new process, so the SIGKILL after this reaches its group only."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.returncode is None:
        try:
            if os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                return
        except (AttributeError, ChildProcessError):  # no waitid on this system, or reaped already
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            return
        time.sleep(0.05)


def _rank_of(path: Path) -> int | None:
    """events.rank3.jsonl -> 3; events.jsonl -> None."""
    stem = path.name.split(".")
    return int(stem[1][4:]) if len(stem) == 3 and stem[1].startswith("rank") and stem[1][4:].isdigit() else None


def _collect(workdir: Path) -> tuple[list[dict[str, Any]], dict[int | None, dict[str, Any]]]:
    """All events, each tagged with its rank in a ranked run, and the last END event of each process."""
    events: list[dict[str, Any]] = []
    ends: dict[int | None, dict[str, Any]] = {}
    for path in sorted(workdir.glob("events*.jsonl"), key=lambda p: _rank_of(p) or 0):
        rank = _rank_of(path)
        evs = read_events(path)
        if rank is not None:
            evs = [{**e, "rank": rank} for e in evs]
        events.extend(evs)
        end = next((e for e in reversed(evs) if e.get("ev") == END), None)
        if end is not None:
            ends[rank] = end
    return events, ends


def _deciding_end(
    spec: RunSpec, events: list[dict[str, Any]], ends: dict[int | None, dict[str, Any]]
) -> dict[str, Any]:
    """The END that says how the run ended: the first rank to fail, before rank 0's (when one rank fails,
    the others fail on the broken connection or get torchrun's SIGTERM, reported as a timeout). {} when a
    process ended without one."""
    if not spec.ranked:
        return ends.get(None, {})
    started = {e.get("rank") for e in events if e.get("ev") == "start"}
    failing = [
        ends[r]
        for r in sorted(ends, key=lambda r: -1 if r is None else r)
        if ends[r].get("reason") in ("error", "exit", "internal_error", "no_torch")
    ]
    if failing:
        return min(failing, key=lambda e: e.get("at", 0.0))
    if not ends or started - set(ends):
        return {}
    return ends[min(ends, key=lambda r: -1 if r is None else r)]


def _child_env(spec: RunSpec, workdir: Path, script: Path) -> tuple[dict[str, str], str]:
    """The child's environment (what the bootstrap reads, in CHILD_ENV; the overlay written into the run's folder),
    and the run's marker."""
    events_path = workdir / "events.jsonl"
    env = dict(os.environ)
    env.update(spec.env)
    env["PYTHONUNBUFFERED"] = "1"
    marker = f"{RUN_MARKER}={os.getpid()}-{secrets.token_hex(8)}"
    env[RUN_MARKER] = marker.split("=", 1)[1]
    if spec.ranked:  # torchrun leaves /tmp/torchelastic_* directories behind: keep them in our workdir
        (workdir / "tmp").mkdir()
        env["TMPDIR"] = str(workdir / "tmp")
    overlay_path = None
    if spec.overlay:
        overlay_path = workdir / "overlay.json"
        overlay_path.write_text(json.dumps(dict(spec.overlay)), encoding="utf-8")
    env[CHILD_ENV] = json.dumps(
        {
            "events": str(events_path),
            "script": str(script),
            "args": list(spec.args),
            "steps": spec.steps,
            "backend": spec.backend,
            "compile": dict(spec.compile),
            "overlay": str(overlay_path) if overlay_path else None,
            "seed": spec.seed,
            "per_rank": spec.ranked,
            "outputs_of": list(spec.outputs_of),
        }
    )
    return env, marker


def _passes_stdin(spec: RunSpec) -> bool:
    with contextlib.suppress(OSError):  # OSError: no stdin at all (closed)
        return spec.stdin and not os.isatty(0) and os.fstat(0) is not None
    return False


def run(
    spec: RunSpec,
    on_progress: Callable[[Progress], None] | None = None,
    keep_dir: Path | None = None,
) -> RunOutcome:
    """Run the script in a child process and return what it showed. Blocks until the run ends. Ctrl-C,
    SIGTERM or SIGHUP (raised as KeyboardInterrupt or interrupts.Stopped) stop the child's process group and
    remove the run's folder, and are raised on.

    The child works in a copy of the working folder (profiler/sandbox.py), removed after the run: every run starts
    from the files as they were, and none is written to the user's folder."""
    workdir = Path(tempfile.mkdtemp(prefix="torchmend-run-"))
    log_path = workdir / "output.log"
    script = spec.script.resolve()
    env, marker = _child_env(spec, workdir, script)
    progress = Progress()
    tails: dict[Path, EventTail] = {}
    workers: set[int] = set()
    timed_out = False
    box = sandbox.make(spec.cwd or Path.cwd())
    cwd = box.cwd if box is not None else (spec.cwd or Path.cwd())
    try:
        t0 = time.monotonic()
        with log_path.open("wb") as log:
            # in a session of its own, so a timeout or a signal can stop the script's own subprocesses too
            proc = forkserver.start(spec.command(), str(cwd), env, _passes_stdin(spec), log)
            try:
                while not _ended(proc):
                    time.sleep(_POLL_S)
                    progress.elapsed_s = time.monotonic() - t0
                    for path in workdir.glob("events*.jsonl"):
                        for ev in tails.setdefault(path, EventTail(path)).new():
                            progress.update(ev)
                            if ev.get("ev") == "start" and spec.ranked and ev.get("pid"):
                                workers.add(ev["pid"])
                    if on_progress:
                        on_progress(progress)
                    if spec.timeout is not None and progress.elapsed_s > spec.timeout:
                        timed_out = True
                        _stop(proc, workers)
            except STOPPING:
                # Ctrl-C, SIGTERM or SIGHUP (torchmend.interrupts): the child is in a session of its own, so
                # nothing else stops it. Stop it and everything it started, then let the stop go on up.
                with shielded():
                    _stop(proc, workers)
                    _stop_leftovers(proc, marker)
                raise
            wall = time.monotonic() - t0
            with shielded():  # the run owns what it started: nothing of it outlives it, whatever ended it
                stopped, left_running = _stop_leftovers(proc, marker)
        events, ends = _collect(workdir)
        end = _deciding_end(spec, events, ends)
        tail = _tail(log_path)
        detail = ""
        if timed_out and (not end or end.get("reason") == "timeout"):
            ended_by = "timeout"
        elif end:
            ended_by = end.get("reason", "finished")
            if ended_by in ("error", "exit") and disk_full(workdir, str(end.get("error") or "") + tail, look=False):
                detail = f"the disk holding {workdir} is full (No space left on device)"
        else:  # gone without a word: a signal, the OOM killer, os._exit, an END that could not be written
            ended_by, detail = ended_without_end(proc.returncode, disk_full(workdir, tail), workdir)
        outcome = RunOutcome(
            events,
            EndedBy(ended_by),
            proc.returncode,
            wall,
            tail,
            end,
            detail,
            stopped,
            left_running,
            tuple(box.linked) if box is not None else (),
            isinstance(proc, forkserver.Forked),
        )
        if keep_dir is not None:
            keep_dir.mkdir(parents=True, exist_ok=True)
            for src in (*workdir.glob("events*.jsonl"), log_path):
                if src.exists():
                    shutil.copy(src, keep_dir / src.name)
    finally:
        with shielded():
            shutil.rmtree(workdir, ignore_errors=True)
            if box is not None:
                box.remove()
    return outcome
