"""`torchmend example`: copy the bundled example training script into a folder of its own and run `fix` on it.

The example is fixtures/scan/several/train.py of the source tree (one copy, which the scan fixture's recordings
and expectations name). The wheel carries it as torchmend/example/train.py (pyproject.toml force-includes it;
tests/unit/test_example_packaging.py checks the built wheel); a checkout or an editable install reads it where
it is.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path
from typing import Annotated, Optional

import typer

from torchmend.cli.app import app, fail, out
from torchmend.cli.exitcodes import ExitCode

EXAMPLE_NAME = "train.py"
# Where the example is: in an installed wheel, inside the package; in a checkout, the scan fixture itself.
_PACKAGE = Path(__file__).resolve().parent.parent
CANDIDATES = (_PACKAGE / "example" / EXAMPLE_NAME, _PACKAGE.parent / "fixtures" / "scan" / "several" / EXAMPLE_NAME)


def bundled_example() -> Path | None:
    """The bundled example script, from the installed package or the checkout torchmend runs from."""
    return next((p for p in CANDIDATES if p.is_file()), None)


@app.command(short_help="Run fix on a copy of the bundled example training script, to see what torchmend does.")
def example(
    ctx: typer.Context,
    fix_args: Annotated[
        Optional[list[str]],
        typer.Argument(
            metavar="[-- FIX_OPTIONS]",
            help="More options for `fix`, after `--` (e.g. `-- --diff --unsafe-fixes`); with any, fix runs with those "
            "alone (no `fix --yes --unsafe-fixes` off a terminal).",
            show_default=False,
        ),
    ] = None,
    into: Annotated[
        Optional[Path],
        typer.Option(
            "--into",
            help="Copy the example into DIR (made if missing; it must not hold a train.py yet). Default: a fresh "
            "temporary folder.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Copy the bundled example (a small trainer with several torch.compile problems at once) into a folder of its
    own and run `torchmend fix train.py --backend aot_eager --verify-backend aot_eager` there: judged on aot_eager,
    a proxy that is never timed, so it takes well under a minute on a CPU (on your own script, `fix` judges on the
    script's own backend, inductor unless it says otherwise, in three timed runs per arm; the outcome line says which
    backend judged). On a terminal
    fix asks about each change; off a terminal it applies them all (`fix --yes --unsafe-fixes`) and prints each change
    it wrote with its diff. The folder is named at the end: `torchmend undo --project DIR` puts the file back.

    Examples:

      torchmend example

      torchmend example --into ./tm-example -- --diff --unsafe-fixes
    """
    source = bundled_example()
    if source is None:
        fail(ExitCode.USAGE, "the bundled example is missing from this installation", " or ".join(map(str, CANDIDATES)))
    if into is None:
        folder = Path(tempfile.mkdtemp(prefix="torchmend-example-"))
    else:
        folder = into.absolute()
        if (folder / EXAMPLE_NAME).exists():
            fail(ExitCode.USAGE, f"{folder / EXAMPLE_NAME} exists already: give --into an empty or new folder")
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            fail(ExitCode.USAGE, f"cannot make {folder}: {e.strerror or e}")
    script = folder / EXAMPLE_NAME
    shutil.copyfile(source, script)
    out.print(f"copied the bundled example to {script}")
    extra = list(fix_args or [])
    mode = [] if sys.stdin.isatty() or extra else ["--yes", "--unsafe-fixes"]
    # `fix` itself, parsed and run as if typed: its exit code and messages are the command's own.
    # (typer's group: click's, or from typer 0.28 its own copy of click, so no isinstance on either)
    parent = ctx.parent
    assert parent is not None  # a command of the app
    fix_command = parent.command.get_command(parent, "fix")  # type: ignore[attr-defined]
    quick = ["--backend", "aot_eager", "--verify-backend", "aot_eager"]
    argv = [str(script), *quick, *mode, *extra]
    try:
        with fix_command.make_context("fix", argv, parent=parent) as sub:
            fix_command.invoke(sub)
    finally:
        out.print(f"the example's files are in {folder} (to undo a written fix: torchmend undo --project {folder})")
