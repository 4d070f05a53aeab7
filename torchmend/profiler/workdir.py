"""The folders a run may write to, as they were before it, and put back after it: every run (a scan, each arm of
a verification, the eager reference runs) starts from the files as they were and leaves them so, so a script
that resumes from a checkpoint in its working folder cannot feed one arm's result into the next.

What is kept: the run's working folder and the script's own folder (when it is not inside the other), walked
without following links, leaving out what a run of a training script does not own (folders named with a leading
dot, `__pycache__`, `node_modules`, `site-packages`, torchmend's own state and cache folders, the run's own folder,
files this process has open) and the system temp directory unless the folder is inside it; the temp directory
itself as the working folder is not kept at all (profiler/folderwalk.py).
Files are copied up front within caps (one file, all files, how many files); what is over them is still looked at,
and what the run changed there is said (`Unrestored`), not put back. Detection is by (size, mtime_ns, inode,
mode): a file the run rewrote with the same size and mtime in the same inode is not seen.

Restoring removes what the run created (folders too, when empty after that), puts changed and deleted files back
byte for byte with their mode and times (a temporary file beside it, renamed over), and the folders' times; it
never raises for one file (what went wrong is a value) and writes only inside the folders it walked.

Stdlib only: the parent never imports torch.
"""

from __future__ import annotations

import errno
import os
import secrets
import shutil
import stat
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from torchmend.interrupts import shielded
from torchmend.model import StrEnum
from torchmend.profiler.folderwalk import DIR, FILE, LINK, OTHER, RESTORE_TAG, Walker, key, kind, temp_dir, under

MEMORY_FILE = 1 << 20  # files up to this size are kept in memory ...
MEMORY_TOTAL = 64 << 20  # ... while the copies in memory stay under this; the others go to a temporary folder


@dataclass(frozen=True)
class Caps:
    """How much a snapshot copies and looks at."""

    per_file: int = 64 << 20  # a file larger than this is not copied: a change to it is said, not undone
    total: int = 512 << 20  # all copies together
    files: int = 20_000  # how many files are copied
    entries: int = 100_000  # how many entries are looked at (stat only); a folder beyond this is not listed


CAPS = Caps()


class Change(StrEnum):
    """What the run did to a path."""

    CREATED = "created"
    CHANGED = "changed"
    DELETED = "deleted"
    UNKNOWN = "unknown"  # a folder not listed (Caps.entries): what happened in it is not known


class Why(StrEnum):
    """Why a path was not (or could not be) put back."""

    TOO_LARGE = "too_large"  # over Caps.per_file
    OVER_TOTAL = "over_total"  # the copies had reached Caps.total
    TOO_MANY = "too_many"  # Caps.files files were copied already
    NOT_LISTED = "not_listed"  # a folder beyond Caps.entries entries: not looked at
    UNREADABLE = "unreadable"  # it could not be read before the run
    NOT_EMPTY = "not_empty"  # a folder the run created still holds entries that are not looked at
    SHARED = "shared"  # the working folder is the system temp directory, other processes' too: not kept
    FAILED = "failed"  # putting it back (or removing it) failed


@dataclass(frozen=True)
class Unrestored:
    """One thing a run left that could not be put back (or, for `Change.UNKNOWN`, not looked at)."""

    path: Path
    change: Change
    why: Why
    size: int = 0  # the file's size before the run
    limit: int = 0  # the cap it was over (bytes, or a count), for TOO_LARGE, OVER_TOTAL, TOO_MANY, NOT_LISTED
    detail: str = ""  # the error, for UNREADABLE and FAILED; a few of the entries, for NOT_EMPTY

    def describe(self) -> str:
        """One line: 'the run changed X, which was too large to restore (...)'."""
        what = f"the run {self.change} {self.path}"
        if self.why == Why.TOO_LARGE:
            return (
                f"{what}, which was too large to restore ({_mib(self.size)}; copies are kept up to {_mib(self.limit)})"
            )
        if self.why == Why.OVER_TOTAL:
            return f"{what}, which was not restored: the copies kept before the run had reached {_mib(self.limit)}"
        if self.why == Why.TOO_MANY:
            return f"{what}, which was not restored: {self.limit} files had been copied before the run"
        if self.why == Why.NOT_LISTED:
            return (
                f"the run may have changed files under {self.path}: not looked at (the folders held more than "
                f"{self.limit} entries)"
            )
        if self.why == Why.UNREADABLE:
            return f"{what}, which could not be read before the run ({self.detail}) and was not restored"
        if self.why == Why.SHARED:
            return (
                f"the run may have changed files in {self.path}: the system temp directory, shared with other "
                "processes, is not kept and put back"
            )
        if self.why == Why.NOT_EMPTY:
            return f"{what}, a folder left in place: it holds entries torchmend does not look at ({self.detail})"
        return f"{what}, and putting it back failed: {self.detail}"

    def to_json(self) -> dict[str, object]:
        return {
            "path": str(self.path),
            "change": self.change,
            "why": self.why,
            "size": self.size,
            "limit": self.limit,
            "detail": self.detail,
        }


def _mib(n: int) -> str:
    return f"{n / (1 << 20):.1f} MiB" if n >= 1 << 20 else f"{n} bytes"


@dataclass
class _Entry:
    kind: str
    key: tuple[int, int, int, int]  # size, mtime_ns, inode, mode
    atime_ns: int
    data: bytes | None = None  # the copy, in memory
    copy: str | None = None  # the copy, on disk
    link: str | None = None  # a link's target
    why: Why | None = None  # not copied: why
    limit: int = 0  # the cap it was over
    detail: str = ""

    @property
    def size(self) -> int:
        return self.key[0]


def run_folders(cwd: Path, script: Path) -> tuple[Path, ...]:
    """The folders a run may write to: its working folder, and the script's folder when it is not inside it (a
    folder holding the other stands for both). A script's folder inside the temp directory is left out unless it
    is the working folder (or holds it)."""
    here = Path(os.path.realpath(cwd))
    there = Path(os.path.realpath(script)).parent
    if under(str(there), str(here)):
        return (here,)
    tmp = temp_dir()
    if under(str(here), str(there)) and not under(str(there), tmp):
        return (there,)
    if under(str(there), tmp):
        return (here,)
    return here, there


@dataclass
class _Listing:
    """One folder's walk: its entries by path relative to it ("" is the folder), and the folders not listed: True
    for those over the budget (said), False for those that could not be read (the run, as the same user, can
    hardly write there either: not said)."""

    entries: dict[str, _Entry] = field(default_factory=dict)
    unlisted: dict[str, bool] = field(default_factory=dict)


@dataclass
class Snapshot:
    """The folders as they were; `restore()` puts them back (once) and says what it could not. As a context
    manager: leaving the block restores (shielded from a second Ctrl-C), whatever ended it; `left` is the result."""

    folders: dict[Path, _Listing]
    unprotected: tuple[Unrestored, ...]  # what was not copied, said before the run (change: unknown yet)
    exclude: tuple[Path, ...] = ()
    caps: Caps = CAPS
    copies: Path | None = None  # the temporary folder of the larger copies
    shared: tuple[Path, ...] = ()  # the system temp directory, when it is the working folder: not kept
    done: bool = False
    left: tuple[Unrestored, ...] = ()  # what restore() could not put back

    def __enter__(self) -> Snapshot:
        return self

    def __exit__(self, *exc: object) -> None:
        with shielded():
            self.restore()

    def restore(self) -> tuple[Unrestored, ...]:
        """Put every folder back; what could not be is returned (empty normally) and kept as `left`. Never raises
        on a file."""
        if self.done:
            return self.left
        self.done = True
        problems = [Unrestored(p, Change.UNKNOWN, Why.SHARED) for p in self.shared]
        walker = Walker(self.exclude, self.caps.entries)
        try:
            for root, before in self.folders.items():
                try:
                    problems.extend(_restore_folder(root, before, walker, self.caps.entries))
                except OSError as e:  # pragma: no cover - each step catches its own; a last guard
                    problems.append(Unrestored(root, Change.UNKNOWN, Why.FAILED, detail=str(e)))
        finally:
            self.discard()
            self.left = tuple(problems)
        return self.left

    def discard(self) -> None:
        """Drop the copies (restore does it too)."""
        self.done = True
        for listing in self.folders.values():
            for e in listing.entries.values():
                e.data = None
        if self.copies is not None:
            shutil.rmtree(self.copies, ignore_errors=True)
            self.copies = None


def snapshot(folders: Iterable[Path], exclude: Iterable[Path] = (), caps: Caps = CAPS) -> Snapshot:
    """Look at the folders (`exclude`: folders in them to leave out) and keep a copy of their files, within the
    caps. Never raises on a file: what could not be kept is `Snapshot.unprotected`."""
    excluded = tuple(exclude)
    snap = Snapshot({}, (), excluded, caps)
    try:
        _take(snap, folders, Walker(excluded, caps.entries))
    except BaseException:  # Ctrl-C while copying: no copy outlives the snapshot
        snap.discard()
        raise
    return snap


def _take(snap: Snapshot, folders: Iterable[Path], walker: Walker) -> None:
    caps = snap.caps
    unprotected: list[Unrestored] = []
    copied = total = memory = 0
    for folder in folders:
        root = os.path.realpath(folder)
        if root == walker.tmp:  # other processes' files: what they write meanwhile is not the run's to undo
            snap.shared += (Path(root),)
            unprotected.append(Unrestored(Path(root), Change.UNKNOWN, Why.SHARED))
            continue
        walk = walker.walk(root)
        listing = _Listing(unlisted=walk.unlisted)
        for rel in sorted(r for r, said in listing.unlisted.items() if said):
            unprotected.append(Unrestored(Path(root, rel), Change.UNKNOWN, Why.NOT_LISTED, limit=caps.entries))
        for rel, st in walk.stats.items():
            what = kind(st.st_mode)
            entry = _Entry(what, key(st), st.st_atime_ns)
            listing.entries[rel] = entry
            path = os.path.join(root, rel) if rel else root
            if what == LINK:
                try:
                    entry.link = os.readlink(path)
                except OSError as e:
                    entry.why, entry.detail = Why.UNREADABLE, e.strerror or str(e)
            elif what == FILE:
                if st.st_size > caps.per_file:
                    entry.why, entry.limit = Why.TOO_LARGE, caps.per_file
                elif total + st.st_size > caps.total:
                    entry.why, entry.limit = Why.OVER_TOTAL, caps.total
                elif copied >= caps.files:
                    entry.why, entry.limit = Why.TOO_MANY, caps.files
                else:
                    to = None
                    if st.st_size > MEMORY_FILE or memory + st.st_size > MEMORY_TOTAL:
                        if snap.copies is None:
                            snap.copies = Path(tempfile.mkdtemp(prefix="torchmend-snapshot-"))
                        to = snap.copies / str(copied)
                    _copy(path, entry, to)
                    if entry.why is None:
                        copied += 1
                        total += entry.size
                        memory += entry.size if entry.data is not None else 0
            if entry.why is not None:
                unprotected.append(
                    Unrestored(Path(path), Change.UNKNOWN, entry.why, entry.size, entry.limit, entry.detail)
                )
        snap.folders[Path(root)] = listing
    snap.unprotected = tuple(unprotected)


def _copy(path: str, entry: _Entry, to: Path | None) -> None:
    """Read the file into the entry (memory, or a copy at `to`); its key is taken from the open file."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as e:
        entry.why, entry.detail = Why.UNREADABLE, e.strerror or str(e)
        return
    try:
        with os.fdopen(fd, "rb") as src:
            st = os.fstat(src.fileno())
            if not stat.S_ISREG(st.st_mode):
                entry.why, entry.detail = Why.UNREADABLE, "not a regular file any more"
                return
            if to is None:
                entry.data = src.read()
            else:
                with open(to, "wb") as dst:
                    shutil.copyfileobj(src, dst, 1 << 20)
                entry.copy = str(to)
            after = os.fstat(src.fileno())
    except OSError as e:
        entry.why, entry.detail = Why.UNREADABLE, e.strerror or str(e)
        entry.data = None
        return
    if key(after) != key(st):
        entry.why, entry.detail, entry.data = Why.UNREADABLE, "it changed while it was copied", None
        return
    entry.key, entry.atime_ns = key(st), st.st_atime_ns


def _depth(rel: str) -> int:
    return rel.count("/") + (1 if rel else 0)


def _restore_folder(root: Path, before: _Listing, walker: Walker, entries: int) -> list[Unrestored]:
    top = str(root)
    problems: list[Unrestored] = []
    after = walker.walk(top, skip_unlisted=before.unlisted)
    now = after.stats
    if "" not in now and "" in before.entries:  # the run removed (or replaced) the folder itself
        try:
            os.mkdir(top)
        except OSError as e:
            return [Unrestored(root, Change.DELETED, Why.FAILED, detail=e.strerror or str(e))]
    # Folders not listed before (over the budget: what the run did there is not known), and those listed before
    # but not now (the run made so many entries that the walk ran out; their entries are not compared).
    lost = sorted(set(after.unlisted) - set(before.unlisted))
    for rel in sorted({r for r, said in after.unlisted.items() if said} | set(lost)):
        problems.append(Unrestored(Path(top, rel), Change.UNKNOWN, Why.NOT_LISTED, limit=entries))

    # 1. What the run created (the walk does not enter a folder not listed before, so whatever it finds that was
    # not there is new): files first, then folders deepest first (when empty).
    created = [rel for rel in now if rel not in before.entries]
    for rel in sorted(created, key=_depth, reverse=True):
        path = os.path.join(top, rel)
        try:
            if stat.S_ISDIR(now[rel].st_mode):
                os.rmdir(path)
            else:
                os.unlink(path)
        except OSError as e:
            why = Why.NOT_EMPTY if stat.S_ISDIR(now[rel].st_mode) and _not_empty(e) else Why.FAILED
            detail = ", ".join(sorted(_entries(path))[:3]) if why == Why.NOT_EMPTY else e.strerror or str(e)
            problems.append(Unrestored(Path(path), Change.CREATED, why, detail=detail))
    # 2. Folders the run deleted, then files it changed or deleted, shallowest first.
    for rel, entry in sorted(before.entries.items(), key=lambda kv: _depth(kv[0])):
        if not rel or entry.kind == OTHER or _inside(rel, lost):
            continue
        path = os.path.join(top, rel)
        cur = now.get(rel)
        if entry.kind == DIR:
            if cur is None or not stat.S_ISDIR(cur.st_mode):
                problem = _put_back(top, rel, entry, cur)
                if problem:
                    problems.append(Unrestored(Path(path), Change.DELETED, Why.FAILED, detail=problem))
            continue
        if cur is not None and kind(cur.st_mode) == entry.kind and key(cur) == entry.key:
            continue
        change = Change.DELETED if cur is None else Change.CHANGED
        if entry.why is not None:
            problems.append(Unrestored(Path(path), change, entry.why, entry.size, entry.limit, entry.detail))
            continue
        problem = _put_back(top, rel, entry, cur)
        if problem:
            problems.append(Unrestored(Path(path), change, Why.FAILED, entry.size, detail=problem))
    # 3. The folders' own mode and times (creating or removing an entry changes them).
    for rel, entry in sorted(before.entries.items(), key=lambda kv: _depth(kv[0]), reverse=True):
        if entry.kind != DIR:
            continue
        path = os.path.join(top, rel) if rel else top
        try:
            st = os.lstat(path)
            if not stat.S_ISDIR(st.st_mode):
                continue
            if stat.S_IMODE(st.st_mode) != stat.S_IMODE(entry.key[3]):
                os.chmod(path, stat.S_IMODE(entry.key[3]))
            if st.st_mtime_ns != entry.key[1]:
                os.utime(path, ns=(entry.atime_ns, entry.key[1]), follow_symlinks=False)
        except OSError:
            pass  # a folder's times are not worth a warning
    return problems


def _inside(rel: str, folders: Iterable[str]) -> bool:
    """Whether `rel` is inside one of the folders (relative paths; "" is the top, inside which everything is)."""
    return any(not f or rel.startswith(f + "/") for f in folders)


def _not_empty(e: OSError) -> bool:
    return e.errno in (errno.ENOTEMPTY, errno.EEXIST)


def _entries(path: str) -> list[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []


def _real_parent(top: str, rel: str) -> str | None:
    """The folder `rel` goes in, made where the run removed it; None when a part of the way is not a real folder
    of the tree any more (a link the run put there: writing through it would write outside)."""
    path = top
    for part in PurePosixPath(rel).parts[:-1]:
        path = os.path.join(path, part)
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            try:
                os.mkdir(path)
            except OSError:
                return None
            continue
        except OSError:
            return None
        if not stat.S_ISDIR(st.st_mode):
            return None
    return path


def _put_back(top: str, rel: str, entry: _Entry, cur: os.stat_result | None) -> str:
    """Put one entry back as it was (`cur`: what is there now); '' when done, else what went wrong."""
    parent = _real_parent(top, rel)
    if parent is None:
        return "a folder on its way is no folder any more"
    name = PurePosixPath(rel).name
    path = os.path.join(parent, name)
    mode = stat.S_IMODE(entry.key[3])
    try:
        if cur is not None and stat.S_ISDIR(cur.st_mode) and entry.kind != DIR:
            os.rmdir(path)  # a folder the run put in a file's place: emptied of what it created in step 1
        elif cur is not None and not stat.S_ISDIR(cur.st_mode) and entry.kind == DIR:
            os.unlink(path)  # a file in a folder's place
        if entry.kind == DIR:
            os.mkdir(path, mode)
            return ""
    except OSError as e:
        return e.strerror or str(e)
    tmp = os.path.join(parent, f".{name}{RESTORE_TAG}{secrets.token_hex(4)}")
    try:
        if entry.kind == LINK:
            assert entry.link is not None
            os.symlink(entry.link, tmp)
        else:
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
            fd = os.open(tmp, flags, 0o600)
            with os.fdopen(fd, "wb") as out:
                if entry.data is not None:
                    out.write(entry.data)
                else:
                    assert entry.copy is not None
                    with open(entry.copy, "rb") as src:
                        shutil.copyfileobj(src, out, 1 << 20)
                os.fchmod(out.fileno(), mode)
        os.utime(tmp, ns=(entry.atime_ns, entry.key[1]), follow_symlinks=False)
        os.replace(tmp, path)
    except OSError as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        return e.strerror or str(e)
    return ""
