"""`torchmend fix`: scan, propose, review each change (or --yes / --diff / --check), re-run, write safely."""

from __future__ import annotations

import atexit
import shutil
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich.text import Text

from torchmend.cli import options as o
from torchmend.cli.app import app, err, fail, out
from torchmend.cli.exitcodes import ExitCode
from torchmend.cli.verify import Atol, Repeat, Rtol, Seed, run_verification
from torchmend.verify.numerics import ATOL, RTOL

if TYPE_CHECKING:  # heavy (libcst, network, ...): imported where used, so --help stays fast
    from torchmend.cli.running import Profile
    from torchmend.codemods.base import Proposal
    from torchmend.codemods.engine import Session
    from torchmend.codemods.review import Decision
    from torchmend.profiler.runner import RunSpec
    from torchmend.verify.compare import Verification


def _ask(index: int, total: int) -> str:
    from torchmend.cli.fixview import help_text
    from torchmend.codemods.review import KEYS

    while True:
        answer = out.input(f"[bold blue]({index}/{total}) Apply this change \\[y,n,a,d,q,?]?[/] ").strip().lower()
        if answer in KEYS and answer != "?":
            return answer
        out.print(help_text())


def _interactive(session: Session, proposals: list[Proposal]) -> list[Decision]:
    from torchmend.cli.fixview import change_panel
    from torchmend.codemods.engine import span
    from torchmend.codemods.review import review

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
    from torchmend.codemods.engine import unified_diff

    return "".join(unified_diff(session.display(path), before, after)
                   for path, (before, after) in session.changed().items())


@app.command(short_help='Fix graph breaks and recompiles in your source: review each change as a diff, re-run, write safely.')
def fix(
    script: o.MaybeScript = None,
    args: o.ScriptArgs = None,
    steps: o.Steps = None,
    timeout: o.Timeout = None,
    backend: o.Backend = None,
    nproc_per_node: o.NprocPerNode = None,
    from_trace: Annotated[Optional[Path], typer.Option("--from-trace", help="Propose changes from a TORCH_TRACE "
                                                       "directory written by a run elsewhere, without running "
                                                       "anything (the changes are not verified).",
                                                       show_default=False)] = None,
    path_map: o.PathMap = None,
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
    no_verify: Annotated[bool, typer.Option("--no-verify", help="Write without verifying the changes first.")]
    = False,
    verify_backend: Annotated[Optional[str], typer.Option(help="Backend for the verification runs. Default: the "
                                                          "script's own (inductor unless it says otherwise), "
                                                          "which is what timings should use; aot_eager is fast "
                                                          "on a CPU.")] = None,
    repeat: Repeat = 1,
    seed: Seed = 0,
    rtol: Rtol = RTOL,
    atol: Atol = ATOL,
    show_output: o.ShowOutput = False,
    pr: Annotated[bool, typer.Option("--pr", help="After writing, ship the changes as a branch, one commit and a "
                                     "GitHub pull request with the findings and the verification (as "
                                     "`torchmend pr`; checked before anything runs).")] = False,
    remote: Annotated[str, typer.Option(help="With --pr: the git remote to push to.")] = "origin",
    base: Annotated[Optional[str], typer.Option(help="With --pr: the branch the pull request goes into.",
                                                show_default=False)] = None,
    api_url: Annotated[Optional[str], typer.Option(help="With --pr: the GitHub REST API (GitHub Enterprise: "
                                                   "https://HOST/api/v3).", show_default=False)] = None,
    token_env: Annotated[str, typer.Option(help="With --pr: the environment variable holding the GitHub "
                                           "token.")] = "GITHUB_TOKEN",
) -> None:
    """Find what stops torch.compile from paying off in SCRIPT and fix it in your source: each change is
    shown as a diff with the finding behind it and its safety, and you accept or reject it (like
    `git add -p`). The accepted changes are re-run before anything is written; files are written
    atomically and `torchmend undo` puts them back.

    Examples:

      torchmend fix train.py --steps 30 --backend aot_eager -- --batch-size 32

      torchmend fix --nproc-per-node 2 train.py --yes

      torchmend fix --from-trace /logs/job-1234 --diff > fix.patch
    """
    from torchmend.cli.fixview import print_proposal_list, unfixed_view
    from torchmend.cli.pr import check_pull_request, open_pull_request
    from torchmend.cli.running import (
        profile,
        profile_trace,
        project_root_for,
        project_root_of,
        run_spec,
        warn_failed_after_compile,
    )
    from torchmend.store import WriteRefused, read_source, save_undo, write_all
    from torchmend.codemods.base import NoFix, Proposal
    from torchmend.codemods.engine import Session, span
    from torchmend.codemods.review import ACCEPTED, CONFLICT, accept_all
    from torchmend.codemods.source import Context
    from torchmend.vcs.body import fix_report, verify_command
    from torchmend.vcs.ship import PrOptions

    if sum((yes, diff, check)) > 1:
        fail(ExitCode.USAGE, "choose one of --yes, --diff and --check")
    interactive = not (yes or diff or check)
    if interactive and not sys.stdin.isatty():
        fail(ExitCode.USAGE, "stdin is not a terminal, so fix cannot ask about each change: use --yes (apply the "
             "safe changes), --diff (print them) or --check (exit 6 when there are any)")
    if pr and (diff or check):
        fail(ExitCode.USAGE, "--pr ships what fix writes: it does not go with --diff or --check")
    trace = from_trace is not None and script is None
    if not trace:
        if path_map:
            fail(ExitCode.USAGE, "--path-map goes with --from-trace")
        spec = run_spec(script, args, nproc_per_node, from_trace, steps=steps, timeout=timeout, backend=backend,
                        seed=seed)
        script = spec.script
    root = (project or (project_root_of(Path.cwd()) if trace else project_root_for(script))).resolve()
    pr_options = PrOptions(remote=remote, base=base, api_url=api_url, token_env=token_env) if pr else None
    if pr_options is not None:
        check_pull_request(root, pr_options)
    ui = err if diff else out  # with --diff, stdout carries the patch alone
    if trace:
        before = profile_trace(from_trace, root, path_map, console=ui)  # type: ignore[arg-type]
    else:
        # The scan gets caches of its own: it may stand in for verify's first before-run, which must not be
        # served from a cache that earlier runs of the script warmed.
        caches = Path(tempfile.mkdtemp(prefix="torchmend-scan-cache-"))
        atexit.register(shutil.rmtree, caches, True)
        spec = replace(spec, env=(("TORCHINDUCTOR_CACHE_DIR", str(caches / "inductor")),
                                  ("TRITON_CACHE_DIR", str(caches / "triton"))))
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
    verification = None
    if trace:
        out.print("[yellow]not verified: the findings came from a trace, and nothing was run. Check the changes "
                  "with `torchmend verify SCRIPT --patch FILE` where the job can run.[/]")
    elif no_verify:
        out.print("[yellow]--no-verify: writing without re-running the patched script.[/]")
    else:
        accepted, verification = _verify(spec, root, before, session, accepted, verify_backend, repeat, rtol,
                                         atol)
        changes = session.changed()
        if not changes:
            out.print("No change helped; nothing written.")
            return
    try:
        write_all(changes, root)
    except WriteRefused as e:
        fail(ExitCode.WRITE_REFUSED, f"nothing was written: {e}")
    summary = "; ".join(f"{p.rule} {display(p)}" for p in accepted)
    command = "" if trace else verify_command(session.display(str(script)), spec.args, steps=steps,
                                              timeout=timeout, backend=verify_backend, seed=seed, repeat=repeat,
                                              launcher=spec.launcher)
    report = fix_report(accepted, verification, command, where=display)
    record = save_undo(changes, root, _combined_diff(session), summary, report=report)
    out.print(f"[bold green]Wrote {len(changes)} file{'s' * (len(changes) != 1)}[/] "
              f"({len(accepted)} change{'s' * (len(accepted) != 1)}): "
              + ", ".join(session.display(p) for p in changes))
    out.print(f"Undo with [bold]torchmend undo[/] (patch saved at {record.patch}).")
    if pr_options is not None:
        open_pull_request(root, record, pr_options, report)


def _verify(spec: RunSpec, root: Path, scan: Profile, session: Session, accepted: list[Proposal],
            backend: str | None, repeat: int, rtol: float, atol: float) -> tuple[list[Proposal], Verification]:
    """Run the original and the patched sources (served from memory: nothing is written yet) and judge.

    A change whose targeted findings are all still there after the patch did not help: it is dropped and
    the rest verified again (once). Exits with VERIFY_FAILED when the verdict is a refusal. Returns the
    changes left to write.
    """
    from torchmend.cli.fixview import location, verification_view
    from torchmend.verify.attribution import attribute
    from torchmend.verify.compare import REFUSED
    from torchmend.verify.runs import from_outcome

    before = replace(spec, backend=backend, overlay=())
    reuse = (from_outcome("before", 0, scan.outcome, root),) if backend == spec.backend else ()
    for round_ in (1, 2):
        changes = session.changed()
        after = replace(before, overlay=tuple((p, new) for p, (_, new) in changes.items()))
        v, b_runs, a_runs = run_verification(before, after, root, repeat, rtol, atol, reuse)
        reuse = tuple(b_runs)
        out.print(verification_view(v))
        if v.verdict == REFUSED:
            fail(ExitCode.VERIFY_FAILED, "verification refused these changes; nothing was written")
        effects = attribute(accepted, a_runs[0].findings, changes)
        for e in effects:
            what = ", ".join(f"{f.rule} at {location(f)}" for f in (e.removed or e.remaining))
            if e.helped:
                out.print(Text(f"  ✓ {e.proposal.rule} change removed {what}", style="green"))
            else:
                out.print(Text(f"  ✗ {e.proposal.rule} change did not remove {what}: not written", style="red"))
        useless = [e.proposal for e in effects if not e.helped]
        if not useless:
            return accepted, v
        for p in useless:
            session.accepted.remove(p)
            accepted.remove(p)
        if not accepted or round_ == 2:
            break
        out.print("[dim]Verifying again without the changes that did not help.[/]")
    if not accepted:
        return [], v
    fail(ExitCode.VERIFY_FAILED, "a change still did not help after a second round; nothing was written")

