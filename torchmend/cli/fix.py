"""`torchmend fix`: scan, propose, review each change (or --yes / --diff / --check), re-run, write safely."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.text import Text

from torchmend.cli import options as o
from torchmend.cli.app import app, err, fail, out
from torchmend.cli.exitcodes import ExitCode
from torchmend.cli.fixview import before_after, change_panel, help_text, print_proposal_list, unfixed_view
from torchmend.cli.running import check_script, profile, project_root_for, warn_failed_after_compile
from torchmend.cli.writes import WriteRefused, read_source, save_undo, write_all
from torchmend.codemods.base import NoFix, Proposal
from torchmend.codemods.engine import Session, span, unified_diff
from torchmend.codemods.review import ACCEPTED, CONFLICT, KEYS, Decision, accept_all, review
from torchmend.codemods.source import Context
from torchmend.profiler.runner import RunSpec


def _ask(index: int, total: int) -> str:
    while True:
        answer = out.input(f"[bold blue]({index}/{total}) Apply this change \\[y,n,a,d,q,?]?[/] ").strip().lower()
        if answer in KEYS and answer != "?":
            return answer
        out.print(help_text())


def _interactive(session: Session, proposals: list[Proposal]) -> list[Decision]:
    loop = review(session, proposals)
    try:
        ask = next(loop)
        while True:
            path = ask.proposal.path
            line = span(session.ctx.file(path), ask.proposal)[0]
            out.print(change_panel(ask.proposal, session.display(path), line, ask.before, ask.after, ask.index,
                                   ask.total))
            ask = loop.send(_ask(ask.index, ask.total))
    except StopIteration as done:
        return done.value


def _combined_diff(session: Session) -> str:
    return "".join(unified_diff(session.display(path), before, after)
                   for path, (before, after) in session.changed().items())


@app.command(short_help='Fix graph breaks and recompiles in your source: review each change as a diff, re-run, write safely.')
def fix(
    script: o.Script,
    args: o.ScriptArgs = None,
    steps: o.Steps = None,
    timeout: o.Timeout = None,
    backend: o.Backend = None,
    project: o.Project = None,
    select: o.Select = None,
    ignore: o.Ignore = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Apply every safe change without asking.")] = False,
    unsafe: Annotated[bool, typer.Option("--unsafe", help="With --yes or --diff: include the unsafe changes "
                                         "(they can change output or numerics; each says how).")] = False,
    diff: Annotated[bool, typer.Option("--diff", help="Print one unified diff of the changes (safe ones; "
                                       "--unsafe for all) to stdout and write nothing. It applies with "
                                       "`git apply` or `patch -p1` from the project root.")] = False,
    check: Annotated[bool, typer.Option("--check", help="Write nothing; list the changes and exit 6 when there "
                                        "are any (for CI).")] = False,
    no_verify: Annotated[bool, typer.Option("--no-verify", help="Write without re-running the patched script "
                                            "first.")] = False,
    show_output: o.ShowOutput = False,
) -> None:
    """Find what stops torch.compile from paying off in SCRIPT and fix it in your source: each change is
    shown as a diff with the finding behind it and its safety, and you accept or reject it (like
    `git add -p`). The accepted changes are re-run before anything is written; files are written
    atomically and `torchmend undo` puts them back.

    Example: torchmend fix train.py --steps 30 --backend aot_eager -- --batch-size 32
    """
    if sum((yes, diff, check)) > 1:
        fail(ExitCode.USAGE, "choose one of --yes, --diff and --check")
    interactive = not (yes or diff or check)
    if interactive and not sys.stdin.isatty():
        fail(ExitCode.USAGE, "stdin is not a terminal, so fix cannot ask about each change: use --yes (apply the "
             "safe changes), --diff (print them) or --check (exit 6 when there are any)")
    check_script(script)
    script = script.resolve()
    root = (project or project_root_for(script)).resolve()
    spec = RunSpec(script=script, args=tuple(args or ()), steps=steps, timeout=timeout, backend=backend,
                   cwd=Path.cwd())
    ui = err if diff else out  # with --diff, stdout carries the patch alone
    before = profile(spec, root, live=ui.is_terminal, show_output=show_output, console=ui, label="scanning")
    if before.failed:
        warn_failed_after_compile(before)

    session = Session(Context(str(root), read_source))
    results = session.propose(before.findings, select, ignore)
    proposals = sorted((r for r in results if isinstance(r, Proposal)),
                       key=lambda p: (p.path, span(session.ctx.file(p.path), p)))
    unfixed = [r for r in results if isinstance(r, NoFix) and not r.skipped]
    fixable = sum(f.severity == "fix" for f in before.findings)
    ui.print(f"[bold]{len(before.findings)} finding{'s' * (len(before.findings) != 1)}[/] "
             f"({fixable} to fix): [bold]{len(proposals)} change{'s' * (len(proposals) != 1)} proposed[/], "
             f"{len(unfixed)} not fixable")
    if unfixed:
        ui.print(unfixed_view(unfixed))

    def display(p: Proposal) -> str:
        return f"{session.display(p.path)}:{span(session.ctx.file(p.path), p)[0]}"

    if check:
        print_proposal_list(out, proposals, display)
        raise typer.Exit(int(ExitCode.FINDINGS) if proposals else 0)
    if not proposals:
        ui.print("[green]Nothing to change.[/]")
        return
    try:
        decisions = accept_all(session, proposals, unsafe) if not interactive else _interactive(session, proposals)
    except (KeyboardInterrupt, EOFError):
        err.print("\n[bold]interrupted: nothing was written.[/]")
        raise typer.Exit(int(ExitCode.INTERRUPTED))
    for d in decisions:
        if d.outcome == CONFLICT or (d.detail and d.outcome != ACCEPTED):
            ui.print(Text(f"skipped {display(d.proposal)} {d.proposal.rule}: {d.detail}", style="yellow"))

    if diff:
        sys.stdout.write(_combined_diff(session))
        return
    changes = session.changed()
    if not changes:
        ui.print("No change accepted; nothing written.")
        return
    accepted = [d.proposal for d in decisions if d.outcome == ACCEPTED]
    if no_verify:
        out.print("[yellow]--no-verify: writing without re-running the patched script.[/]")
    else:
        _verify(spec, root, before, changes, select, ignore)
    try:
        write_all(changes, root)
    except WriteRefused as e:
        fail(ExitCode.WRITE_REFUSED, f"nothing was written: {e}")
    summary = "; ".join(f"{p.rule} {display(p)}" for p in accepted)
    record = save_undo(changes, root, _combined_diff(session), summary)
    out.print(f"[bold green]Wrote {len(changes)} file{'s' * (len(changes) != 1)}[/] "
              f"({len(accepted)} change{'s' * (len(accepted) != 1)}): "
              + ", ".join(session.display(p) for p in changes))
    out.print(f"Undo with [bold]torchmend undo[/] (patch saved at {record.patch}).")


def _verify(spec: RunSpec, root: Path, before, changes, select, ignore) -> None:  # type: ignore[no-untyped-def]
    """Re-run the patched sources (from memory: nothing is written yet) and refuse a change that made it worse.

    Counts only: comparing losses and final weights is the verify step's job (not built yet), so say so.
    """
    patched = RunSpec(**{**spec.__dict__, "overlay": tuple((p, new) for p, (_, new) in changes.items())})
    after = profile(patched, root, live=out.is_terminal, console=out, label="re-running with the changes")
    fix_before = sum(f.severity == "fix" for f in before.findings)
    fix_after = sum(f.severity == "fix" for f in after.findings)
    out.print(before_after(before.summary, after.summary, fix_before, fix_after))
    b, a = before.summary, after.summary
    if after.failed and not before.failed:
        fail(ExitCode.VERIFY_FAILED, "the patched script failed where the original did not; nothing was written. "
             "Its output ends with:", after.outcome.output_tail)
    worse = (a.graph_breaks + a.recompiles + a.recompile_limit_hits) > (b.graph_breaks + b.recompiles
                                                                          + b.recompile_limit_hits)
    if worse:
        fail(ExitCode.VERIFY_FAILED, "the patched script shows more graph breaks or recompiles than the original; "
             "nothing was written")
    out.print("[dim]Checked by re-running the patched script: counts and times only; losses and final weights "
              "are not compared yet.[/]")
