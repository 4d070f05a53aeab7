"""The project a command works on: its root, its configuration, how its paths are shown, which of its files
torchmend may edit, and the state of its undo journal. `Project.for_script(...)` (a script, or a trace read in the
current directory) and `Project.for_paths(...)` (lint) are the one way the commands and the API find them.

What stops a command is raised as a ProjectError, whose kind says which (the CLI maps each to its exit code,
docs/exit-codes.md); nothing here prints or exits.

    project = Project.for_script(Path("train.py"), root=None)      # ConfigInvalid on a bad [tool.torchmend]
    settings = project.config.resolve(Overrides(steps=5))           # the command line over the file
    project.check_editable(script, "the script")                   # NotPython, Unreadable, OutsideProject
    project.display(path)                                           # relative to the root (project.folder: a Root)
    project.check_journal(writes=True)                              # JournalBlocked, RollbackBlocked, ProjectBusy
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from torchmend import store
from torchmend.config import Config, ConfigError, load_config
from torchmend.sources import NotSource, check_python
from torchmend.values import Root


class ProjectError(Exception):
    """A command cannot go on with this project; the message says why and what to do."""


class ConfigInvalid(ProjectError):
    """[tool.torchmend] cannot be used (the message names the file, key and line); nothing was run."""


class Unreadable(ProjectError):
    """A file torchmend must read cannot be read."""


class NotPython(ProjectError):
    """Python itself rejects a file that would be run or edited (an undecodable byte, a bad coding line, a syntax
    error): torchmend would misread it or write it back wrong."""


class OutsideProject(ProjectError):
    """A symbolic link puts a file that would be edited outside the project: torchmend never edits it."""


class JournalBlocked(ProjectError):
    """The state folder cannot hold the undo records of a write: nothing is run or written."""


class RollbackBlocked(ProjectError):
    """An interrupted write cannot be rolled back: a file it touched was edited since (left as it is)."""


ProjectBusy = store.ProjectBusy  # another torchmend holds the project's lock (a store.WriteRefused)


def root_of(directory: Path) -> Path:
    """The git work tree holding `directory`, else the directory itself; found from the path as given, links
    not followed (a link into another tree does not move the project there), then resolved."""
    directory = Path(os.path.abspath(directory))
    for d in [directory, *directory.parents]:
        if (d / ".git").exists():
            return d.resolve()
    return directory.resolve()


def _config(start: Path) -> Config:
    try:
        return load_config(Path(os.path.abspath(start)))
    except ConfigError as e:
        raise ConfigInvalid(str(e)) from e


@dataclass(frozen=True)
class Project:
    """A project root (resolved) and the configuration that applies to the command's start (the script's folder,
    lint's first path, else the current directory)."""

    root: Path
    config: Config = field(default_factory=Config.empty)

    @classmethod
    def for_script(cls, script: Path | None, root: Path | None = None) -> Project:
        """The project of `script` as the command line gave it (absolute, links not resolved: the project is drawn
        from the path given, whatever the links say); None: of the current directory (findings read from a
        trace). The configuration is looked for from the script's folder upwards; the root is `root`
        (--project), else the configuration's project-root, else the git work tree holding the script, else its
        folder. Raises ConfigInvalid."""
        start = Path(os.path.abspath(script)).parent if script is not None else Path.cwd()
        return cls.at(start, root)

    @classmethod
    def for_paths(cls, paths: Iterable[Path], root: Path | None = None) -> Project:
        """lint's project: the configuration and the work tree of the first path (a file: its folder)."""
        first = next(iter(paths), Path("."))
        return cls.at(first if first.is_dir() else first.parent, root)

    @classmethod
    def at(cls, directory: Path, root: Path | None = None, *, config: bool = True) -> Project:
        """The project of a folder: `root`, else project-root of the configuration found from it, else its git
        work tree, else the folder. `config=False`: no configuration is read (undo)."""
        cfg = _config(directory) if config else Config.empty()
        chosen = root or cfg.get("project-root")
        return cls(Path(chosen).resolve() if chosen is not None else root_of(directory), cfg)

    @classmethod
    def of(cls, root: Path | Project) -> Project:
        """The API's: a Project as it is, or one at a root given as a path (its configuration read from there)."""
        return root if isinstance(root, Project) else cls(Path(os.path.abspath(root)), _config(Path(root)))

    # ------------------------------------------------------------------------------------------- paths

    @property
    def folder(self) -> Root:
        """The root as the value the stages below the pipeline take (what is under it, how a path is shown)."""
        return Root(self.root)

    def contains(self, path: str | Path) -> bool:
        """Whether `path` (absolute, as recorded) is under the root."""
        return self.folder.contains(path)

    def display(self, path: str | Path) -> str:
        """A path as the project's user reads it: relative to the root when it is under it (links not followed),
        else as it is (Root.display)."""
        return self.folder.display(path)

    def link_outside(self, path: str | Path) -> Path | None:
        """Where `path` really is, when a symbolic link (of the file or of a folder on its way) puts it outside
        the project; else None. torchmend reads such a file but never edits it."""
        real = Path(os.path.realpath(path))
        return None if real.is_relative_to(self.root.resolve()) else real

    def check_python(self, path: Path, what: str) -> None:
        """Refuse a file Python itself rejects, before anything runs or is written (NotPython; Unreadable)."""
        try:
            check_python(str(path))
        except NotSource as e:
            raise NotPython(f"Python rejects {what}: {e}; fix or re-encode it first") from e
        except OSError as e:
            raise Unreadable(f"cannot read {path}: {e.strerror or e}") from e

    def check_editable(self, path: Path, what: str = "the script") -> None:
        """A file fix may edit: Python accepts it and no link puts it outside the project (OutsideProject, checked
        before anything is run or written; the store checks again when writing)."""
        self.check_python(path, what)
        real = self.link_outside(path)
        if real is not None:
            raise OutsideProject(
                f"{path} leads through a symbolic link to {real}, outside the project ({self.root}); torchmend never "
                "edits files outside the project, and nothing was written. Run fix where the file is, or give "
                "--project DIR holding both"
            )

    def files_outside(self, paths: Iterable[str]) -> list[tuple[str, Path]]:
        """Of the project files findings point at, those a link puts outside the project (path, real path): their
        findings are not fixed. The others must be Python (NotPython)."""
        outside = []
        for path in dict.fromkeys(p for p in paths if self.contains(p) and Path(p).is_file()):
            real = self.link_outside(path)
            if real is None:
                self.check_python(Path(path), "a file with findings")
            else:
                outside.append((path, real))
        return outside

    # ----------------------------------------------------------------------------------------- journal

    def interrupted(self) -> list[store.UndoRecord]:
        """The writes of this project that were interrupted half way (their writer gone)."""
        return store.records(self.root).incomplete

    def check_journal(self, writes: bool) -> list[store.UndoRecord]:
        """Before anything runs. A command that will write needs a place for its undo records (JournalBlocked)
        and gets the interrupted writes rolled back first (returned; RollbackBlocked, ProjectBusy); one that
        writes nothing gets them named (returned, nothing done)."""
        if not writes:
            return self.interrupted()
        try:
            store.check_state_dir(self.root, create=False)  # made when a write needs it
        except store.WriteRefused as e:
            raise JournalBlocked(f"nothing was run or written: {e}") from e
        return self.roll_back_interrupted()

    def roll_back_interrupted(self) -> list[store.UndoRecord]:
        """Roll back every interrupted write of this project, newest first; the records rolled back. Raises
        RollbackBlocked when a file was edited since (left as it is, named) and ProjectBusy."""
        done = []
        for record in reversed(self.interrupted()):
            try:
                left = store.rollback(record)
            except store.ProjectBusy as e:
                raise store.ProjectBusy(f"nothing was rolled back: {e}") from e
            if left:
                raise RollbackBlocked(
                    f"the fix of {record.created} was interrupted while writing, and "
                    + ", ".join(self.display(p) for p in left)
                    + f" changed since: left as it is; its journal {record.path} has the texts from before"
                )
            done.append(record)
        return done
