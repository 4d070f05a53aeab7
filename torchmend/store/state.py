"""Where the undo records live (the state folder) and the project's lock: one writer at a time. WriteRefused and
ProjectBusy are what a write that cannot be made raises."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path


class WriteRefused(Exception):
    """Nothing was written: the message says which file and why."""


class ProjectBusy(WriteRefused):
    """Another torchmend held the project's lock (writing or undoing) for longer than we wait; nothing was written."""


def state_dir() -> Path:
    """Where undo records live, always an absolute path: $TORCHMEND_STATE_DIR (made absolute), else
    $XDG_STATE_HOME/torchmend, else ~/.local/state/torchmend. A relative $XDG_STATE_HOME is ignored, as the XDG
    base directory spec says (it would put the journal inside whatever folder torchmend runs from)."""
    if os.environ.get("TORCHMEND_STATE_DIR"):
        return Path(os.path.abspath(os.environ["TORCHMEND_STATE_DIR"]))
    xdg = os.environ.get("XDG_STATE_HOME", "")
    base = xdg if os.path.isabs(xdg) else os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(os.path.abspath(base)) / "torchmend"


def undo_dir(project: Path) -> Path:
    key = hashlib.sha256(str(project.resolve()).encode()).hexdigest()[:16]
    return state_dir() / "undo" / f"{project.resolve().name}-{key}"


def check_state_dir(project: Path, create: bool = True) -> Path:
    """The project's undo folder; raises WriteRefused when it cannot hold a record (checked before anything is
    written: a write without its undo record is never made). `create`: make the folder (a write is about to use
    it); else, where it does not exist yet, check that the nearest folder above it takes a new file and make
    nothing, so a command that in the end writes nothing leaves no empty folder behind."""
    folder = undo_dir(project)
    probe_in = folder
    try:
        if create:
            folder.mkdir(parents=True, exist_ok=True)
        else:
            while not probe_in.exists() and probe_in != probe_in.parent:
                probe_in = probe_in.parent
            if not probe_in.is_dir():
                raise NotADirectoryError(20, "Not a directory", str(probe_in))
        fd, probe = tempfile.mkstemp(prefix=".probe-", dir=probe_in)
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise WriteRefused(
            f"cannot keep undo records in {folder} ({e.strerror or e}); set TORCHMEND_STATE_DIR to a writable folder"
        ) from e
    return folder


def _lock_wait() -> float:
    try:
        wait = float(os.environ.get("TORCHMEND_LOCK_WAIT", "10"))
    except ValueError:
        return 10.0
    return wait if wait >= 0 and wait != float("inf") else 10.0


@contextlib.contextmanager
def project_lock(project: Path, create: bool = True) -> Iterator[None]:
    """Hold the project's lock: an exclusive flock on its undo folder (a lock on the folder itself, so a
    read-only state folder can still be locked). Waits up to $TORCHMEND_LOCK_WAIT seconds (10) for another
    torchmend to finish, then raises ProjectBusy. A folder that cannot be made or opened (`create`: try to make
    it) is not locked: nothing can journal there either, and the caller's own check refuses what needs it."""
    folder = undo_dir(project)
    try:
        if create:
            folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        yield
        return
    try:
        deadline, pause = time.monotonic() + _lock_wait(), 0.002
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise ProjectBusy(
                        f"another torchmend is writing or undoing a fix of {project.resolve()} (it holds the lock "
                        f"on {folder}); waited {_lock_wait():g} s. Try again when it is done "
                        "($TORCHMEND_LOCK_WAIT sets the seconds to wait)"
                    ) from None
                time.sleep(pause)
                pause = min(pause * 2, 0.05)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock
