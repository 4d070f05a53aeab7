"""Runs forked from a server that imported torch once (the runner's side; profiler/zygote.py is the server's).

Every run used to start a fresh interpreter that imported torch, dynamo and inductor: about 5 s of a 2-core
machine's time before the script's first line, for every run of a fix (the scan, each arm of each round, each
probe). A command that runs the script more than once (fix, verify) warms a server of its own: one interpreter,
started with the runs' environment, that imports those once and forks one process per run, which then sets itself
up as `python -m torchmend.profiler.child` would: its own session, its output to the run's log, its stdin, its
folder, its environment, the random generators seeded at import drawn afresh. That run is this process's own child,
as a plain subprocess is: the server forks a middle process that forks the run's and exits, and this process is
the children's subreaper (Linux's PR_SET_CHILD_SUBREAPER), so the orphan is re-parented here, its exit status is
ours to wait for, and its pid stays taken until we reap it.

A server shared by many torchmend processes (the test suite starts one for its session) is named by
$TORCHMEND_FORKSERVER, the path of its socket; it is its runs' parent and says when they end. Every run whose
interpreter and environment it serves is forked there, a scan's too.

Not used (a fresh interpreter instead) for runs under torchrun, off Linux, with TORCHMEND_FRESH_INTERPRETER=1, and
whenever a server cannot start or serve. A server serves one interpreter and one environment: a run whose
environment differs in anything torch or Python may read at import (everything but torchmend's own variables, the
test runner's, the terminal's, git's and a forge's, and the caches a run sets for itself) gets a server of its own,
or a fresh interpreter. Where an NVIDIA device is present only torch itself is imported before the fork
(importing it never touches CUDA, as a DataLoader's forked workers rely on); dynamo's and inductor's imports wait
for the child.
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
import threading
import time
from collections.abc import Mapping
from typing import IO, Any

from torchmend.interrupts import shielded

FRESH_ENV = "TORCHMEND_FRESH_INTERPRETER"  # set to 1: every run starts a fresh interpreter
SHARED_ENV = "TORCHMEND_FORKSERVER"  # the socket of a server shared by many torchmend processes
# Read when used, never at import by torch or Python: these may differ between the server and a run.
# TERM among them: a run under a pseudo-terminal (TERM=dumb, or the user's own terminal's) is the same run for torch.
_PER_RUN = frozenset(
    {
        "TORCHINDUCTOR_CACHE_DIR",
        "TRITON_CACHE_DIR",
        "PYTHONUNBUFFERED",
        "COLUMNS",
        "LINES",
        "TERM",
        "NO_COLOR",
        "FORCE_COLOR",
        # the forge's and proxies': `fix --pr` reads them in this process (git, the forge's API), never torch
        "NO_PROXY",
        "no_proxy",
        "GITHUB_TOKEN",
        "GH_TOKEN",
        "GITLAB_TOKEN",
    }
)
# GIT_*: git's own configuration; TM_BENCH_*: the knobs of torchmend's benchmark scenarios, read by the script
_PER_RUN_PREFIXES = ("TORCHMEND_", "PYTEST_", "GIT_", "TM_BENCH_")
_CHILD = ["-m", "torchmend.profiler.child"]
_READY_S = 180.0  # a server's imports: a fresh interpreter's, on a loaded machine
_MESSAGE = 1 << 22
_PR_SET_CHILD_SUBREAPER = 36


def key_of(env: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """What of an environment a server must share with a run: all of it but what is read when used."""
    return tuple(sorted((k, v) for k, v in env.items() if k not in _PER_RUN and not k.startswith(_PER_RUN_PREFIXES)))


def _fresh_asked(env: Mapping[str, str]) -> bool:
    return env.get(FRESH_ENV, "") not in ("", "0")


class Forked:
    """A run forked by this process's own server, re-parented here: the parts of subprocess.Popen the runner uses."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None

    def _status(self) -> int | None:
        try:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:  # reaped elsewhere: its status is lost
            return -1
        return os.waitstatus_to_exitcode(status) if pid else None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self._status()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(str(self.pid), timeout or 0.0)
            time.sleep(0.02)
        assert self.returncode is not None
        return self.returncode


class SharedForked(Forked):
    """A run forked by a shared server, which is its parent: the server says when it has ended."""

    def __init__(self, pid: int, server: _Link) -> None:
        super().__init__(pid)
        self.server = server

    def _status(self) -> int | None:
        reply = self.server.ask({"op": "poll", "pid": self.pid})
        code = reply.get("returncode", -1) if reply is not None else -1  # the server gone: so is what it knew
        return code if isinstance(code, int) or code is None else -1


class _Link:
    """The socket to a server and what it said first: whether it serves, which interpreter, which environment."""

    def __init__(self, sock: socket.socket, proc: subprocess.Popen[bytes] | None = None) -> None:
        self.sock = sock
        self.proc = proc  # our own server's process (None: a shared one)
        self.lock = threading.Lock()
        self._hello: dict[str, Any] | None = None

    def hello(self) -> dict[str, Any]:
        """Waits for the server's imports, in slices (Ctrl-C reaches us meanwhile; our own server goes with us)."""
        if self._hello is None:
            try:
                self._hello = self._wait()
            except BaseException:
                self.close()
                raise
        return self._hello

    def _wait(self) -> dict[str, Any]:
        self.sock.settimeout(0.2)
        deadline = time.monotonic() + _READY_S
        while time.monotonic() < deadline:
            try:
                msg = self.sock.recv(_MESSAGE)
            except TimeoutError:
                if self.proc is not None and self.proc.poll() is not None:
                    return {}
                continue
            except OSError:
                return {}
            self.sock.settimeout(None)
            return json.loads(msg) if msg else {}
        return {}

    def serves(self, python: str, env: Mapping[str, str]) -> bool:
        said = self.hello()
        key = [list(kv) for kv in key_of(env)]
        return said.get("ready") is True and said.get("python") == python and said.get("key") == key

    def ask(self, request: dict[str, Any], fds: tuple[int, ...] = ()) -> dict[str, Any] | None:
        with self.lock, shielded():  # a request asked is one whose answer we read: a fork we know of
            try:
                socket.send_fds(self.sock, [json.dumps(request).encode()], list(fds))
                reply = json.loads(self.sock.recv(_MESSAGE) or b"null")
            except (OSError, ValueError):
                return None
        return reply if isinstance(reply, dict) else None

    def fork(self, cwd: str, env: Mapping[str, str], stdin: int, stdout: int) -> Forked | None:
        reply = self.ask({"op": "fork", "cwd": cwd, "env": dict(env)}, (stdin, stdout))
        pid = reply.get("pid") if reply is not None else None
        if not isinstance(pid, int):
            return None
        return Forked(pid) if self.proc is not None else SharedForked(pid, self)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()  # our own server leaves at the end of its socket
        if self.proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=5.0)
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
        self._hello = {}


def _own(python: str, env: Mapping[str, str]) -> _Link:
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    proc = subprocess.Popen(
        [python, "-m", "torchmend.profiler.zygote", "--fd", str(theirs.fileno())],
        env={**dict(key_of(env)), "PYTHONUNBUFFERED": "1"},
        cwd="/",
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        pass_fds=(theirs.fileno(),),
        start_new_session=True,  # the terminal's Ctrl-C is the runs' to get, not the server's
    )
    theirs.close()
    return _Link(ours, proc)


_own_server: _Link | None = None
_shared: dict[str, _Link] = {}
_subreaper: bool | None = None


def become_subreaper() -> bool:
    """Make this process the subreaper of what it starts (Linux); whether it is."""
    global _subreaper
    if _subreaper is None:
        try:
            _subreaper = sys.platform == "linux" and ctypes.CDLL(None).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
        except (OSError, AttributeError):
            _subreaper = False
    return _subreaper


def warm(python: str = sys.executable) -> None:
    """Start a server of this process's own for its runs, unless one serves them: called where a command will run
    the script more than once (fix, verify). It imports in the background; the first run forked waits for it. A
    process that never calls this starts a fresh interpreter for each run (a scan runs once: a server of its own
    would cost it more), unless a shared server serves it."""
    global _own_server
    if _own_server is not None or _fresh_asked(os.environ) or _shared_link(python, os.environ) is not None:
        return
    if become_subreaper():
        _own_server = _own(python, os.environ)
        atexit.register(stop)


def _shared_link(python: str, env: Mapping[str, str]) -> _Link | None:
    path = env.get(SHARED_ENV, "")
    if not path or sys.platform != "linux":
        return None
    link = _shared.get(path)
    if link is None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        link = _shared[path] = _Link(sock)
        try:
            sock.connect(path)
        except OSError:  # no server there (any more): it serves nothing, and is not asked again
            link.close()
    return link if link.serves(python, env) else None


def _server_for(python: str, env: Mapping[str, str]) -> _Link | None:
    global _own_server
    if _fresh_asked(env):
        return None
    shared = _shared_link(python, env)
    if shared is not None:
        return shared
    if _own_server is None:
        return None
    if not _own_server.serves(python, env):  # another interpreter or environment: a server of its own
        if _own_server.hello().get("ready") is not True:
            return None  # it cannot serve: this process's runs start fresh interpreters
        stop()
        _own_server = _own(python, env)
        atexit.register(stop)
    return _own_server if _own_server.serves(python, env) else None


def serving(python: str, env: Mapping[str, str]) -> bool:
    """Whether runs of this interpreter, with this extra environment, are forked now (where this process's own
    server serves another environment, the one these runs will be forked from is started in its place)."""
    return _server_for(python, {**os.environ, **env}) is not None


def start(command: list[str], cwd: str, env: dict[str, str], pass_stdin: bool, log: IO[bytes]) -> Any:
    """Start a run: a fork where a server serves its interpreter and environment and the command is this package's
    child entry, else a fresh interpreter (subprocess.Popen). The run reads this process's stdin with
    `pass_stdin`, else /dev/null."""
    server = _server_for(command[0], env) if command[1:] == _CHILD else None
    if server is not None:
        with open(os.devnull, "rb") as devnull:
            forked = server.fork(cwd, env, 0 if pass_stdin else devnull.fileno(), log.fileno())
        if forked is not None:
            return forked
        server.close()  # it cannot serve: the runs it would have forked start fresh interpreters from now on
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
    """Stop this process's own server (at exit, or for a test that wants a new one)."""
    global _own_server
    if _own_server is not None:
        _own_server.close()
        _own_server = None
