"""Rich rendering for `fix`: one proposed change with its diff, what could not be fixed, before vs after."""

from __future__ import annotations

from rich.console import Console, Group
from rich.panel import Panel
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text

from torchmend.codemods.base import NoFix, Proposal
from torchmend.codemods.engine import unified_diff
from torchmend.codemods.review import KEYS
from torchmend.profiler.findings import PROJECT, Summary

_SAFETY = {"safe": "bold green", "unsafe": "bold red"}


def where(p: Proposal | NoFix) -> str:
    f = p.finding
    if f.where != PROJECT and f.user_frame:
        return f"{f.user_frame.file}:{f.user_frame.line}"
    return f"{f.file}:{f.line}"


def change_panel(p: Proposal, display: str, line: int, before: str, after: str, index: int, total: int) -> Panel:
    head = Text.assemble((f"[{index}/{total}] ", "dim"), (f"{display}:{line}", "bold"), "  ",
                         (p.rule, "bold magenta"), "  ", (p.safety, _SAFETY[p.safety]))
    body = Text()
    for f in p.findings:
        times = f"{f.count}×" if f.count != 1 else "once"
        body.append(f"{f.rule} {f.title}", style="bold")
        if f.variable:
            body.append(f"  `{f.variable}`", style="cyan")
        body.append(f"  ({times}, {where_finding(f)})\n", style="dim")
        body.append(f"  {f.reason}\n")
    body.append("fix: ", style="bold")
    body.append(p.why + "\n")
    if p.note:
        body.append("note: ", style="bold yellow")
        body.append(p.note + "\n")
    if p.alternative:
        body.append("instead: ", style="bold")
        body.append(p.alternative + "\n")
    diff = unified_diff(display, before, after)
    return Panel(Group(body, Syntax(diff, "diff", theme="ansi_dark", background_color="default", word_wrap=True)),
                 title=head, title_align="left")


def where_finding(f) -> str:  # type: ignore[no-untyped-def]
    if f.where != PROJECT and f.user_frame:
        return f"in {f.file.split('/site-packages/')[-1]}, reached from {f.user_frame.file}:{f.user_frame.line}"
    return f"{f.file}:{f.line}"


def help_text() -> Text:
    t = Text()
    for key, meaning in KEYS.items():
        t.append(f"{key} - {meaning}\n", style="bold" if key == "?" else "")
    return t


def unfixed_view(items: list[NoFix]) -> Table:
    table = Table(title=Text("not fixed", style="bold"), title_justify="left", show_header=True, expand=True)
    table.add_column("where", no_wrap=True)
    table.add_column("rule", no_wrap=True)
    table.add_column("why not", ratio=1)
    for n in items:
        why = Text(n.reason)
        if n.advice:
            why.append(f"\n→ {n.advice}", style="green")
        table.add_row(where(n), n.finding.rule, why)
    return table


def _num(v: float | int | None, unit: str = "") -> str:
    if v is None:
        return "—"
    if isinstance(v, float):
        return f"{v:.4f}{unit}" if v < 0.1 else f"{v:.2f}{unit}"
    return str(v)


def before_after(before: Summary, after: Summary, fix_before: int, fix_after: int) -> Table:
    table = Table("", "before", "after", title=Text("before → after (same script, budget and backend)",
                                                     style="bold"), title_justify="left")
    rows = [
        ("findings to fix", fix_before, fix_after),
        ("graph breaks", before.graph_breaks, after.graph_breaks),
        ("recompiles", before.recompiles, after.recompiles),
        ("recompile-limit hits", before.recompile_limit_hits, after.recompile_limit_hits),
        ("graphs", before.graphs, after.graphs),
        ("compile seconds", before.compile_seconds, after.compile_seconds),
        ("first step (s)", before.first_step_s, after.first_step_s),
        ("steady step (s, median)", before.steady_step_s, after.steady_step_s),
    ]
    for label, b, a in rows:
        style = ""
        if isinstance(b, int) and isinstance(a, int):
            style = "green" if a < b else ("red" if a > b else "")
        table.add_row(label, _num(b), Text(_num(a), style=style))
    return table


def print_proposal_list(console: Console, items: list[Proposal], display) -> None:  # type: ignore[no-untyped-def]
    for p in items:
        console.print(Text.assemble((f"{display(p)}", "bold"), "  ", (p.rule, "magenta"), "  ",
                                    (p.safety, _SAFETY[p.safety]), f"  {p.why}"))
