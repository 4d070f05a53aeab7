"""`torchmend undo`: put back the files as they were before the last `fix` of a project."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from torchmend.cli.app import app, fail, out
from torchmend.cli.exitcodes import ExitCode


@app.command(short_help='Undo the last fix of this project.')
def undo(
    project: Annotated[Optional[Path], typer.Option(help="The project whose last fix to undo. Default: the git "
                                                    "work tree holding the current directory, else the current "
                                                    "directory.")] = None,
    list_: Annotated[bool, typer.Option("--list", help="List the fixes that can be undone, newest last, and "
                                        "change nothing.")] = False,
) -> None:
    """Undo the last `torchmend fix` of this project: every file it wrote goes back to its text from before,
    provided none was edited since (otherwise nothing is changed and the saved patch is named, to undo by
    hand). Run it again to undo the fix before that."""
    from torchmend.cli.running import project_root_for
    from torchmend.store import WriteRefused, undo as undo_record, undo_records

    root = (project or project_root_for(Path.cwd() / "x")).resolve()
    records = undo_records(root)
    if list_:
        for r in records:
            out.print(f"{r.created}  {len(r.files)} file(s)  {r.patch}")
        if not records:
            out.print(f"no fix of {root} to undo")
        return
    if not records:
        fail(ExitCode.NOTHING_TO_UNDO, f"no fix of {root} to undo")
    last = records[-1]
    try:
        undo_record(last, root)
    except WriteRefused as e:
        fail(ExitCode.WRITE_REFUSED, f"nothing was undone: {e}")
    out.print(f"[bold green]Undid the fix of {last.created}[/]: restored "
              + ", ".join(str(Path(p).relative_to(root)) if p.startswith(str(root)) else p for p in last.files))
