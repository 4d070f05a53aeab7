"""Tables that stay readable at any width: a table when its long text column has room, a list below that.

rich shares a narrow width out among all columns, so at 80 columns (or rich's default of 80 when the output is
piped) a five-column table wrapped its long text one word per line. Here the short columns never wrap, the long
text takes what is left, and when that is too little each row becomes a header line with its text indented
under it. Output with no terminal anywhere (piped in CI, redirected to a file) is laid out at 120 columns.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from rich.console import Console, ConsoleOptions, Group, RenderableType
from rich.table import Table
from rich.text import Text

NO_TERMINAL_WIDTH = 120  # piped or redirected with no terminal at all: rich would assume 80
MIN_TEXT_WIDTH = 40  # the long text column narrower than this reads as a column of single words
LIST_INDENT = 4


def output_width(console: Console) -> int:
    """The width to lay tables out at: the terminal's or $COLUMNS; 120 with no terminal at all."""
    from torchmend.cli.app import width_known

    return console.width if console.is_terminal or width_known() else NO_TERMINAL_WIDTH


@contextmanager
def laid_out(console: Console) -> Iterator[int]:
    """Print at output_width inside the block (rich's `print(width=)` cannot widen past the console's own)."""
    width = output_width(console)
    saved = console._width  # rich offers no public way back to "follow the terminal"
    console.width = width
    try:
        yield width
    finally:
        console._width = saved


def _cell_width(cell: str | Text) -> int:
    text = cell.plain if isinstance(cell, Text) else cell
    return max((len(line) for line in text.splitlines()), default=0)


def text_room(width: int, short: Sequence[int]) -> int:
    """What a table of `width` columns leaves to its one wrapping column beside short columns this wide: rich's
    default box pads each column with a space on each side and draws a rule between and around them."""
    columns = len(short) + 1
    return width - sum(short) - 3 * columns - 1


def fitted(
    headers: Sequence[str],
    rows: Sequence[Sequence[str | Text]],
    text_column: int,
    width: int,
    optional: Sequence[int] = (),
    title: Text | str | None = None,
    justify: dict[int, str] | None = None,
    show_lines: bool = False,
    labelled: Sequence[int] = (),
) -> RenderableType:
    """A table of `rows` whose column `text_column` holds the long text and wraps; the others never wrap. When
    the text column would be narrower than MIN_TEXT_WIDTH, the `optional` columns are dropped (in order), and
    if that is not enough each row becomes a list entry: the short cells on one line (the `labelled` ones after
    their header, `fix: gate-print`; the optional ones left out), the text under them."""
    justify = justify or {}
    keep = [i for i in range(len(headers)) if i != text_column]
    for drop in [None, *optional]:
        if drop is not None:
            keep = [i for i in keep if i != drop]
        short = [max([len(headers[i]), *(_cell_width(r[i]) for r in rows)]) for i in keep]
        if text_room(width, short) >= MIN_TEXT_WIDTH:
            return _table(headers, rows, text_column, keep, title, justify, show_lines)
    short = [i for i in range(len(headers)) if i != text_column and i not in optional]
    labels = {i: f"{headers[i]}: " for i in labelled}
    return _listed(rows, text_column, short, labels, title)


def _table(
    headers: Sequence[str],
    rows: Sequence[Sequence[str | Text]],
    text_column: int,
    keep: list[int],
    title: Text | str | None,
    justify: dict[int, str],
    show_lines: bool,
) -> Table:
    table = Table(title=title, title_justify="left", expand=True, show_lines=show_lines)
    shown = sorted([*keep, text_column])
    for i in shown:
        if i == text_column:
            table.add_column(headers[i], ratio=1, overflow="fold")
        else:
            table.add_column(headers[i], no_wrap=True, justify=justify.get(i, "left"))  # type: ignore[arg-type]
    for r in rows:
        table.add_row(*(r[i] for i in shown))
    return table


def _listed(
    rows: Sequence[Sequence[str | Text]],
    text_column: int,
    short: list[int],
    labels: dict[int, str],
    title: Text | str | None,
) -> Group:
    parts: list[RenderableType] = [Text(title) if isinstance(title, str) else title] if title is not None else []
    for r in rows:
        cells = [_labelled(labels.get(i, ""), r[i]) for i in short]
        head = Text("  ").join(c for c in cells if c.plain)
        body = r[text_column]
        parts += [head, _Indented(body if isinstance(body, Text) else Text(body))]
    return Group(*parts)


def _labelled(label: str, cell: str | Text) -> Text:
    """`fix: gate-print`; `no fix` for an empty (`—`) cell."""
    text = cell if isinstance(cell, Text) else Text(str(cell))
    if label and text.plain in ("—", ""):
        return Text(f"no {label.rstrip(': ')}")
    return Text(label) + text


class _Indented:
    """Text wrapped under a list entry's head line, indented, with no trailing spaces (rich's Padding pads every
    wrapped line to the block's width, which piped output keeps)."""

    def __init__(self, text: Text) -> None:
        self.text = text

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterator[Text]:
        for line in self.text.wrap(console, max(options.max_width - LIST_INDENT, 20)):
            line.rstrip()
            yield Text(" " * LIST_INDENT) + line
