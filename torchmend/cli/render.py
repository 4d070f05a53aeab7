"""Rich rendering of scan results: findings grouped by file, and the one-line summary."""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Sequence

from rich.console import Console, Group
from rich.text import Text

from torchmend.cli.tables import NO_TERMINAL_WIDTH, fitted, laid_out
from torchmend.model import Finding, Placement, Summary, Where, repeated_words

ENDED_BY = {
    "finished": "the script finished",
    "steps": "the --steps budget",
    "timeout": "the --timeout budget",
    "error": "the script raised an exception",
    "exit": "the script exited with a non-zero status",
    "killed": "the script was killed by a signal",
    "lost": "the script exited before torchmend's end record was written",
    "trace": "the end of the trace",
}

_SEVERITY_STYLE = {"fix": "bold red", "note": "yellow", "info": "dim"}
_KIND_LABEL = {
    "graph_break": "break",
    "recompile": "recompile",
    "recompile_limit": "LIMIT",
    "script_failure": "FAILED",
    "suppression": "unused",
    "source": "source",
}


def expected_wrappers(findings: list[Finding]) -> str:
    """`DistributedDataParallel`, or several joined: who the expected breaks come from."""
    names = dict.fromkeys((f.expected or "").removeprefix("from ").split(" (")[0] for f in findings)
    return " and ".join(names)


def steps_text(s: Summary) -> str:
    """`12 optimizer steps`; with more than one optimizer stepping, what that is in iterations (--steps counts each
    optimizer's step(): a GAN's 12 steps are 6 iterations of its two)."""
    text = f"{s.steps} optimizer step{'s' if s.steps != 1 else ''}"
    if s.optimizers > 1:
        iterations, rest = divmod(s.steps, s.optimizers)
        text += (
            f" = {'about ' if rest else ''}{iterations} iteration{'s' * (iterations != 1)} of {s.optimizers} optimizers"
        )
    return text


def summary_line(s: Summary) -> str:
    parts = [
        f"{s.frames_compiled} frame{'s' if s.frames_compiled != 1 else ''} compiled",
        f"{s.graphs} graph{'s' if s.graphs != 1 else ''}",
        f"{s.graph_breaks} graph break{'s' if s.graph_breaks != 1 else ''}",
        f"{s.recompiles} recompile{'s' if s.recompiles != 1 else ''}",
        f"{s.recompile_limit_hits} recompile-limit hit{'s' if s.recompile_limit_hits != 1 else ''}",
        f"{s.compile_seconds:.2f} s compiling",
        steps_text(s),
    ]
    if s.ranks:
        parts.insert(0, f"{s.ranks} rank{'s' if s.ranks != 1 else ''} (counts summed over them)")
    if s.ended_by == "trace":
        return " · ".join(parts[:-1]) + " — read from a trace"
    return " · ".join(parts) + f" — ended by {ENDED_BY.get(s.ended_by, s.ended_by)} after {s.wall_seconds:.1f} s"


def rank_lines(s: Summary) -> list[str]:
    """One line per rank of a multi-rank run."""
    return [
        f"rank {r['rank']}: {r['graph_breaks']} graph break{'s' * (r['graph_breaks'] != 1)}, "
        f"{r['recompiles']} recompile{'s' * (r['recompiles'] != 1)}, "
        f"{r['recompile_limit_hits']} limit hit{'s' * (r['recompile_limit_hits'] != 1)}, "
        f"{r['compile_seconds']:.2f} s compiling, {r['steps']} steps"
        for r in s.per_rank
    ]


def ranks_text(f: Finding) -> str:
    """`ranks 0 (1×), 1 (1×)`, or `rank 1 only (1×)`."""
    counts = ", ".join(f"{r} ({n}×)" for r, n in sorted((f.ranks or {}).items()))
    return f"rank{'s' * (len(f.ranks or {}) != 1)} {counts}"


def _what(f: Finding) -> Text:
    t = Text(f.title, style="bold")
    if f.variable:
        t.append(f"  `{f.variable}`", style="cyan")
    if f.pattern:
        label = {
            "once": "once, on some ranks only" if f.divergent else "once (one-time, benign)",
            "storm": repeated_words(f.count),
            "limit": "until the recompile limit",
        }
        t.append(f"  [{label[f.pattern]}]", style="magenta" if f.pattern != "once" else "dim")
    t.append("\n" + f.reason, style="default")
    if f.code:
        t.append(f"\n  {f.code}", style="dim")
    if f.expected:
        t.append(f"\n{f.expected}", style="cyan")
    if f.where != Where.PROJECT and f.user_frame:
        t.append(f"\nreached from {f.user_frame.file}:{f.user_frame.line} in {f.user_frame.function}", style="green")
    elif f.kind != "graph_break" and f.call_site and (f.call_site.file, f.call_site.line) != (f.file, f.line):
        # the same file: its name is the table's title, and a long path would fill a narrow column
        place = f"line {f.call_site.line}" if f.call_site.file == f.file else f"{f.call_site.file}:{f.call_site.line}"
        t.append(f"\ncalled from {place}", style="green")
    if f.ranks is not None:
        t.append(f"\non {ranks_text(f)}", style="default")
        if f.divergent:
            t.append(
                "  rank-divergent: the other ranks wait for this one at the next collective (slow steps, or a hang)",
                style="bold yellow",
            )
    if f.docs_url:
        t.append(f"\n{f.docs_url}", style="blue underline")
    return t


def findings_view(findings: list[Finding], width: int = NO_TERMINAL_WIDTH) -> Group:
    """The findings grouped by file, each group a table (a list where `width` leaves the text too little room)."""
    by_file: dict[tuple[int, str], list[Finding]] = defaultdict(list)
    for f in findings:
        order = 3 if f.expected else 0 if f.where == Where.PROJECT else (2 if f.where == Where.LIBRARY else 1)
        by_file[(order, f.file)].append(f)
    tables = []
    for (order, file), items in sorted(by_file.items()):
        where = {
            0: "",
            1: "  (outside the project)",
            2: "  (library: not edited; see 'reached from')",
            3: "  (a parallel wrapper's own break: expected, not in your code)",
        }[order]
        rows: list[list[str | Text]] = [
            [
                str(f.line),
                Text(f.rule, style=_SEVERITY_STYLE[f.severity]),
                _KIND_LABEL[f.kind],
                f.function,
                f"{f.count}×",
                _what(f),
            ]
            for f in sorted(items, key=lambda f: (f.line, f.rule))
        ]
        tables.append(
            fitted(
                ["line", "rule", "kind", "function", "×", "what"],
                rows,
                text_column=5,
                width=width,
                optional=(2,),  # the rule code says the kind
                title=Text(file + where, style="bold underline"),
                justify={0: "right", 4: "right"},
                show_lines=True,
            )
        )
    return Group(*tables)


def counts_text(findings: list[Finding]) -> str:
    """The one wording of a set of findings' counts, for scan, fix and lint alike (issue 30): `5 findings: 4 to fix,
    1 one-time, 0 informational` (rich markup). One-time is the finding's severity `note`: a recompile that
    happens once (`pattern` once), judged alike by the run and by lint."""
    fix = sum(f.severity == "fix" for f in findings)
    notes = sum(f.severity == "note" for f in findings)
    # a parallel wrapper's own breaks (issue 32) are informational, counted apart: not the user's code
    expected = [f for f in findings if f.expected]
    info = sum(f.severity == "info" for f in findings) - len(expected)
    return (
        f"[bold]{len(findings)} finding{'s' if len(findings) != 1 else ''}[/]: "
        f"[bold red]{fix} to fix[/], [yellow]{notes} one-time[/], [dim]{info} informational[/]"
        + (f", [cyan]{len(expected)} expected from {expected_wrappers(expected)}[/]" if expected else "")
    )


def print_scan(
    console: Console, findings: list[Finding], summary: Summary, placements: Sequence[Placement] = ()
) -> None:
    with laid_out(console) as width:  # piped with no terminal: 120 columns for the summary lines too
        _print_scan(console, findings, summary, width)
        for p in placements:
            console.print(placement_text(p))


def placement_text(p: Placement) -> Text:
    """Compile placement, said once per compile call: where it broke and what compiled cleanly."""
    where = f"{os.path.basename(p.path)}:{p.line}"
    names = ", ".join(p.modules[:6]) + (f" and {len(p.modules) - 6} more" if len(p.modules) > 6 else "")
    broken = ", ".join(p.broken[:4]) + (" …" if len(p.broken) > 4 else "")
    return Text.assemble(
        ("Compile placement: ", "bold"),
        f"the compile of {p.model} at {where} breaks inside {broken}; {names} compiled without a break "
        f"({p.share * 100:.0f} % of its parameters). Compiling those in place (`module.compile()`) instead keeps "
        "them compiled and leaves the breaking code eager.",
    )


def _print_scan(console: Console, findings: list[Finding], summary: Summary, width: int) -> None:
    if findings:
        console.print(findings_view(findings, width))
        console.print(counts_text(findings))
    else:
        console.print("[bold green]No graph breaks or recompilations found.[/]")
    console.print(summary_line(summary))
    divergent = [f for f in findings if f.divergent]
    if summary.per_rank:
        for line in rank_lines(summary):
            console.print(f"  {line}")
        if divergent:
            console.print(
                f"[bold yellow]{len(divergent)} rank-divergent finding{'s' * (len(divergent) != 1)}:[/] "
                + "; ".join(f"{f.rule} {f.file}:{f.line} on {ranks_text(f)}" for f in divergent)
                + ". The other ranks wait for these at the next collective, and a collective that one rank skips "
                "(a branch on the rank or on its data) hangs the job."
            )
