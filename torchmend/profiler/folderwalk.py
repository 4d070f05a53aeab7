"""Which entries of a run's folders a snapshot looks at (profiler/workdir.py), and the walk that finds them: lstat
only, links never followed, a folder's entries all or none within a budget of entries.

Left out: folders whose name starts with a dot (version control, environments, editors' and tools' state and
caches: `.git`, `.venv`, `.mypy_cache`; in a home folder, every program's settings), byte code, installed packages,
torchmend's own state and cache folders, the folders the caller names (the run's own), files this process has open
(its own output redirected into the folder: `torchmend fix train.py > fix.log`), and the system temp directory
unless the folder walked is inside it (a project in a temp folder, pytest's tmp_path): it holds other processes'
files.
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

SKIP_NAMES = frozenset({"__pycache__", "node_modules", "site-packages", ".git"})  # .git: a folder, or a worktree's file
SKIP_PREFIXES = (".venv",)  # a file or folder
RESTORE_TAG = ".torchmend-restore-"  # the temporary name a file is written back under (never looked at)

FILE, LINK, DIR, OTHER = "file", "link", "dir", "other"


def key(st: os.stat_result) -> tuple[int, int, int, int]:
    """What says an entry changed: size, mtime_ns, inode, mode."""
    return st.st_size, st.st_mtime_ns, st.st_ino, st.st_mode


def kind(mode: int) -> str:
    if stat.S_ISREG(mode):
        return FILE
    if stat.S_ISLNK(mode):
        return LINK
    if stat.S_ISDIR(mode):
        return DIR
    return OTHER


def under(path: str, folder: str) -> bool:
    """Whether `path` is `folder` or inside it (absolute, real paths)."""
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def own_dirs() -> tuple[str, ...]:
    """torchmend's state folder (undo records, the project's lock) and cache folder (lint), as store.state and
    lint.cache find them (read here from the environment: the profiler stands below both)."""
    home = os.path.expanduser("~")
    state = os.environ.get("TORCHMEND_STATE_DIR")
    if not state:
        xdg = os.environ.get("XDG_STATE_HOME", "")
        state = os.path.join(xdg if os.path.isabs(xdg) else os.path.join(home, ".local", "state"), "torchmend")
    cache = os.environ.get("TORCHMEND_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(home, ".cache"), "torchmend"
    )
    return tuple(os.path.realpath(p) for p in (state, cache))


def temp_dir() -> str:
    return os.path.realpath(tempfile.gettempdir())


def open_here() -> frozenset[tuple[int, int]]:
    """(device, inode) of the regular files this process has open: its stdout and stderr when they are files."""
    try:
        fds = [int(fd) for fd in os.listdir("/proc/self/fd")]
    except OSError:
        fds = [0, 1, 2]
    found = set()
    for fd in fds:
        try:
            st = os.fstat(fd)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode):
            found.add((st.st_dev, st.st_ino))
    return frozenset(found)


@dataclass
class Walk:
    """One folder walked: each entry's lstat by its path relative to the folder ("" is the folder), and the folders
    not listed: True for those over the budget (to be said), False for those that could not be read (the run, as the
    same user, can hardly write there either: not said)."""

    stats: dict[str, os.stat_result] = field(default_factory=dict)
    unlisted: dict[str, bool] = field(default_factory=dict)


class Walker:
    """Walks folders within one budget of entries (shared by every folder it walks)."""

    def __init__(self, exclude: Iterable[os.PathLike[str] | str], entries: int) -> None:
        self.tmp = temp_dir()
        self.excluded = {os.path.realpath(p) for p in exclude} | set(own_dirs())
        self.budget = entries
        self.open = open_here()

    def skipped(self, root: str, path: str, name: str, st: os.stat_result) -> bool:
        if name in SKIP_NAMES or name.startswith(SKIP_PREFIXES) or RESTORE_TAG in name:
            return True
        if not stat.S_ISDIR(st.st_mode):
            return (st.st_dev, st.st_ino) in self.open
        if name.startswith(".") or path in self.excluded:
            return True
        inside_tmp = under(root, self.tmp) and root != self.tmp
        return not inside_tmp and under(path, self.tmp)

    def walk(self, root: str, skip_unlisted: Mapping[str, bool] = MappingProxyType({})) -> Walk:
        """Every entry under `root`; the folders of `skip_unlisted` (those not listed before) are not entered."""
        found = Walk()
        try:
            st = os.lstat(root)
        except OSError:
            return found
        if not stat.S_ISDIR(st.st_mode):
            return found
        found.stats[""] = st
        stack = [""]
        while stack:
            rel = stack.pop()
            if rel in skip_unlisted:
                found.unlisted[rel] = skip_unlisted[rel]
                continue
            try:
                with os.scandir(os.path.join(root, rel) if rel else root) as it:
                    names = [(e.name, e.path) for e in it]
            except OSError:
                found.unlisted[rel] = False
                continue
            if len(names) > self.budget:
                found.unlisted[rel] = True
                continue
            self.budget -= len(names)
            for name, path in sorted(names):
                try:
                    est = os.lstat(path)
                except OSError:
                    continue  # gone since the listing
                if self.skipped(root, path, name, est):
                    continue
                child = f"{rel}/{name}" if rel else name
                found.stats[child] = est
                if stat.S_ISDIR(est.st_mode):
                    stack.append(child)
        return found
