"""The write-ahead undo journal: undo records (pending, then complete), written before the first file is replaced,
and read back (complete, incomplete, damaged)."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path

from torchmend.sources import Encoding
from torchmend.store.atomic import STALE, check, deferred_signals, fsync_dir, replace_all
from torchmend.store.state import WriteRefused, check_state_dir, project_lock, undo_dir


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
        fsync_dir(path.parent)
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
        encodings = {p: check(p, before, after, project, STALE) for p, (before, after) in changes.items()}
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
                replace_all(both)
            except WriteRefused:
                discard(path)
                raise
            try:
                _write_patch(path, patch)
                data["state"] = "complete"
                _write_json(path, data, exclusive=False)
            except OSError as e:  # the record cannot be finished (a full disk?): put the files back
                replace_all({p: (a, b) for p, (b, a) in both.items()})
                discard(path)
                raise WriteRefused(
                    f"cannot finish the undo record {path} ({e.strerror or e}); the files were put "
                    "back, nothing was changed"
                ) from e
        finally:
            os.close(lock)
    return _to_record(path, data)


def discard(path: Path) -> None:
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
