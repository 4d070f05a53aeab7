"""The test session's CLI server: one interpreter that imported the `torchmend` command line once (typer, rich,
libcst, every command and codemod: 1 to 2 CPU-s of every CLI process on this 2-core machine, a few hundred times
a session) forks one process per `torchmend(...)` call of tests/conftest.py, which then runs as
`python -m torchmend ARGS` run by subprocess.run would: its own argv, working folder, environment and sys.path[0],
the caller's stdin, stdout and stderr, the interpreter's own ending (atexit, `sys.exit("message")`, a traceback),
and its exit status, a signal's as subprocess gives it (negative).

It serves a call only where a fork cannot differ from a fresh interpreter: the caller's environment differs from
the server's in variables torchmend reads when it runs (TORCHMEND_*, PYTEST_*, GIT_*, HOME, PATH, tokens), not in
ones read at import (COLUMNS and NO_COLOR size and colour the consoles made at import, locales, PYTHON*), and the
working folder shadows no module already imported. Otherwise, or with no server (TORCHMEND_TEST_FRESH=1), the call
is a subprocess as before. Each test process (an xdist worker: its environment is not the controller's) starts its
own at its first call (conftest.torchmend) and serves from its second on.

`python tests/cli_server.py PATH`: serve on the Unix socket PATH until killed.
"""

from __future__ import annotations

import json
import os
import pkgutil
import re
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

MESSAGE = 1 << 22
_RUN_TIME_PREFIXES = ("TORCHMEND_", "PYTEST_", "GIT_")
_RUN_TIME = frozenset({"HOME", "PATH", "PWD", "OLDPWD", "_", "GH_TOKEN", "GITHUB_TOKEN", "GITLAB_TOKEN"})
_IMPORTS_TORCH = re.compile(r"^(import torch\b|from torch\b)", re.M)  # at module level: never in the server
_SKIPPED = ("torchmend.plugin", "torchmend.profiler.zygote", "torchmend.profiler.child")


def _preload() -> bool:
    """Import every torchmend module the command line may import, but none that imports torch (the CLI never does:
    the runs do). False if torch was imported anyway: nothing is served then."""
    import torchmend
    import torchmend.cli.main  # noqa: F401  (every command registers itself)

    for info in pkgutil.walk_packages(torchmend.__path__, "torchmend."):
        if info.name.startswith(_SKIPPED) or info.name.endswith("__main__"):  # __main__ would run the CLI
            continue
        spec = info.module_finder.find_spec(info.name, None)  # type: ignore[call-arg]
        origin = spec.origin if spec else None
        if origin and origin.endswith(".py") and not _IMPORTS_TORCH.search(Path(origin).read_text()):
            __import__(info.name)
    return "torch" not in sys.modules


def _why_not(request: dict[str, Any], started_with: dict[str, str]) -> str:
    """Why a fork could differ from a fresh interpreter for this call ("" if it cannot)."""
    env = request["env"]
    for key in sorted(set(env) | set(started_with)):
        if env.get(key) != started_with.get(key) and key not in _RUN_TIME and not key.startswith(_RUN_TIME_PREFIXES):
            return f"${key} differs"
    imported = {name.partition(".")[0] for name in sys.modules}
    for entry in os.scandir(request["cwd"]):
        name = entry.name[:-3] if entry.name.endswith(".py") else entry.name
        if name in imported and (entry.name.endswith(".py") or os.path.exists(os.path.join(entry.path, "__init__.py"))):
            return f"{entry.name} in the working folder shadows an imported module"
    return ""


def serve(path: str) -> dict[str, Any]:
    """Serve until killed; in a forked call's process, return its request (the caller runs it)."""
    started_with = dict(os.environ)
    ready = _preload()
    import gc

    gc.freeze()  # what the server imported is never collected in a call: its pages are not touched by the collector
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(path)
    listener.listen(64)
    listener.settimeout(5.0)
    parent = os.getppid()
    while os.getppid() == parent:  # its test process has gone (killed, crashed): so does the server
        _reap_waiters()
        try:
            conn, _ = listener.accept()
        except TimeoutError:
            continue
        conn.settimeout(None)
        msg, fds, _flags, _addr = socket.recv_fds(conn, MESSAGE, 3)
        request = json.loads(msg) if msg else {}
        why = "the server imported torch" if not ready else _why_not(request, started_with) if msg else "no request"
        if why or len(fds) != 3:
            conn.send(json.dumps({"fresh": why or "three streams are needed"}).encode())
        elif os.fork() == 0:  # the waiter: forks the call, says its pid and then its status
            listener.close()
            pid = os.fork()
            if pid == 0:
                conn.close()
                for std, fd in enumerate(fds):
                    os.dup2(fd, std)
                    os.close(fd)
                return request
            conn.send(json.dumps({"pid": pid}).encode())
            _, status = os.waitpid(pid, 0)
            conn.send(json.dumps({"returncode": os.waitstatus_to_exitcode(status)}).encode())
            os._exit(0)
        for fd in fds:
            os.close(fd)
        conn.close()
    sys.exit(0)


def _reap_waiters() -> None:
    """Reap the waiters that have ended (the server's only children)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def run_cli(request: dict[str, Any]) -> None:
    """In the call's process: become `python -m torchmend ARGS`, and end as the interpreter ends one (atexit, threads
    joined, the streams flushed: status 120 if that fails), without tearing down every object the server imported,
    which would copy each page of them out of the server's memory (measured: more system time than the imports)."""
    import atexit
    import runpy
    import threading
    import traceback

    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.path[0] = request["cwd"]  # `python -m` puts the working folder first
    sys.argv = ["torchmend", *request["args"]]
    code = 0
    try:
        runpy.run_module("torchmend", run_name="__main__", alter_sys=True)
    except SystemExit as e:
        code = _exit_status(e.code)
    except KeyboardInterrupt:
        code = -1
    except BaseException:
        traceback.print_exc()
        code = 1
    threading._shutdown()  # type: ignore[attr-defined]
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            code = code or 120
    if code == -1:  # as an interpreter that a Ctrl-C ended: killed by SIGINT
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    os._exit(code)


def _exit_status(code: object) -> int:
    """What the interpreter makes of sys.exit(code): None 0, an int itself, anything else printed and 1."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


def start(path: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """A server for this process's calls on the socket `path`, started with the environment they will have."""
    return subprocess.Popen(
        [sys.executable, __file__, str(path)],
        env=env,
        cwd="/",
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        start_new_session=True,
    )


def call(
    path: Path, args: list[str], cwd: Path, env: dict[str, str], timeout: float
) -> subprocess.CompletedProcess[str] | None:
    """The CLI forked by the server on `path`, as subprocess.run(text=True) would give it; None if not served."""
    with (
        socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as sock,
        open(os.devnull, "rb") as stdin,
        tempfile.TemporaryFile() as out,
        tempfile.TemporaryFile() as err,
    ):
        try:
            sock.connect(str(path))
        except OSError:
            return None
        request = {"args": args, "cwd": str(cwd), "env": env}
        socket.send_fds(sock, [json.dumps(request).encode()], [stdin.fileno(), out.fileno(), err.fileno()])
        reply = json.loads(sock.recv(MESSAGE) or b'{"fresh": "the server went"}')
        if "pid" not in reply:
            return None
        sock.settimeout(timeout)
        try:
            ended = json.loads(sock.recv(MESSAGE))
        except TimeoutError:
            os.kill(reply["pid"], signal.SIGKILL)
            raise subprocess.TimeoutExpired(["torchmend", *args], timeout) from None
        return subprocess.CompletedProcess(["torchmend", *args], ended["returncode"], _text(out), _text(err))


def _text(f: Any) -> str:
    """What subprocess.run(text=True) makes of the bytes: the locale's decoding, universal newlines."""
    import locale

    f.seek(0)
    return f.read().decode(locale.getpreferredencoding(False)).replace("\r\n", "\n").replace("\r", "\n")


if __name__ == "__main__":
    run_cli(serve(sys.argv[1]))
