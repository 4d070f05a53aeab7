"""`--help` pages as a definition list (click's layout), not typer's rich panels.

typer's panels put a type column beside every option (`<bool>` beside each flag, as if it took a value) and
gave `--unsafe-fixes / --no-unsafe-fixes` a column of its own, which squeezed every description to a few words
a line at 80 columns. Here an option's name and its value (`--steps N`) come first, its description beside it, or
on the next line when the name is long; nothing is broken at a hyphen (`unsafe-fixes`, `--no-verify`), and the
page is at most PAGE_WIDTH columns wide however wide the terminal is.
"""

from __future__ import annotations

import textwrap
import typing
from collections.abc import Sequence
from typing import Any

import typer
from typer import _click
from typer._click.formatting import HelpFormatter, iter_rows, measure_table, term_len, wrap_text

PAGE_WIDTH = 100  # a line of prose wider than this is hard to read, however wide the terminal
NAME_COLUMN = 28  # an option's name and value longer than this puts its description on the next line
_NB_HYPHEN = "\u2011"  # stands in for "-" while click wraps a paragraph, so that no line ends inside a word


def _value_name(param: Any) -> str:
    """What an option's value is called in its help (`--steps N`, `--format [table|json]`)."""
    desc = param.type_descriptor
    if desc.is_choice:
        return "[" + "|".join(str(getattr(c, "value", c)) for c in desc.choices) + "]"
    if desc.is_path:
        return "PATH"
    kind = desc.annotation
    if typing.get_origin(kind) is list:
        kind = (typing.get_args(kind) or (str,))[0]
    return {int: "N", float: "NUM"}.get(kind, "TEXT")


def name_values(command: Any) -> None:
    """Give each option that takes a value the name of it its help shows (unless it has one), in place of typer's
    `<int range>`; a flag shows none."""
    for param in command.params:
        if isinstance(param, typer.core.TyperOption) and not param.is_flag and param.metavar is None:
            param.metavar = _value_name(param)
        elif isinstance(param, typer.core.TyperArgument) and param.metavar is None:
            param.metavar = (param.name or "").upper()  # `[SCRIPT] [ARGS]...`, as the help's prose names them


def write_params(command: Any, ctx: Any, formatter: HelpFormatter) -> None:
    """The Arguments and Options sections: an argument by its name alone (typer adds its type beside it)."""
    arguments, options = [], []
    for param in command.get_params(ctx):
        record = param.get_help_record(ctx)
        if record is None:
            continue
        if isinstance(param, typer.core.TyperArgument):
            dots = "..." if param.nargs != 1 else ""
            arguments.append((f"{param.metavar}{dots}", param.help or ""))
        else:
            options.append(record)
    for title, rows in (("Arguments", arguments), ("Options", options)):
        if rows:
            with formatter.section(title):
                formatter.write_dl(rows)


def _unbroken(text: str, width: int, indent: str = "") -> str:
    """`text` wrapped at `width`, never inside a word (a hyphenated name, a path, a URL stays whole)."""
    wrapper = textwrap.TextWrapper(
        width, initial_indent=indent, subsequent_indent=indent, break_on_hyphens=False, break_long_words=False
    )
    return "\n".join(wrapper.fill(p) for p in text.split("\n\n"))


class Formatter(HelpFormatter):
    """click's formatter, wrapping without breaking words."""

    def write_text(self, text: str) -> None:
        indent = " " * self.current_indent
        wrapped = wrap_text(
            text.replace("-", _NB_HYPHEN),
            self.width,
            initial_indent=indent,
            subsequent_indent=indent,
            preserve_paragraphs=True,
        )
        self.write(wrapped.replace(_NB_HYPHEN, "-") + "\n")

    def write_dl(self, rows: Sequence[tuple[str, str]], col_max: int = NAME_COLUMN, col_spacing: int = 2) -> None:
        rows = list(rows)
        first_col = min(measure_table(rows)[0], col_max) + col_spacing
        text_width = max(self.width - first_col - self.current_indent, 30)
        for first, second in iter_rows(rows, 2):
            self.write(f"{'':>{self.current_indent}}{first}")
            if not second:
                self.write("\n")
                continue
            if term_len(first) <= first_col - col_spacing:
                self.write(" " * (first_col - term_len(first)))
            else:
                self.write("\n" + " " * (first_col + self.current_indent))
            lines = _unbroken(second, text_width).splitlines() or [""]
            self.write(lines[0] + "\n")
            for line in lines[1:]:
                self.write(" " * (first_col + self.current_indent) + line + "\n")


class Context(_click.Context):
    formatter_class = Formatter

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("max_content_width", PAGE_WIDTH)
        super().__init__(*args, **kwargs)
