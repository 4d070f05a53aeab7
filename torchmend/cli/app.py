"""The typer app and what every command shares: the consoles and the one way to fail with an exit code."""

from __future__ import annotations

import errno
import os
import sys
from enum import Enum
from typing import Annotated, NoReturn, Optional

import typer
from rich.console import Console
from rich.text import Text

from torchmend import __version__
from torchmend.cli.exitcodes import ExitCode

app = typer.Typer(
    name="torchmend",
    help="Find and fix what stops torch.compile from paying off in a training script (graph breaks, "
    "recompilations): scan reports them at your source line, fix rewrites the source behind them.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)
out = Console(highlight=False)
err = Console(stderr=True, highlight=False)


class Format(str, Enum):
    table = "table"
    json = "json"


def _version(value: bool) -> None:
    if value:
        print(f"torchmend {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        Optional[bool], typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = None,
) -> None:
    """torchmend: graph breaks and recompilations, found at your source line and fixed there."""


def fail(code: ExitCode, message: str, detail: str = "") -> NoReturn:
    err.print(f"[bold red]torchmend:[/] {message}")
    if detail:
        err.print(Text(detail, style="dim"))
    raise typer.Exit(int(code))


def write_stdout(data: bytes) -> None:
    """Write `data` (a patch) to stdout as it is. A reader that stopped early (`| head`) ends the command
    quietly with 141, as SIGPIPE would; any other failure (a full disk, /dev/full) with a one-line error."""
    try:
        sys.stdout.flush()
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
    except BrokenPipeError:
        _quiet_stdout()
        raise typer.Exit(141) from None
    except OSError as e:
        _quiet_stdout()
        fail(ExitCode.INTERNAL_ERROR, f"cannot write to stdout: {e.strerror or errno.errorcode.get(e.errno or 0, e)}")


def _quiet_stdout() -> None:
    # What is still buffered would fail again when Python flushes stdout at exit: send it nowhere instead.
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
