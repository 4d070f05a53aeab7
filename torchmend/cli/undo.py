"""`torchmend undo`: put back the files as they were before the last `fix` of a project, or finish backwards a
fix whose write was interrupted (its journal incomplete)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from torchmend.cli.app import app, err, fail, out
from torchmend.cli.exitcodes import ExitCode

if TYPE_CHECKING:
    from torchmend.project import Project


def roll_back_incomplete(project: Project) -> None:
    """Roll back every write of this project that was interrupted (killed) half way; say what was done. Exits
    with WRITE_REFUSED when a file was edited since (it is left alone and named)."""
    from torchmend.cli.context import project_errors

    with project_errors():
        done = project.roll_back_interrupted()
    for record in done:
        names = ", ".join(project.display(p) for p in record.files)
        err.print(
            f"[yellow]rolled back[/] the fix of {record.created}, which was interrupted while writing: "
            f"{names} as before it"
        )


def warn_damaged(root: Path) -> None:
    from torchmend.store import records

    for path, why in records(root).damaged:
        err.print(f"[yellow]warning:[/] skipped the damaged undo record {path}: {why}")


def _looked_in(root: Path) -> str:
    """Where undo looked for the records, and which setting chose it: a fix recorded under another state folder
    (another $TORCHMEND_STATE_DIR, or a relative one given from another folder) is not seen."""
    import os

    from torchmend.store import undo_dir

    where = "$TORCHMEND_STATE_DIR" if os.environ.get("TORCHMEND_STATE_DIR") else "the default state folder"
    return f"looked in {undo_dir(root)}, from {where}"


@app.command(short_help="Undo the last fix of this project.")
def undo(
    project: Annotated[
        Optional[Path],
        typer.Option(
            help="The project whose last fix to undo. Default: the git "
            "work tree holding the current directory, else the current "
            "directory."
        ),
    ] = None,
    list_: Annotated[
        bool, typer.Option("--list", help="List the fixes that can be undone, newest last, and change nothing.")
    ] = False,
) -> None:
    """Undo the last `torchmend fix` of this project: every file it wrote goes back to its text from before,
    provided none was edited since (otherwise nothing is changed and the saved patch is named, to undo by
    hand). Run it again to undo the fix before that. A fix whose write was interrupted (the process killed half
    way) is rolled back first, and that is all this run does. Damaged records are named and skipped."""
    from torchmend.project import Project
    from torchmend.store import ProjectBusy, WriteRefused, records, retire, undone_already
    from torchmend.store import undo as undo_record

    this = Project.at(Path.cwd(), project, config=False)  # undo reads no configuration: a bad one never blocks it
    root = this.root
    found = records(root)
    warn_damaged(root)
    if list_:
        for r in found.incomplete:
            out.print(
                f"{r.created}  {len(r.files)} file(s)  interrupted while writing: `torchmend undo` rolls it "
                f"back  {r.path}"
            )
        for r in found.complete:
            out.print(f"{r.created}  {len(r.files)} file(s)  {r.patch}")
        if not found.complete and not found.incomplete:
            out.print(f"no fix of {root} to undo ({_looked_in(root)})")
        return
    if found.incomplete:
        roll_back_incomplete(this)
        return
    if not found.complete:
        fail(ExitCode.NOTHING_TO_UNDO, f"no fix of {root} to undo ({_looked_in(root)})")
    last = found.complete[-1]
    if undone_already(last):  # undone by an earlier undo that could not retire the record (read-only state)
        why = retire(last)
        if why:
            fail(
                ExitCode.WRITE_REFUSED,
                f"nothing was undone: the fix of {last.created} is undone already (its files are as before it), "
                f"but {why}; make the state folder writable and run undo again to undo the fix before it",
            )
        out.print(
            f"The fix of {last.created} was undone already (its files are as before it): its record is now "
            "retired; run undo again to undo the fix before it"
        )
        return
    try:
        why = undo_record(last, root)
    except ProjectBusy as e:
        fail(ExitCode.PROJECT_BUSY, f"nothing was undone: {e}")
    except WriteRefused as e:
        fail(ExitCode.WRITE_REFUSED, f"nothing was undone: {e}")
    out.print(
        f"[bold green]Undid the fix of {last.created}[/]: restored " + ", ".join(this.display(p) for p in last.files)
    )
    if why:
        err.print(
            f"[yellow]warning:[/] {why}: the state folder could not record the undo. The next undo finds the "
            "files as before this fix and says so; make the folder writable to undo the fix before it"
        )
