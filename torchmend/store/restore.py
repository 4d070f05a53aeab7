"""Putting files back: undo a fix, roll back an incomplete write, retire an undone record."""

from __future__ import annotations

import contextlib
import glob
import os
from pathlib import Path

from torchmend.store.atomic import check, deferred_signals, replace, replace_all
from torchmend.store.journal import UndoRecord, discard
from torchmend.store.state import WriteRefused, project_lock


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
                replace(real, old)
            elif current != old:
                left.append(path)
        if not left:
            discard(record.path)
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
    read_only = (
        "make it writable (chmod u+w) and run `torchmend undo` again (undo puts back every file of a fix or none), "
        f"or undo the fix by hand with the saved patch: {record.patch}"
    )
    with project_lock(project, create=False):
        if not record.path.exists():  # another undo took it while this one waited for the lock
            raise WriteRefused(f"the fix of {record.created} was undone meanwhile (by another torchmend undo)")
        encodings = {p: check(p, after, before, project, stale, read_only) for p, (after, before) in reverse.items()}
        with deferred_signals():
            replace_all({p: (encodings[p].encode(a), encodings[p].encode(b)) for p, (a, b) in reverse.items()})
            return retire(record)
