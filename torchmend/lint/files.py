"""Which files lint reads: the Python files under the given paths, as git sees them (`.gitignore` respected) in a
git work tree, else by walking the folders; never a virtualenv, site-packages, __pycache__ or .git."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterable, Sequence
from pathlib import Path

# Folders never linted, whatever .gitignore says: installed code, caches, version control.
EXCLUDED_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        "__pycache__",
        "site-packages",
        "dist-packages",
        ".venv",
        "venv",
        ".tox",
        ".nox",
        ".mypy_cache",
        ".ruff_cache",
        ".pytest_cache",
        "node_modules",
    }
)


SUFFIXES = (".py", ".pyw")  # a file named directly is linted when it has one of these


class PathNotFound(Exception):
    """A path given to lint does not exist."""

    def __init__(self, path: Path) -> None:
        super().__init__(f"{path} does not exist")
        self.path = path


def _excluded_dir(folder: Path, venvs: dict[Path, bool]) -> bool:
    if folder.name in EXCLUDED_DIRS:
        return True
    if folder not in venvs:  # any virtualenv, whatever its name, has a pyvenv.cfg
        venvs[folder] = (folder / "pyvenv.cfg").is_file()
    return venvs[folder]


def _kept(path: Path, top: Path, venvs: dict[Path, bool]) -> bool:
    """No folder between `top` and the file is excluded."""
    try:
        parts = path.parent.relative_to(top).parts
    except ValueError:
        return True
    folder = top
    for part in parts:
        folder = folder / part
        if _excluded_dir(folder, venvs):
            return False
    return True


def _git_files(folder: Path) -> list[Path] | None:
    """The files git lists under `folder`, tracked or not, ignored ones left out; None outside a git work tree."""
    try:
        done = subprocess.run(
            ["git", "-C", str(folder), "ls-files", "--cached", "--others", "--exclude-standard", "-z", "--", "."],
            capture_output=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    # git prints the names' bytes as they are (-z): decoded as the file system's names are, so that a name not
    # valid UTF-8, or any non-ASCII name under LC_ALL=C without UTF-8 mode, still names its file
    names = [n for n in map(os.fsdecode, done.stdout.split(b"\0")) if n.endswith(".py")]
    return [folder / n for n in dict.fromkeys(names)]


def _walk(folder: Path, venvs: dict[Path, bool]) -> Iterable[Path]:
    for here, dirs, files in os.walk(folder):
        base = Path(here)
        dirs[:] = sorted(d for d in dirs if not _excluded_dir(base / d, venvs))
        yield from (base / f for f in sorted(files) if f.endswith(".py"))


def python_files(paths: Sequence[Path]) -> list[Path]:
    """Every Python file under `paths` (absolute, each once, sorted). A file named directly (.py, .pyw) is kept
    whatever its folder; a folder is listed by git when it is in a work tree, else walked. Raises PathNotFound."""
    found: dict[Path, None] = {}
    venvs: dict[Path, bool] = {}
    for given in paths:
        path = Path(os.path.abspath(given))
        if not path.exists():
            raise PathNotFound(given)
        if path.is_file():
            if path.suffix in SUFFIXES:
                found.setdefault(path)
            continue
        listed = _git_files(path)
        files = listed if listed is not None else list(_walk(path, venvs))
        for f in files:
            if _kept(f, path, venvs) and f.is_file():
                found.setdefault(f)
    return sorted(found)
