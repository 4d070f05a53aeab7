"""A copy of the run's working folder for each run, so that no run's files feed another's and the user's folder is
never written: a script that resumes from a checkpoint in its working folder starts every arm from the same files.

Why a copy and not a put-back: putting the folder back after a run also undoes what the user (an editor, git, another
tool) changed there while the run went on; a copy changes nothing of theirs. The script itself still runs from where
it is (its folder first on sys.path, its imports and `__file__` as before): only the working folder moves, so files
opened by relative paths (`open("ckpt.pt")`, `./runs/`, `data/`) are the copy's.

What is copied: files up to Caps.per_file, while the copies stay under Caps.total and Caps.files. What is linked
instead (a symbolic link to the original, so reads work and writes through it reach the original, said in
`Sandbox.linked`): larger files, what is over the caps, and the folders a training run reads and does not own (a
VCS's, virtual environments, caches, node_modules, site-packages). Links in the folder are copied as links. Stdlib
only: the parent never imports torch.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

# Folders linked whole: a run reads them (a package, an environment), a training run does not write its state there.
LINKED_DIRS = frozenset(
    {".git", ".hg", ".svn", "__pycache__", "node_modules", "site-packages", ".mypy_cache", ".pytest_cache",
     ".ruff_cache", ".tox", ".nox", ".venv", "venv", ".idea", ".vscode"}
)  # fmt: skip


@dataclass(frozen=True)
class Caps:
    per_file: int = 64 << 20  # a larger file is linked, not copied
    total: int = 512 << 20  # all copies together
    files: int = 20_000  # how many files are copied
    entries: int = 50_000  # how many entries are looked at; the folders beyond are linked whole


CAPS = Caps()


@dataclass
class Sandbox:
    """The copy a run works in: `cwd` (inside `root`, a temporary folder), what was linked to the originals
    instead of copied (relative to the working folder), and how many files were copied."""

    root: Path
    cwd: Path
    linked: list[str] = field(default_factory=list)
    copied: int = 0

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)  # removes links, never what they point to


def _linked_dir(name: str) -> bool:
    return name in LINKED_DIRS or name.startswith(".venv")


def make(cwd: Path, caps: Caps = CAPS) -> Sandbox | None:
    """A copy of `cwd` in a fresh temporary folder (made with the same folder name, for scripts that print or check
    it). None when `cwd` is the file system's root or the user's home folder, or is a temporary folder's root
    itself: copying those is neither cheap nor meant (the run then works in `cwd` as it is)."""
    cwd = cwd.absolute()
    if cwd == Path(cwd.anchor) or cwd == Path.home() or cwd == Path(tempfile.gettempdir()):
        return None
    root = Path(tempfile.mkdtemp(prefix="torchmend-cwd-"))
    box = Sandbox(root, root / (cwd.name or "cwd"))
    budget = {"bytes": caps.total, "files": caps.files, "entries": caps.entries}
    _copy_folder(cwd, box.cwd, "", box, caps, budget)
    return box


def _copy_folder(src: Path, dst: Path, rel: str, box: Sandbox, caps: Caps, budget: dict[str, int]) -> None:
    dst.mkdir(parents=True, exist_ok=True)
    try:
        entries = sorted(os.scandir(src), key=lambda e: e.name)
    except OSError:
        return
    for entry in entries:
        here = f"{rel}{entry.name}"
        target = dst / entry.name
        budget["entries"] -= 1
        try:
            if entry.is_symlink():
                os.symlink(os.readlink(entry.path), target)
            elif entry.is_dir():
                if _linked_dir(entry.name) or budget["entries"] <= 0:
                    _link(entry.path, target, here + "/", box)
                else:
                    _copy_folder(Path(entry.path), target, here + "/", box, caps, budget)
            elif entry.is_file():
                size = entry.stat().st_size
                if size > caps.per_file or size > budget["bytes"] or budget["files"] <= 0:
                    _link(entry.path, target, here, box)
                else:
                    shutil.copy2(entry.path, target)
                    budget["bytes"] -= size
                    budget["files"] -= 1
                    box.copied += 1
        except OSError:  # unreadable (a socket, a permission): linked, so the run sees what it would have
            _link(entry.path, target, here, box)


def _link(path: str, target: Path, rel: str, box: Sandbox) -> None:
    try:
        os.symlink(path, target)
        box.linked.append(rel)
    except OSError:
        pass
