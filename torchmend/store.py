"""Reading and writing sources byte for byte, a write-ahead undo journal, and undo (the ground floor: the CLI,
the pipeline, vcs and the benchmarks all write sources through here; it imports only torchmend.sources).

Bytes: sources are read and written in their own encoding (torchmend/sources.py), so the bytes outside the
edits do not change.

All or nothing: every file is checked first (unchanged since it was scanned, writable, in the project, its new
text encodable), then the undo record is written as a journal *before* the first file is replaced: a unique
name created exclusively (a hard link of a fsynced temporary file), state "pending". Each file is written to a
temporary file beside it (mode, owner and group kept) and renamed over it, with SIGINT/SIGTERM/SIGHUP deferred
until every file is replaced or rolled back; then the record is marked "complete". A failure half way puts back
the files already replaced. A pending record whose writer is gone (killed) is an incomplete write: rollback()
puts back the files it had replaced (`torchmend undo` and the next `torchmend fix` do it). Damaged records are
reported and skipped. A record may also hold a "report" (Markdown) that `torchmend pr` puts in the pull request.

One writer at a time: write_fix(), write_all(), undo() and rollback() hold the project's lock (an exclusive flock on
its undo folder in the state folder) from the check "unchanged since the scan" to the last rename, so two fixes
of one project can never both pass the check; the second waits up to $TORCHMEND_LOCK_WAIT seconds (10) and then
finds the file changed (WriteRefused), or gives up with ProjectBusy.

TORCHMEND_TEST_SIGNAL_AFTER_WRITE=N:SIG (e.g. 1:KILL, 1:TERM) exists for the fault tests only
(tests/e2e/test_faults.py): the process sends itself SIG right after replacing its N-th file.
"""

from __future__ import annotations

import contextlib
import fcntl
import glob
import hashlib
import json
import os
import secrets
import signal
import stat
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from torchmend.sources import Encoding, decode


class WriteRefused(Exception):
    """Nothing was written: the message says which file and why."""


class ProjectBusy(WriteRefused):
    """Another torchmend held the project's lock (writing or undoing) for longer than we wait; nothing was written."""


# ------------------------------------------------------------------------------------------- the state dir


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


def check_state_dir(project: Path) -> Path:
    """The project's undo folder, created if needed; raises WriteRefused when it cannot hold a record (checked
    before anything is written: a write without its undo record is never made)."""
    folder = undo_dir(project)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".probe-", dir=folder)
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


# ------------------------------------------------------------------------------------------------ writing


_STALE = "changed since it was scanned; run torchmend again on the new version"


def _check(path: str, expected: str, after: str, project: Path, stale: str) -> Encoding:
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
        raise WriteRefused(f"{path} is read-only; make it writable (chmod u+w) or leave it out with --ignore")
    if not os.access(os.path.dirname(real), os.W_OK | os.X_OK):
        raise WriteRefused(f"cannot create a file in {os.path.dirname(real)} (needed to replace {path} atomically)")
    return encoding


def _replace(path: str, data: bytes) -> None:
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
        _fsync_dir(os.path.dirname(real))
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _fsync_dir(directory: str | Path) -> None:
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


def _replace_all(data: dict[str, tuple[bytes, bytes]]) -> None:
    """Replace each file's bytes (before, after) with its after-bytes, or none: a failure puts back the files
    already replaced. Raises WriteRefused."""
    done: list[str] = []
    try:
        for path, (_, after) in data.items():
            _replace(path, after)
            done.append(path)
            _test_fault(len(done))
    except OSError as e:
        for put_back in done:
            _replace(put_back, data[put_back][0])
        raise WriteRefused(f"writing {path} failed ({e.strerror or e}); nothing was changed") from e


def write_all(changes: dict[str, tuple[str, str]], project: Path, stale: str = _STALE) -> None:
    """Write every (before, after) change, or none, without an undo record (write_fix() keeps one). Raises
    WriteRefused (`stale`: what to say of a file whose text is not the expected `before`)."""
    with project_lock(project, create=False):
        encodings = {path: _check(path, before, after, project, stale) for path, (before, after) in changes.items()}
        with deferred_signals():
            _replace_all({p: (encodings[p].encode(b), encodings[p].encode(a)) for p, (b, a) in changes.items()})


# ------------------------------------------------------------------------------------------- undo records


@dataclass(frozen=True)
class UndoRecord:
    path: Path  # the JSON record
    project: str
    created: str
    files: dict[str, tuple[str, str]]  # path -> (before, after)
    summary: str = ""  # the fixes, "TM101 train.py:14; TM201 model.py:30"
    report: str | None = None  # Markdown: findings, changes, verification (torchmend.vcs.body.fix_report); optional
    encodings: dict[str, Encoding] = field(default_factory=dict, compare=False)  # absent: UTF-8, no BOM
    complete: bool = True  # False: a write that never finished (the process was killed): rollback() it

    @property
    def patch(self) -> Path:
        return self.path.with_suffix(".patch")

    def encoding(self, path: str) -> Encoding:
        return self.encodings.get(path, Encoding())


@dataclass(frozen=True)
class Records:
    complete: list[UndoRecord]  # newest last
    incomplete: list[UndoRecord]  # writes that never finished, their writer gone
    damaged: list[tuple[Path, str]]  # record files that cannot be read, and why


def _new_name(folder: Path) -> Path:
    # Sorted by name = by time; the pid and a random part keep two writers in the same instant apart.
    ns = time.time_ns()
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(ns // 10**9))
    return folder / f"{stamp}-{ns % 10**9:09d}-{os.getpid()}-{secrets.token_hex(3)}.json"


def _write_json(path: Path, record: dict, exclusive: bool, lock: bool = False) -> int | None:
    """Write `record` to `path` atomically and durably; `exclusive`: fail with FileExistsError if it exists.
    `lock`: return a descriptor holding an exclusive flock on the record, taken before it appears."""
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    held = None
    try:
        if lock:
            held = os.dup(fd)
            fcntl.flock(held, fcntl.LOCK_EX)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(record, f, indent=1)
            f.flush()
            os.fsync(f.fileno())
        if exclusive:
            os.link(tmp, path)  # atomic and exclusive: the record appears whole, and never over another
            os.unlink(tmp)
        else:
            os.replace(tmp, path)
        _fsync_dir(path.parent)
        return held
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        if held is not None:
            os.close(held)
        raise


def _record_json(
    changes: dict[str, tuple[str, str]],
    encodings: dict[str, Encoding],
    project: Path,
    summary: str,
    report: str | None,
    state: str,
) -> dict:
    record = {
        "project": str(project.resolve()),
        "created": time.strftime("%Y-%m-%d %H:%M:%S"),
        "summary": summary,
        "state": state,
        "pid": os.getpid(),
        "files": {
            p: {
                "before": b,
                "after": a,
                "encoding": encodings.get(p, Encoding()).codec,
                "bom": encodings.get(p, Encoding()).bom,
            }
            for p, (b, a) in changes.items()
        },
    }
    if report is not None:
        record["report"] = report
    return record


def _create_record(folder: Path, record: dict, lock: bool = False) -> tuple[Path, int | None]:
    while True:
        path = _new_name(folder)
        try:
            return path, _write_json(path, record, exclusive=True, lock=lock)
        except FileExistsError:
            continue


def _to_record(path: Path, data: dict) -> UndoRecord:
    files = {p: (f["before"], f["after"]) for p, f in data["files"].items()}
    encodings = {p: Encoding(f.get("encoding", "utf-8"), bool(f.get("bom", False))) for p, f in data["files"].items()}
    return UndoRecord(
        path,
        data["project"],
        data["created"],
        files,
        data.get("summary", ""),
        data.get("report"),
        encodings,
        data.get("state", "complete") == "complete",
    )


def save_undo(
    changes: dict[str, tuple[str, str]], project: Path, patch: str, summary: str, report: str | None = None
) -> UndoRecord:
    """Save the undo record of a write already made (write_fix() journals it before writing instead). `report`
    (optional, Markdown from torchmend.vcs.body.fix_report) is what `torchmend pr` puts in the pull request."""
    folder = check_state_dir(project)
    data = _record_json(changes, {}, project, summary, report, "complete")
    path, _ = _create_record(folder, data)
    _write_patch(path, patch)
    return _to_record(path, data)


def _write_patch(record: Path, patch: str | bytes) -> None:
    tmp = record.with_name(f".{record.stem}.patch.tmp")
    tmp.write_bytes(patch if isinstance(patch, bytes) else patch.encode("utf-8", "surrogateescape"))
    os.replace(tmp, record.with_suffix(".patch"))


def write_fix(
    changes: dict[str, tuple[str, str]], project: Path, patch: str | bytes, summary: str, report: str | None = None
) -> UndoRecord:
    """Write every (before, after) change, or none, journaled: the undo record exists (state pending, fsynced)
    before the first file is replaced and is marked complete after the last. Raises WriteRefused (nothing was
    written, and no record is left)."""
    folder = check_state_dir(project)
    with project_lock(project):  # from the check to the last rename: no other fix of the project in between
        encodings = {p: _check(p, before, after, project, _STALE) for p, (before, after) in changes.items()}
        return _journaled_write(changes, encodings, project, folder, patch, summary, report)


def _journaled_write(
    changes: dict[str, tuple[str, str]],
    encodings: dict[str, Encoding],
    project: Path,
    folder: Path,
    patch: str | bytes,
    summary: str,
    report: str | None,
) -> UndoRecord:
    data = _record_json(changes, encodings, project, summary, report, "pending")
    both = {p: (encodings[p].encode(b), encodings[p].encode(a)) for p, (b, a) in changes.items()}
    with deferred_signals():
        # The lock is held while pending: a live write is never taken for a killed one.
        try:
            path, lock = _create_record(folder, data, lock=True)
        except OSError as e:
            raise WriteRefused(f"cannot write the undo record in {folder} ({e.strerror or e})") from e
        assert lock is not None
        try:
            try:
                _replace_all(both)
            except WriteRefused:
                _discard(path)
                raise
            try:
                _write_patch(path, patch)
                data["state"] = "complete"
                _write_json(path, data, exclusive=False)
            except OSError as e:  # the record cannot be finished (a full disk?): put the files back
                _replace_all({p: (a, b) for p, (b, a) in both.items()})
                _discard(path)
                raise WriteRefused(
                    f"cannot finish the undo record {path} ({e.strerror or e}); the files were put "
                    "back, nothing was changed"
                ) from e
        finally:
            os.close(lock)
    return _to_record(path, data)


def _discard(path: Path) -> None:
    for p in (path, path.with_suffix(".patch")):
        with contextlib.suppress(FileNotFoundError):
            p.unlink()


def _in_progress(path: Path) -> bool:
    """Whether a live process still holds this pending record (its lock)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def records(project: Path) -> Records:
    """Every record of the project: complete (newest last), incomplete (their writer gone) and damaged."""
    complete, incomplete, damaged = [], [], []
    folder = undo_dir(project)
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            record = _to_record(path, json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
            why = f"not valid JSON ({e.msg})" if isinstance(e, json.JSONDecodeError) else f"unreadable ({e!r})"
            damaged.append((path, why))
            continue
        if record.complete:
            complete.append(record)
        elif not _in_progress(path):
            incomplete.append(record)
    return Records(complete, incomplete, damaged)


def undo_records(project: Path) -> list[UndoRecord]:
    """The project's complete undo records, newest last (damaged and incomplete ones left out: see records())."""
    return records(project).complete


def rollback(record: UndoRecord) -> list[str]:
    """Finish an incomplete write backwards: every file the killed write had replaced gets its bytes from before
    back; temporary files it left are removed. Returns the files that are neither as before nor as after (edited
    since: left alone, named). The record is discarded when nothing is left alone."""
    left: list[str] = []
    with project_lock(Path(record.project), create=False), deferred_signals():
        for path, (before, after) in record.files.items():
            enc = record.encoding(path)
            old, new = enc.encode(before), enc.encode(after)
            real = os.path.realpath(path)
            for tmp in Path(os.path.dirname(real)).glob(f".{glob.escape(os.path.basename(real))}.*.torchmend"):
                with contextlib.suppress(FileNotFoundError):
                    tmp.unlink()
            try:
                current = Path(real).read_bytes()
            except FileNotFoundError:
                left.append(path)
                continue
            if current == new:
                _replace(real, old)
            elif current != old:
                left.append(path)
        if not left:
            _discard(record.path)
    return left


def undone_already(record: UndoRecord) -> bool:
    """Whether every file of the record is as it was before the fix while the fix changed something: an undo that
    put the files back but could not retire the record (a read-only state folder)."""
    try:
        return any(b != a for b, a in record.files.values()) and all(
            Path(p).read_bytes() == record.encoding(p).encode(before) for p, (before, _) in record.files.items()
        )
    except (OSError, UnicodeEncodeError):
        return False


def retire(record: UndoRecord) -> str:
    """Move an undone record (and its patch) to the folder's `undone/`; "" when done, else why it could not be
    (the record stays where it is; undone_already() tells it apart from a fix still in place)."""
    done = record.path.parent / "undone"
    try:
        done.mkdir(exist_ok=True)
        record.path.rename(done / record.path.name)
        if record.patch.exists():
            record.patch.rename(done / record.patch.name)
    except OSError as e:
        return f"cannot move its record {record.path} to {done} ({e.strerror or e})"
    return ""


def undo(record: UndoRecord, project: Path) -> str:
    """Put back the texts from before the fix, if every file is still as the fix left it, then retire the
    record. Raises WriteRefused (nothing was put back). Returns "" or, when the files were put back but the
    record could not be retired (a read-only state folder), what could not be recorded."""
    reverse = {p: (after, before) for p, (before, after) in record.files.items()}
    stale = f"was edited after the fix; undo it by hand with the saved patch: {record.patch}"
    with project_lock(project, create=False):
        if not record.path.exists():  # another undo took it while this one waited for the lock
            raise WriteRefused(f"the fix of {record.created} was undone meanwhile (by another torchmend undo)")
        encodings = {p: _check(p, after, before, project, stale) for p, (after, before) in reverse.items()}
        with deferred_signals():
            _replace_all({p: (encodings[p].encode(a), encodings[p].encode(b)) for p, (a, b) in reverse.items()})
            return retire(record)
