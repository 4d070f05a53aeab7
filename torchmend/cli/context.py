"""What every command does before its own work: find the project (torchmend.project), resolve the settings (the
command line over `[tool.torchmend]`, config.Config.resolve) and check the journal, mapping what stops it to the
documented exit codes (docs/exit-codes.md). Imports nothing heavy at start-up."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from rich.markup import escape

from torchmend.cli.app import err, fail
from torchmend.cli.exitcodes import ExitCode

if TYPE_CHECKING:
    from torchmend.project import Project


@contextlib.contextmanager
def project_errors() -> Iterator[None]:
    """A ProjectError (or a busy project) in the block ends the command with its exit code and its message."""
    from torchmend import project as p

    codes: list[tuple[type[BaseException], ExitCode]] = [
        (p.ConfigInvalid, ExitCode.CONFIG_INVALID),
        (p.Unreadable, ExitCode.SCRIPT_NOT_FOUND),
        (p.NotPython, ExitCode.SCRIPT_FAILED),
        (p.ProjectBusy, ExitCode.PROJECT_BUSY),
        (p.OutsideProject, ExitCode.WRITE_REFUSED),
        (p.JournalBlocked, ExitCode.WRITE_REFUSED),
        (p.RollbackBlocked, ExitCode.WRITE_REFUSED),
    ]
    try:
        yield
    except (p.ProjectError, p.ProjectBusy) as e:
        code = next(c for kind, c in codes if isinstance(e, kind))
        fail(code, escape(str(e)))


def given_script(script: Path, args: list[str] | None, nproc_per_node: int | None) -> Path:
    """The script's path as the command line gave it (after a torchrun command too), absolute, links not
    resolved: the project is drawn from it, whatever the links say (RunSpec.script is resolved)."""
    from torchmend.profiler.launch import resolve

    return Path(os.path.abspath(resolve(str(script), list(args or ()), nproc_per_node).script))


def script_project(
    script: Path | None, args: list[str] | None, nproc_per_node: int | None, root: Path | None
) -> tuple[Project, Path | None]:
    """The project of the script a command line names (after a torchrun command too), and the script as given;
    (the current directory's project, None) without a script (a trace) or when the launch line is wrong (the run
    reports that). A bad configuration ends the command here, before anything runs (exit 24)."""
    from torchmend.profiler.launch import LaunchError
    from torchmend.project import Project

    given = None
    if script is not None:
        with contextlib.suppress(LaunchError):
            given = given_script(script, args, nproc_per_node)
    with project_errors():
        return Project.for_script(given, root), given


def check_journal(project: Project, writes: bool) -> None:
    """Before anything runs: a fix that was interrupted while writing is rolled back (or, for --diff and --check,
    which write nothing, named); and when this command will write, its undo records must have a place to go."""
    with project_errors():
        records = project.check_journal(writes)
    if writes:
        _warn_state_inside(project)
    for r in records:
        if writes:
            names = ", ".join(project.display(f) for f in r.files)
            err.print(
                f"[yellow]rolled back[/] the fix of {r.created}, which was interrupted while writing: {names} as "
                "before it"
            )
        else:
            err.print(
                f"[yellow]warning:[/] the fix of {r.created} was interrupted while writing; `torchmend undo` "
                "rolls it back"
            )


def _warn_state_inside(project: Project) -> None:
    """The undo records would be kept inside the project (a $TORCHMEND_STATE_DIR there, a relative one given from
    inside it): git, `torchmend pr` and the project's tools see them as files of the project."""
    from torchmend.store import state_dir

    state = state_dir()
    if state.is_relative_to(project.root.resolve()) or state.is_relative_to(project.root):
        err.print(
            f"[yellow]warning:[/] the undo records go inside the project, in {escape(str(state))} "
            "($TORCHMEND_STATE_DIR): git and your tools will see them; set it to a folder outside the project"
        )
