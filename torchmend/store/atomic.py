"""Replacing files atomically, all or nothing, in their own encoding: each file checked first (unchanged, writable,
in the project, its new text encodable), written to a temporary file beside it and renamed over it, signals deferred
until every file is replaced or put back."""

from __future__ import annotations

import contextlib
import os
import signal
import stat
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

from torchmend.sources import Encoding, decode
from torchmend.store.state import WriteRefused, project_lock

STALE = "changed since it was scanned; run torchmend again on the new version"
# What to do about a read-only file, in the options of the command that meets it (undo says its own).
READ_ONLY = "make it writable (chmod u+w), or leave its findings out with --ignore CODE"


def check(path: str, expected: str, after: str, project: Path, stale: str, read_only: str = READ_ONLY) -> Encoding:
    real = os.path.realpath(path)
    if not real.startswith(str(project.resolve()) + os.sep):
        link = f" (a symbolic link to {real})" if real != os.path.abspath(path) else ""
        raise WriteRefused(f"{path}{link} is outside the project ({project}); torchmend never edits files there")
    try:
        current, encoding = decode(Path(path).read_bytes(), path)
    except OSError as e:
        raise WriteRefused(f"cannot read {path}: {e}") from e
    if current != expected:
        raise WriteRefused(f"{path} {stale}")
    try:
        encoding.encode(after)
    except UnicodeEncodeError as e:
        raise WriteRefused(
            f"the new text of {path} has {after[e.start : e.end]!r}, which its encoding ({encoding.codec}) cannot hold"
        ) from e
    # The owner's write bit too: root may write anywhere, but a file marked read-only was marked so on purpose.
    if not os.access(path, os.W_OK) or not os.stat(real).st_mode & stat.S_IWUSR:
        raise WriteRefused(f"{path} is read-only; {read_only}")
    if not os.access(os.path.dirname(real), os.W_OK | os.X_OK):
        raise WriteRefused(f"cannot create a file in {os.path.dirname(real)} (needed to replace {path} atomically)")
    return encoding


def replace(path: str, data: bytes) -> None:
    """Replace the file's bytes atomically (a fsynced temporary file renamed over it), mode, owner and group kept."""
    real = os.path.realpath(path)
    st = os.stat(real)
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(real)}.", suffix=".torchmend", dir=os.path.dirname(real))
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        if (st.st_uid, st.st_gid) != (os.geteuid(), os.getegid()):
            try:
                os.chown(tmp, st.st_uid, st.st_gid)
            except PermissionError:  # not root: a user cannot give a file away (it becomes theirs), a group maybe
                with contextlib.suppress(PermissionError):
                    os.chown(tmp, -1, st.st_gid)
        os.chmod(tmp, stat.S_IMODE(st.st_mode))  # after chown, which may clear set-id bits
        os.replace(tmp, real)
        fsync_dir(os.path.dirname(real))
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def fsync_dir(directory: str | Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def deferred_signals() -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP wait until the block is done (every file replaced, or put back); then the
    first one is acted on: SIGINT raises KeyboardInterrupt, the others get their earlier handler (in the CLI:
    torchmend.interrupts.Stopped is raised, exit 143 or 129; by default the process ends)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    got: list[int] = []
    sigs = [signal.SIGINT, signal.SIGTERM, signal.SIGHUP]
    old = {s: signal.signal(s, lambda n, _f: got.append(n)) for s in sigs}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        if got:
            if got[0] == signal.SIGINT:
                raise KeyboardInterrupt
            os.kill(os.getpid(), got[0])


def _test_fault(written: int) -> None:
    spec = os.environ.get("TORCHMEND_TEST_SIGNAL_AFTER_WRITE", "")
    if spec:
        n, _, name = spec.partition(":")
        if int(n) == written:
            os.kill(os.getpid(), getattr(signal, f"SIG{name or 'KILL'}"))


def replace_all(data: dict[str, tuple[bytes, bytes]]) -> None:
    """Replace each file's bytes (before, after) with its after-bytes, or none: a failure puts back the files
    already replaced. Raises WriteRefused."""
    done: list[str] = []
    try:
        for path, (_, after) in data.items():
            replace(path, after)
            done.append(path)
            _test_fault(len(done))
    except OSError as e:
        for put_back in done:
            replace(put_back, data[put_back][0])
        raise WriteRefused(f"writing {path} failed ({e.strerror or e}); nothing was changed") from e


def write_all(changes: dict[str, tuple[str, str]], project: Path, stale: str = STALE) -> None:
    """Write every (before, after) change, or none, without an undo record (write_fix() keeps one). Raises
    WriteRefused (`stale`: what to say of a file whose text is not the expected `before`)."""
    with project_lock(project, create=False):
        encodings = {path: check(path, before, after, project, stale) for path, (before, after) in changes.items()}
        with deferred_signals():
            replace_all({p: (encodings[p].encode(b), encodings[p].encode(a)) for p, (b, a) in changes.items()})
