"""The fork server's own side (profiler/forkserver.py is the runner's): an interpreter that imports torch once and
forks one process per run, which then becomes what `python -m torchmend.profiler.child` would be.

`python -m torchmend.profiler.zygote --fd N`: one torchmend process's own server, on the socket it was handed. Each
run is forked through a middle process that exits at once, so the run is re-parented to that torchmend process
(its subreaper) and is its child as a subprocess would be.

`python -m torchmend.profiler.zygote --listen PATH`: a server shared by every torchmend process that names PATH in
$TORCHMEND_FORKSERVER (the test suite starts one for its session). It is the runs' parent itself (forked directly),
says on request whether a run has ended and how, and reaps it once it has said so.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import socket
import sys
from pathlib import Path
from typing import Any

MESSAGE = 1 << 22  # the largest request: a run's environment
_STARTED_WITH = dict(os.environ)  # before the imports, which may set variables of their own


def _preload() -> None:
    import torch

    if not any(Path("/dev").glob("nvidia[0-9]*")):  # CUDA is never touched here: see profiler/forkserver.py
        import torch._dynamo  # noqa: F401
        import torch._inductor.compile_fx  # noqa: F401
    import torchmend.profiler.child  # noqa: F401
    import torchmend.profiler.collector  # noqa: F401

    if torch.cuda.is_initialized():
        raise RuntimeError("CUDA was initialised before the fork")


def _ready() -> bool:
    try:
        _preload()
        import threading

        return threading.active_count() == 1  # a Python thread would be missing from every fork
    except BaseException:
        return False


def hello(ready: bool) -> bytes:
    """What a server says first: whether it serves, and the interpreter and environment its runs start from."""
    from torchmend.profiler.forkserver import key_of

    return json.dumps({"ready": ready, "python": sys.executable, "key": key_of(_STARTED_WITH)}).encode()


def _serve_one(fd: int) -> None:
    sock = socket.socket(fileno=fd)
    ready = _ready()
    sock.send(hello(ready))
    if not ready:
        return
    while True:
        try:
            msg, fds, _flags, _addr = socket.recv_fds(sock, MESSAGE, 2)
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
                    _reparented(os.getppid())
                    _run(request, fds, (sock,))
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


def _reparented(middle: int) -> None:
    """Wait for the middle process to go, so that the script sees the runner as its parent from its first line."""
    import time

    deadline = time.monotonic() + 5.0
    while os.getppid() == middle and time.monotonic() < deadline:
        time.sleep(0.001)


def _returncode(pid: int) -> int | None:
    """A run's exit status as subprocess gives it (negative: the signal), once it has ended; it is reaped then."""
    try:
        done, status = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return -1
    return os.waitstatus_to_exitcode(status) if done else None


def _serve_many(path: str) -> None:
    from torchmend.profiler.forkserver import become_subreaper

    become_subreaper()  # what the runs start and leave behind comes back here, not to init
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(path)
    listener.listen(64)
    ready = _ready()
    clients: list[socket.socket] = []
    owned: dict[int, socket.socket] = {}  # run pid -> the client that asked for it
    while True:
        readable, _, _ = select.select([listener, *clients], [], [], 0.5)
        for sock in readable:
            if sock is listener:
                conn, _ = listener.accept()
                conn.send(hello(ready))
                if ready:
                    clients.append(conn)
                else:
                    conn.close()
                continue
            try:
                msg, fds, _flags, _addr = socket.recv_fds(sock, MESSAGE, 2)
            except OSError:
                msg, fds = b"", []
            if not msg:
                clients.remove(sock)
                sock.close()
                continue
            request = json.loads(msg)
            reply: dict[str, Any]
            if request.get("op") == "poll":
                reply = {"returncode": _returncode(request["pid"])}
                if reply["returncode"] is not None:
                    owned.pop(request["pid"], None)
            else:
                pid = os.fork()
                if pid == 0:
                    listener.close()
                    _run(request, fds, tuple(clients))
                for f in fds:
                    os.close(f)
                owned[pid] = sock
                reply = {"pid": pid}
            with contextlib.suppress(OSError):
                sock.send(json.dumps(reply).encode())
        for pid in [p for p, c in owned.items() if c not in clients]:  # its runner has gone: reap it when it ends
            if _returncode(pid) is not None:
                del owned[pid]
        _reap_orphans(owned)


def _reap_orphans(owned: dict[int, socket.socket]) -> None:
    """Reap what the runs left behind and was re-parented here (a run's own runner reaps it by asking)."""
    with contextlib.suppress(ChildProcessError):
        while True:
            info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            if info is None or info.si_pid in owned:  # an owned run's status is its runner's to ask for
                return
            os.waitpid(info.si_pid, 0)


def _run(request: dict[str, Any], fds: list[int], sockets: tuple[socket.socket, ...]) -> None:
    """In the run's process: become what `python -m torchmend.profiler.child` started by the runner would be."""
    code = 1
    try:
        for s in sockets:
            s.close()
        os.setsid()
        stdin, out = fds
        os.dup2(stdin, 0)
        os.dup2(out, 1)
        os.dup2(out, 2)
        for f in fds:
            if f > 2:
                os.close(f)
        os.chdir(request["cwd"])
        imported = {k: v for k, v in os.environ.items() if k not in _STARTED_WITH}  # what the imports set
        os.environ.clear()
        os.environ.update(request["env"])
        for k, v in imported.items():  # as they would have in a fresh interpreter, where the run does not say
            os.environ.setdefault(k, v)
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
    if sys.argv[1:2] == ["--listen"]:
        _serve_many(sys.argv[2])
    else:
        _serve_one(int(sys.argv[2]))
