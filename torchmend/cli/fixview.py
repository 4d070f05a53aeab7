"""Rich rendering for `fix`: one proposed change with its diff, what could not be fixed, before vs after."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from rich.console import Console, Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from torchmend.cli.tables import NO_TERMINAL_WIDTH, fitted
from torchmend.model import Finding, Where

if TYPE_CHECKING:  # heavy (libcst, network, ...): imported where used, so --help stays fast
    from torchmend.codemods.base import NoFix, Proposal
    from torchmend.verify.compare import Verification

_SAFETY = {"safe": "bold green", "unsafe": "bold red", "random-stream": "bold yellow"}


def location(f: Finding) -> str:
    """`file:line` of a finding; for one inside a library, the user's line that reached it."""
    if f.where != Where.PROJECT and f.user_frame:
        return f"{f.user_frame.file}:{f.user_frame.line}"
    return f"{f.file}:{f.line}"


def findings_at(findings: Iterable[Finding]) -> str:
    """`TM203 at train.py:85, TM250 at train.py:85`: each rule and place once (a finding merged over ranks or
    functions can stand twice at one line)."""
    return ", ".join(dict.fromkeys(f"{f.rule} at {location(f)}" for f in findings))


def where(p: Proposal | NoFix) -> str:
    return location(p.finding)


def change_panel(p: Proposal, display: str, line: int, before: str, after: str, index: int, total: int) -> Panel:
    from rich.syntax import Syntax

    from torchmend.codemods.engine import unified_diff

    head = Text.assemble(
        (f"[{index}/{total}] ", "dim"),
        (f"{display}:{line}", "bold"),
        "  ",
        (p.rule, "bold magenta"),
        "  ",
        (p.safety, _SAFETY[p.safety]),
    )
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
    return Panel(
        Group(body, Syntax(diff, "diff", theme="ansi_dark", background_color="default", word_wrap=True)),
        title=head,
        title_align="left",
    )


def where_finding(f: Finding) -> str:
    if f.where != Where.PROJECT and f.user_frame:
        return f"in {f.file.split('/site-packages/')[-1]}, reached from {f.user_frame.file}:{f.user_frame.line}"
    return f"{f.file}:{f.line}"


def help_text() -> Text:
    from torchmend.codemods.review import KEYS

    t = Text()
    for key, meaning in KEYS.items():
        t.append(f"{key} - {meaning}\n", style="bold" if key == "?" else "")
    return t


def proposed_text(findings: list[Finding], proposals: list[Proposal], unfixed: list[NoFix], suppressed: int) -> str:
    """fix's first line: the findings' counts (render.counts_text), then what becomes of those same findings, in
    parts that add up to their number: `4 changes proposed for 5 of them` (one change can fix two, as a counter's
    recompiles and the recompile limit they reach), `0 not fixable`, and `2 with nothing to do` (informational, or
    not selected) when there are any; with no findings, the counts alone. Suppressed findings are not among them:
    `1 more suppressed`."""
    from torchmend.cli.render import counts_text

    if not findings:
        return counts_text(findings) + (f"; {suppressed} suppressed" if suppressed else "")

    covered = [f for f in findings if any(f in p.findings for p in proposals)]
    refused = [f for f in findings if f not in covered and any(f == u.finding for u in unfixed)]
    rest = len(findings) - len(covered) - len(refused)
    n = len(proposals)
    text = (
        f"{counts_text(findings)}; [bold]{n} change{'s' * (n != 1)} proposed[/] for {len(covered)} of them, "
        f"{len(refused)} not fixable"
    )
    return (
        text
        + (f", {rest} with nothing to do" if rest else "")
        + (f", {suppressed} more suppressed" if suppressed else "")
    )


def unfixed_view(items: list[NoFix], width: int = NO_TERMINAL_WIDTH) -> RenderableType:
    rows: list[list[str | Text]] = []
    for n in items:
        why = Text(n.reason)
        if n.advice:
            why.append(f"\n→ {n.advice}", style="green")
        rows.append([where(n), n.finding.rule, why])
    return fitted(["where", "rule", "why not"], rows, text_column=2, width=width, title=Text("not fixed", style="bold"))


def verification_view(v: Verification) -> Group:
    from torchmend.verify.compare import Verdict
    from torchmend.verify.report import rows

    runs = f"{v.repeat} run{'s' * (v.repeat != 1)} per arm, interleaved" + (
        ", medians (min–max)" if v.repeat > 1 else ""
    )
    table = Table(
        "",
        "before",
        "after",
        "after/before",
        title=Text(f"before → after ({runs})", style="bold"),
        title_justify="left",
    )
    for label, b, a, ratio in rows(v):
        table.add_row(label, b, a, ratio)
    parts: list = [table]
    if v.numerics is not None:
        style = ("green" if v.numerics.compared else "yellow") if v.numerics.equal else "bold red"
        parts.append(
            Text(f"numerics (rtol {v.numerics.rtol:g}, atol {v.numerics.atol:g}): {v.numerics_text()}", style=style)
        )
    elif v.distribution is not None:
        style = "green" if v.distribution.equivalent else "bold red"
        parts.append(Text(f"numerics, in distribution: {v.distribution.describe()}", style=style))
    parts.append(Text(v.speed_text(), style="dim" if v.speed is None else "cyan"))
    if v.ranks:  # a multi-rank run: each rank judged alone
        from torchmend.verify.ranks import rank_lines

        parts += [Text(f"  {line}", style="dim") for line in rank_lines(v)]
    verdict_style = {
        Verdict.IMPROVED: "bold green",
        Verdict.NEUTRAL: "bold green",
        Verdict.NO_CHANGE: "bold yellow",
        Verdict.REFUSED: "bold red",
    }[v.verdict]
    parts.append(Text(f"verdict: {v.word}", style=verdict_style))
    parts += [Text(f"  {r}", style="red" if v.verdict == Verdict.REFUSED else "yellow") for r in v.reasons]
    parts += [Text(f"  note: {n}", style="dim") for n in v.notes]
    return Group(*parts)


def print_written(
    console: Console, changes: list[tuple[Proposal, str]], display: Callable[[Proposal], str], quiet: bool
) -> None:
    """What `fix --yes` wrote, change by change: where, the rule, its safety (UNSAFE stands out), why, and its diff
    (a single line each with `quiet`). An interactive run showed each diff already and does not come here."""
    for p, diff in changes:
        safety = ("UNSAFE", "bold red") if p.safety == "unsafe" else (p.safety, _SAFETY[p.safety])
        if p.safety == "random-stream":
            safety = ("RANDOM STREAM CHANGED", "bold yellow")
        console.print(Text.assemble((display(p), "bold"), "  ", (p.rule, "magenta"), "  ", safety, f"  {p.why}"))
        if p.safety != "safe" and p.note and not quiet:
            console.print(Text(f"  note: {p.note}", style="yellow"))
        if not quiet:  # unwrapped, whatever the width: a diff's lines are copied and applied, not read as prose
            console.print(diff_text(diff), soft_wrap=True)


def diff_text(diff: str) -> Text:
    """A unified diff with git's colours (a plain console drops them)."""
    text = Text()
    for line in diff.rstrip("\n").splitlines(keepends=True):
        style = "bold" if line.startswith(("---", "+++")) else {"+": "green", "-": "red", "@": "cyan"}.get(line[:1], "")
        text.append(line, style=style)
    return text


def print_proposal_list(console: Console, items: list[Proposal], display: Callable[[Proposal], str]) -> None:
    for p in items:
        console.print(
            Text.assemble(
                (f"{display(p)}", "bold"), "  ", (p.rule, "magenta"), "  ", (p.safety, _SAFETY[p.safety]), f"  {p.why}"
            )
        )
