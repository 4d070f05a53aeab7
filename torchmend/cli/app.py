"""The typer app and what every command shares: the consoles and the one way to fail with an exit code."""

from __future__ import annotations

import errno
import os
import sys
from enum import Enum
from typing import Annotated, Any, NoReturn, TextIO

import typer
from rich.console import Console
from rich.text import Text
from typer import _click

from torchmend import __version__
from torchmend.cli import helppage
from torchmend.cli.exitcodes import ExitCode


class _HelpFlag:
    """The help flag with the default a flag has, False. typer 0.29 gives its help option none, so every command
    (even `rules`, or a subcommand's --help) coerces that None through a pydantic TypeAdapter, importing pydantic:
    0.08 s more per start (`torchmend rules` 0.21 s with it, 0.13 s without: medians on a 2-core machine). A False is a
    bool, which typer passes through without one. And the help page as cli/helppage.py lays it out."""

    def get_help_option(self, ctx: Any) -> Any:
        option = super().get_help_option(ctx)  # type: ignore[misc]
        if option is not None and option.default is None:
            option.default = False
        return option

    context_class: type[_click.Context] = (
        helppage.Context
    )  # the help page is a definition list (cli/helppage.py), not typer's panels

    def format_help(self, ctx: Any, formatter: Any) -> None:
        from typer.core import MARKUP_MODE_KEY

        helppage.name_values(self)
        ctx.ensure_object(dict)
        if isinstance(ctx.obj, dict):
            ctx.obj[MARKUP_MODE_KEY] = None  # typer escapes `[default: ...]` for rich markup otherwise
        _click.Command.format_help(self, ctx, formatter)  # type: ignore[arg-type]

    def format_options(self, ctx: Any, formatter: Any) -> None:
        helppage.write_params(self, ctx, formatter)
        if hasattr(self, "format_commands"):
            self.format_commands(ctx, formatter)


# `--help` lists the commands in the order a user meets them: try the bundled example; find, fix, take back, check,
# ship; then the static and timing tools, the reference and the settings. A command not named here comes last.
COMMAND_ORDER = ("example", "scan", "fix", "undo", "verify", "pr", "lint", "tune", "rules", "config")


class _Group(_HelpFlag, typer.core.TyperGroup):
    def list_commands(self, ctx: Any) -> list[str]:
        names = super().list_commands(ctx)
        rank = {name: i for i, name in enumerate(COMMAND_ORDER)}
        return sorted(names, key=lambda n: rank.get(n, len(COMMAND_ORDER)))


class _Command(_HelpFlag, typer.core.TyperCommand):
    """A command that notes the `--format` its command line asks for (cli/failure.py: a machine format gets its
    error document on every exit), also when click refuses the command line."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        from torchmend.cli import failure

        given = list(args)  # click's parser consumes the list it is given
        try:
            rest: list[str] = super().parse_args(ctx, args)
        except typer._click.exceptions.UsageError as e:
            failure.want(ctx.info_name or "", _format_given(self, ctx, given))
            failure.record(e.exit_code, e.format_message())
            raise
        failure.want(ctx.info_name or "", ctx.params.get("format"))
        return rest


def _format_given(command: Any, ctx: Any, args: list[str]) -> object:
    """The `--format` value in a command line click refused (an unknown option, a bad value elsewhere): the line
    parsed again by click's parser for that option alone, every other option and argument passed over, the value
    left a string (no conversion: typer's would import pydantic); None if none."""
    from typer._click.parser import _OptionParser

    parser = _OptionParser(ctx)
    parser.ignore_unknown_options = True
    for param in command.params:
        if param.name == "format":
            param.add_to_parser(parser, ctx)
    try:
        opts, _, _ = parser.parse_args(list(args))
    except typer._click.exceptions.ClickException:
        return None
    return opts.get("format")


class _Typer(typer.Typer):
    """A typer app whose commands are _Command unless they name their own class."""

    def command(self, *args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("cls", _Command)
        return super().command(*args, **kwargs)


app = _Typer(
    cls=_Group,
    name="torchmend",
    help="Find and fix what stops torch.compile from paying off in a training script (graph breaks, "
    "recompilations): scan reports them at your source line, fix rewrites the source behind them.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def width_known() -> bool:
    """Whether the output has a width to wrap at: $COLUMNS, or a terminal on stdin, stdout or stderr (`| cat` in a
    terminal: rich reads its size from stdin). Piped or redirected with none, rich would assume 80 columns and break
    lines there, mid-sentence and inside paths, which then cannot be copied: such output is not wrapped at all."""
    if os.environ.get("COLUMNS", "").strip().isdigit():
        return True
    for fd in (0, 1, 2):
        try:
            os.get_terminal_size(fd)
            return True
        except (OSError, ValueError):
            continue
    return False


out = Console(highlight=False, soft_wrap=not width_known())
err = Console(stderr=True, highlight=False, soft_wrap=not width_known())


class Format(str, Enum):
    """How a command that reports findings prints them (docs/formats.md)."""

    table = "table"  # for people: grouped by file
    json = "json"  # torchmend's own schema (docs/scan-json.md)
    sarif = "sarif"  # SARIF 2.1.0, for code scanning (torchmend/cli/formats/sarif.py)
    github = "github"  # GitHub Actions workflow commands: annotations on the lines (torchmend/cli/formats/github.py)

    @property
    def for_people(self) -> bool:
        """Whether stdout is for a person: otherwise it carries the report alone, and progress goes to stderr."""
        return self is Format.table


def _version(value: bool) -> None:
    if value:
        print(f"torchmend {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """torchmend: graph breaks and recompilations, found at your source line and fixed there."""


# What torchmend's own words use beyond ASCII, written where a stream cannot encode it (LC_ALL=C with
# PYTHONUTF8=0: CI containers, minimal Docker images). Anything else becomes its unaccented letters, else "?".
ASCII_FALLBACK = {
    "\u2192": "->",
    "\u2190": "<-",
    "\u21bb": "~>",
    "\u2014": "-",  # one column, as rich measured it: tables stay aligned
    "\u2013": "-",
    "\u2212": "-",
    "\u00d7": "x",
    "\u2713": "ok",
    "\u2717": "x",
    "\u2026": "...",
    "\u00b7": ".",
    "\u2022": "*",
    "\u2018": "'",
    "\u2019": "'",
    "\u201c": '"',
    "\u201d": '"',
    "\u2248": "~",
    "\u2264": "<=",
    "\u2265": ">=",
    "\u2260": "!=",
    "\u00b1": "+/-",
    "\u00b5": "u",
    "\u2500": "-",
    "\u2502": "|",
    "\u00a0": " ",
}
_ASCII_ERRORS = "torchmend-ascii"


def _ascii_fallback(e: UnicodeError) -> tuple[str, int]:
    import unicodedata

    if not isinstance(e, UnicodeEncodeError):
        raise e
    text = e.object[e.start : e.end]
    said = []
    for ch in text:
        plain = ASCII_FALLBACK.get(ch) or unicodedata.normalize("NFKD", ch).encode("ascii", "ignore").decode()
        said.append(plain or "?")
    return "".join(said), e.end


def degrade_streams() -> None:
    """Where stdout or stderr cannot encode torchmend's own characters (a C or POSIX locale without UTF-8 mode),
    write them in ASCII (`→` as `->`) instead of failing with UnicodeEncodeError; rich draws its boxes in ASCII
    there by itself. A UTF-8 stream is left as it is."""
    import codecs

    try:
        codecs.lookup_error(_ASCII_ERRORS)
    except LookupError:
        codecs.register_error(_ASCII_ERRORS, _ascii_fallback)
    for stream in (sys.stdout, sys.stderr):
        encoding = getattr(stream, "encoding", None) or "ascii"
        try:
            "".join(ASCII_FALLBACK).encode(encoding)
        except (UnicodeEncodeError, LookupError):
            reconfigure = getattr(stream, "reconfigure", None)
            if reconfigure is not None:
                reconfigure(errors=_ASCII_ERRORS)


def fail(code: ExitCode, message: str, detail: str = "") -> NoReturn:
    """End the command with `code` after saying why on stderr (`message` in rich markup, `detail` plain), noted
    for the error document of a machine format (cli/failure.py)."""
    from torchmend.cli import failure

    failure.record(int(code), Text.from_markup(message).plain, detail)
    err.print(f"[bold red]torchmend:[/] {message}")
    if detail:
        err.print(Text(detail, style="dim"))
    raise typer.Exit(int(code))


def write_stdout(data: bytes) -> None:
    """Write `data` (a patch) to stdout as it is; a failure ends the command as stdout_failed() says."""
    try:
        sys.stdout.flush()
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
    except StdoutFailed as e:
        raise typer.Exit(stdout_failed(e.error)) from None
    except OSError as e:
        raise typer.Exit(stdout_failed(e)) from None


class StdoutFailed(Exception):
    """A write to stdout failed. Not an OSError, so that typer (which ends a command with 1 on a closed pipe, and
    re-raises other OSErrors) lets it through to main.run; not caught by the code that was printing either, since
    nothing but stdout_failed() can do anything about it."""

    def __init__(self, error: OSError) -> None:
        super().__init__(str(error))
        self.error = error


class GuardedStdout:
    """sys.stdout, its write errors raised as StdoutFailed (main.run puts it in place for print() and rich)."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self.written = False  # whether anything reached it: an error document comes only on an empty stdout

    def write(self, text: str) -> int:
        self.written = self.written or bool(text)
        try:
            return self._stream.write(text)
        except OSError as e:
            raise StdoutFailed(e) from e

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError as e:
            raise StdoutFailed(e) from e

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def stdout_failed(e: OSError) -> int:
    """The exit status for a failed write to stdout, after the one line it deserves: a reader that stopped early
    (`| head`) ends the command quietly with BROKEN_PIPE (141, as SIGPIPE would); any other failure (a full
    disk, /dev/full) with a one-line error and STDOUT_FAILED."""
    _quiet_stdout()
    if isinstance(e, BrokenPipeError):
        return int(ExitCode.BROKEN_PIPE)
    err.print(f"[bold red]torchmend:[/] cannot write to stdout: {e.strerror or errno.errorcode.get(e.errno or 0, e)}")
    return int(ExitCode.STDOUT_FAILED)


def _quiet_stdout() -> None:
    # What is still buffered would fail again when Python flushes stdout at exit: send it nowhere instead.
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.__stdout__.fileno())  # type: ignore[union-attr]
    os.close(devnull)
