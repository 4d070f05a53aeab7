"""Rich rendering of scan results: findings grouped by file, and the one-line summary."""

from __future__ import annotations

from collections import defaultdict

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from torchmend.profiler.findings import LIBRARY, PROJECT, Finding, Summary

ENDED_BY = {
    "finished": "the script finished",
    "steps": "the --steps budget",
    "timeout": "the --timeout budget",
    "error": "the script raised an exception",
    "exit": "the script exited with a non-zero status",
    "killed": "the script was killed (signal or out of memory)",
    "interrupted": "Ctrl-C",
}

_SEVERITY_STYLE = {"fix": "bold red", "note": "yellow", "info": "dim"}
_KIND_LABEL = {"graph_break": "break", "recompile": "recompile", "recompile_limit": "LIMIT"}


def summary_line(s: Summary) -> str:
    parts = [
        f"{s.frames_compiled} frame{'s' if s.frames_compiled != 1 else ''} compiled",
        f"{s.graphs} graph{'s' if s.graphs != 1 else ''}",
        f"{s.graph_breaks} graph break{'s' if s.graph_breaks != 1 else ''}",
        f"{s.recompiles} recompile{'s' if s.recompiles != 1 else ''}",
        f"{s.recompile_limit_hits} recompile-limit hit{'s' if s.recompile_limit_hits != 1 else ''}",
        f"{s.compile_seconds:.2f} s compiling",
        f"{s.steps} optimizer step{'s' if s.steps != 1 else ''}",
    ]
    return " · ".join(parts) + f" — ended by {ENDED_BY.get(s.ended_by, s.ended_by)} after {s.wall_seconds:.1f} s"


def _what(f: Finding) -> Text:
    t = Text(f.title, style="bold")
    if f.variable:
        t.append(f"  `{f.variable}`", style="cyan")
    if f.pattern:
        label = {"once": "once (one-time, benign)", "storm": f"storm ({f.count}×)", "limit": "until the recompile limit"}
        t.append(f"  [{label[f.pattern]}]", style="magenta" if f.pattern != "once" else "dim")
    t.append("\n" + f.reason, style="default")
    if f.code:
        t.append(f"\n  {f.code}", style="dim")
    if f.where != PROJECT and f.user_frame:
        t.append(f"\nreached from {f.user_frame.file}:{f.user_frame.line} in {f.user_frame.function}", style="green")
    elif f.kind != "graph_break" and f.call_site and (f.call_site.file, f.call_site.line) != (f.file, f.line):
        t.append(f"\ncalled from {f.call_site.file}:{f.call_site.line}", style="green")
    if f.docs_url:
        t.append(f"\n{f.docs_url}", style="blue underline")
    return t


def findings_view(findings: list[Finding]) -> Group:
    by_file: dict[tuple[int, str], list[Finding]] = defaultdict(list)
    for f in findings:
        order = 0 if f.where == PROJECT else (2 if f.where == LIBRARY else 1)
        by_file[(order, f.file)].append(f)
    tables = []
    for (order, file), items in sorted(by_file.items()):
        where = {0: "", 1: "  (outside the project)", 2: "  (library: not edited; see 'reached from')"}[order]
        table = Table(title=Text(file + where, style="bold underline"), title_justify="left", expand=True,
                      show_lines=True)
        table.add_column("line", justify="right", no_wrap=True)
        table.add_column("rule", no_wrap=True)
        table.add_column("kind", no_wrap=True)
        table.add_column("function", no_wrap=True)
        table.add_column("×", justify="right", no_wrap=True)
        table.add_column("what", ratio=1)
        for f in sorted(items, key=lambda f: (f.line, f.rule)):
            table.add_row(str(f.line), Text(f.rule, style=_SEVERITY_STYLE[f.severity]), _KIND_LABEL[f.kind],
                          f.function, str(f.count), _what(f))
        tables.append(table)
    return Group(*tables)


def print_scan(console: Console, findings: list[Finding], summary: Summary) -> None:
    if findings:
        console.print(findings_view(findings))
        fix = sum(f.severity == "fix" for f in findings)
        notes = sum(f.severity == "note" for f in findings)
        info = sum(f.severity == "info" for f in findings)
        console.print(f"[bold]{len(findings)} finding{'s' if len(findings) != 1 else ''}[/]: "
                      f"[bold red]{fix} to fix[/], [yellow]{notes} one-time[/], [dim]{info} informational[/]")
    else:
        console.print("[bold green]No graph breaks or recompilations found.[/]")
    console.print(summary_line(summary))
