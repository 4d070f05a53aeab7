"""A fork server for the runs: torch imported once, each run a fork of it.

Every run used to start a fresh interpreter that imported torch, dynamo and inductor: about 5 s of a 2-core
machine's time before the script's first line, for every run of a fix (the scan, each arm of each round, each
probe). A command that runs the script more than once (fix, verify, tune) warms a server: one interpreter, started
with the runs' environment, that imports those once and forks one process per run, which then sets itself up as
`python -m torchmend.profiler.child` would: its own session, its output to the run's log, its stdin, its folder,
its environment, the random generators seeded at import drawn afresh.

The child is the runner's own child, as a plain subprocess is: the server forks a middle process that forks the
run's process and exits, and this process is the children's subreaper (Linux's PR_SET_CHILD_SUBREAPER), so the
orphan is re-parented here, its exit status is ours to wait for, and its pid stays taken until we reap it.

Not used (a fresh interpreter instead) for runs under torchrun, off Linux, with TORCHMEND_FRESH_INTERPRETER=1, and
whenever the server cannot start or serve. A server serves one interpreter and one environment: a run whose
environment differs in anything but the variables a run sets for itself (read when used, not at import) gets a
new server. Where an NVIDIA device is present only torch itself is imported before the fork (importing it never
touches CUDA, as a DataLoader's forked workers rely on); dynamo's and inductor's imports wait for the child.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

from torchmend.interrupts import shielded

FRESH_ENV = "TORCHMEND_FRESH_INTERPRETER"  # set to 1: every run starts a fresh interpreter
# What a run sets for itself and torch reads when it uses it, never at import: these may differ from the server's.
PER_RUN = frozenset(
    {
        "TORCHMEND_RUN",
        "TORCHMEND_CHILD",
        "TORCHMEND_NO_NUMERICS",
        "TORCHINDUCTOR_CACHE_DIR",
        "TRITON_CACHE_DIR",
        "PYTHONUNBUFFERED",
    }
)
_READY_S = 180.0  # the server's imports: a fresh interpreter's, on a loaded machine
_MESSAGE = 1 << 22
_PR_SET_CHILD_SUBREAPER = 36


class Forked:
    """A run's process forked by the server: the parts of subprocess.Popen the runner uses."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:  # reaped elsewhere: its status is lost
                self.returncode = -1
                return self.returncode
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(str(self.pid), timeout or 0.0)
            time.sleep(0.02)
        assert self.returncode is not None
        return self.returncode


class _Server:
    def __init__(self, python: str, key: tuple[tuple[str, str], ...]) -> None:
        self.python = python
        self.key = key
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.sock = ours
        env = dict(key)
        env["PYTHONUNBUFFERED"] = "1"
        self.proc = subprocess.Popen(
            [python, "-m", "torchmend.profiler.forkserver", str(theirs.fileno())],
            env=env,
            cwd="/",
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            pass_fds=(theirs.fileno(),),
            start_new_session=True,  # the terminal's Ctrl-C is the runs' to get, not the server's
        )
        theirs.close()
        self._ready: bool | None = None  # not known until its imports are done: asked for at the first fork

    @property
    def ready(self) -> bool:
        if self._ready is None:
            try:
                self._ready = self._wait()
            except BaseException:  # Ctrl-C while it imports: it goes with us
                self.close()
                raise
        return self._ready

    def _wait(self) -> bool:
        self.sock.settimeout(0.2)
        deadline = time.monotonic() + _READY_S
        while time.monotonic() < deadline:  # in slices: Ctrl-C reaches us while the server imports
            try:
                msg = self.sock.recv(_MESSAGE)
            except TimeoutError:
                if self.proc.poll() is not None:
                    return False
                continue
            except OSError:
                return False
            self.sock.settimeout(None)
            return bool(msg) and json.loads(msg).get("ready") is True
        return False

    def fork(self, cwd: str, env: Mapping[str, str], stdin: int, stdout: int) -> Forked | None:
        request = json.dumps({"cwd": cwd, "env": dict(env)}).encode()
        try:
            socket.send_fds(self.sock, [request], [stdin, stdout])
            reply = json.loads(self.sock.recv(_MESSAGE) or b"{}")
        except (OSError, ValueError):
            return None
        return Forked(reply["pid"]) if isinstance(reply.get("pid"), int) else None

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()  # the server leaves at the end of its socket
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5.0)
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


_server: _Server | None = None
_subreaper: bool | None = None


def _become_subreaper() -> bool:
    global _subreaper
    if _subreaper is None:
        try:
            _subreaper = sys.platform == "linux" and ctypes.CDLL(None).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
        except (OSError, AttributeError):
            _subreaper = False
    return _subreaper


def key_of(env: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """The environment a server is started with: the run's, less what a run sets for itself."""
    return tuple(sorted((k, v) for k, v in env.items() if k not in PER_RUN))


def warm(python: str = sys.executable) -> None:
    """Start a server for this process's runs, if none serves it yet: called where a command will run the script
    more than once (fix, verify, tune). It imports in the background; the first run forked waits for it. A process
    that never calls this starts a fresh interpreter for each run (a scan runs once: a server would cost more)."""
    global _server
    if _server is None and os.environ.get(FRESH_ENV, "") in ("", "0") and _become_subreaper():
        _server = _Server(python, key_of(os.environ))
        atexit.register(stop)


def serving(python: str, env: Mapping[str, str]) -> bool:
    """Whether runs of this interpreter with this extra environment are forked now (the server has imported)."""
    return (
        _server is not None
        and _server.python == python
        and _server.key == key_of({**os.environ, **env})
        and os.environ.get(FRESH_ENV, "") in ("", "0")
        and env.get(FRESH_ENV, "") in ("", "0")
        and _server.ready
    )


def start(command: list[str], cwd: str, env: dict[str, str], pass_stdin: bool, log: IO[bytes]) -> Any:
    """Start a run: a fork of the server where one was warmed for this process and the command is this package's
    child entry, else a fresh interpreter (subprocess.Popen). The run reads this process's stdin with
    `pass_stdin`, else /dev/null."""
    global _server
    if (
        _server is not None
        and command[1:] == ["-m", "torchmend.profiler.child"]
        and env.get(FRESH_ENV, "") in ("", "0")
    ):
        key = key_of(env)
        if _server.key != key or _server.python != command[0]:  # another environment: a server of its own
            stop()
            _server = _Server(command[0], key)
            atexit.register(stop)
        if _server.ready:
            with shielded(), open(os.devnull, "rb") as devnull:  # a fork asked for is one we know of
                forked = _server.fork(cwd, env, 0 if pass_stdin else devnull.fileno(), log.fileno())
            if forked is not None:
                return forked
            _server.close()  # it cannot serve: this environment's runs start fresh interpreters from now on
            _server._ready = False
    return subprocess.Popen(
        command,
        cwd=cwd,
        env=env,
        stdin=None if pass_stdin else subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # so a timeout or a signal can stop the script's own subprocesses too
    )


def stop() -> None:
    """Stop the server (at exit, or for a test that wants a new one)."""
    global _server
    if _server is not None:
        _server.close()
        _server = None


# ---------------------------------------------------------------------------------------------- the server's side


def _preload() -> None:
    import torch

    if not any(Path("/dev").glob("nvidia[0-9]*")):  # see the module's docstring: CUDA is never touched here
        import torch._dynamo  # noqa: F401
        import torch._inductor.compile_fx  # noqa: F401
    import torchmend.profiler.child  # noqa: F401
    import torchmend.profiler.collector  # noqa: F401

    if torch.cuda.is_initialized():
        raise RuntimeError("CUDA was initialised before the fork")


def _serve(fd: int) -> None:
    sock = socket.socket(fileno=fd)
    try:
        _preload()
        import threading

        ready = threading.active_count() == 1  # a Python thread would be missing from every fork
    except BaseException:
        ready = False
    sock.send(json.dumps({"ready": ready}).encode())
    if not ready:
        return
    while True:
        try:
            msg, fds, _flags, _addr = socket.recv_fds(sock, _MESSAGE, 2)
        except OSError:
            return
        if not msg:
            return  # the runner has gone
        request = json.loads(msg)
        # The middle process forks the run's and exits; its pid comes back through a pipe, and the runner hears of it
        # only once the middle one is reaped, so that by then the run's process is the runner's child.
        read_end, write_end = os.pipe()
        middle = os.fork()
        if middle == 0:
            try:
                os.close(read_end)
                pid = os.fork()
                if pid == 0:
                    os.close(write_end)
                    _run(request, fds, sock)
                os.write(write_end, str(pid).encode())
            finally:
                os._exit(0)
        os.close(write_end)
        for f in fds:
            os.close(f)
        with os.fdopen(read_end, "rb") as r:
            said = r.read().decode()
        os.waitpid(middle, 0)
        sock.send(json.dumps({"pid": int(said)} if said.isdigit() else {"error": "the fork failed"}).encode())


def _run(request: dict[str, Any], fds: list[int], sock: socket.socket) -> None:
    """In the run's process: become what `python -m torchmend.profiler.child` started by the runner would be."""
    code = 1
    try:
        sock.close()
        os.setsid()
        stdin, out = fds
        os.dup2(stdin, 0)
        os.dup2(out, 1)
        os.dup2(out, 2)
        for f in fds:
            if f > 2:
                os.close(f)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        _fresh_state()
        from torchmend.profiler import child

        child.main()  # ends the process itself (os._exit) once the script has run
        code = 0
    except SystemExit as e:  # child.main's own early exits (no torch, a missing hook)
        code = e.code if isinstance(e.code, int) else 1
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _fresh_state() -> None:
    """What a fresh interpreter has that a fork does not: its own random state where it is drawn at import (Python's
    random reseeds itself after a fork; torch's CPU generator and numpy's global one do not: CUDA's are made on
    first use, in the child), and dynamo's debug folder under the run's working folder, read at import from the
    current one."""
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.default_generator.seed()
    numpy_random = sys.modules.get("numpy.random")
    if numpy_random is not None:
        numpy_random.seed()
    config = sys.modules.get("torch._dynamo.config")
    default = getattr(config, "default_debug_dir_root", None)
    if config is not None and callable(default):
        setattr(config, "debug_dir_root", default())  # noqa: B010 (a module found at run time)


if __name__ == "__main__":
    _serve(int(sys.argv[1]))
