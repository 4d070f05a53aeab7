"""`torchmend fix`: scan, propose, review each change (or --yes / --diff / --check), re-run, write safely."""

from __future__ import annotations

import os
import sys
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich.text import Text

from torchmend.cli import options as o
from torchmend.cli.app import app, err, fail, out, write_stdout
from torchmend.cli.exitcodes import ExitCode
from torchmend.cli.verify import Atol, Repeat, Rtol, Seed

if TYPE_CHECKING:  # heavy (libcst, network, ...): imported where used, so --help stays fast
    from torchmend.codemods.base import Proposal
    from torchmend.codemods.review import Decision
    from torchmend.pipeline import Fixes, Scan
    from torchmend.verify.compare import Verification


class CheckFormat(str, Enum):
    """How `fix --check` lists what it would change (docs/formats.md). No json: scan --format json has the findings."""

    table = "table"
    sarif = "sarif"
    github = "github"


def _ask(index: int, total: int) -> str:
    from torchmend.cli.fixview import help_text
    from torchmend.cli.keys import ask
    from torchmend.codemods.review import KEYS

    while True:
        answer = ask(out, f"[bold blue]({index}/{total}) Apply this change \\[y,n,a,d,q,?]?[/] ").strip().lower()
        if answer in KEYS and answer != "?":
            return answer
        out.print(help_text())


def _interactive(fixes: Fixes) -> list[Decision]:
    from torchmend.cli.fixview import change_panel
    from torchmend.codemods.engine import span
    from torchmend.pipeline import review

    session = fixes.session
    loop = review(fixes)
    try:
        ask = next(loop)
        while True:
            path = ask.proposal.path
            line = span(session.ctx.file(path), ask.proposal)[0]
            out.print(
                change_panel(ask.proposal, session.display(path), line, ask.before, ask.after, ask.index, ask.total)
            )
            ask = loop.send(_ask(ask.index, ask.total))
    except StopIteration as done:
        return done.value


@app.command(
    short_help="Fix graph breaks and recompiles in your source: review each change as a diff, re-run, write safely."
)
def fix(
    script: o.MaybeScript = None,
    args: o.ScriptArgs = None,
    steps: o.Steps = None,
    timeout: o.Timeout = None,
    backend: o.Backend = None,
    nproc_per_node: o.NprocPerNode = None,
    from_trace: Annotated[
        Optional[Path],
        typer.Option(
            "--from-trace",
            help="Propose changes from a TORCH_TRACE "
            "directory written by a run elsewhere, without running "
            "anything (the changes are not verified).",
            show_default=False,
        ),
    ] = None,
    path_map: o.PathMap = None,
    project: o.Project = None,
    select: o.Select = None,
    ignore: o.Ignore = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Apply every safe change without asking.")] = False,
    unsafe: Annotated[
        Optional[bool],
        typer.Option(
            "--unsafe/--no-unsafe",
            help="With --yes or --diff: include the unsafe changes "
            "(they can change output or numerics; each says how). Default: `unsafe-fixes` in "
            "pyproject.toml, else no.",
            show_default=False,
        ),
    ] = None,
    allow_random_stream: Annotated[
        Optional[bool],
        typer.Option(
            "--allow-random-stream/--no-allow-random-stream",
            help="With --yes or --diff: include the changes that alter the random stream but keep the "
            "distribution (a LayerDrop skip picked with torch.where); --unsafe alone never applies them, and "
            "verification compares several seeds per arm as distributions. Default: `allow-random-stream` in "
            "pyproject.toml, else no.",
            show_default=False,
        ),
    ] = None,
    diff: Annotated[
        bool,
        typer.Option(
            "--diff",
            help="Print one unified diff of the changes (safe ones; "
            "--unsafe for all) to stdout and write nothing. It applies with "
            "`git apply` or `patch -p1` from the project root.",
        ),
    ] = False,
    check: Annotated[
        bool, typer.Option("--check", help="Write nothing; list the changes and exit 6 when there are any (for CI).")
    ] = False,
    format: Annotated[
        CheckFormat,
        typer.Option(
            "--format",
            "-f",
            help="With --check: how to list the changes: table, sarif (SARIF 2.1.0: every finding, each change as its "
            "fix) or github (workflow annotations); see docs/formats.md.",
        ),
    ] = CheckFormat.table,
    quiet: Annotated[
        bool,
        typer.Option("--quiet", "-q", help="With --yes: one line per written change instead of its diff."),
    ] = False,
    no_verify: Annotated[bool, typer.Option("--no-verify", help="Write without verifying the changes first.")] = False,
    verify_backend: Annotated[
        Optional[str],
        typer.Option(
            help="Backend for the verification runs. Default: --backend (or `backend` in pyproject.toml), else "
            "the script's own (inductor unless it says otherwise), which is what timings should use; aot_eager is "
            "fast on a CPU."
        ),
    ] = None,
    repeat: Repeat = 1,
    seed: Seed = 0,
    rtol: Rtol = None,
    atol: Atol = None,
    show_output: o.ShowOutput = False,
    pr: Annotated[
        bool,
        typer.Option(
            "--pr",
            help="After writing, ship the changes as a branch, one commit and a "
            "GitHub pull request with the findings and the verification (as "
            "`torchmend pr`; checked before anything runs).",
        ),
    ] = False,
    remote: Annotated[
        Optional[str], typer.Option(help="With --pr: the git remote to push to. Default: origin.", show_default=False)
    ] = None,
    base: Annotated[
        Optional[str], typer.Option(help="With --pr: the branch the pull request goes into.", show_default=False)
    ] = None,
    repo: Annotated[
        Optional[str],
        typer.Option(
            help="With --pr: OWNER/NAME of the GitHub repository, when the remote URL does not say.",
            show_default=False,
        ),
    ] = None,
    api_url: Annotated[
        Optional[str],
        typer.Option(
            help="With --pr: the GitHub REST API (GitHub Enterprise: https://HOST/api/v3).", show_default=False
        ),
    ] = None,
    token_env: Annotated[
        str, typer.Option(help="With --pr: the environment variable holding the GitHub token.")
    ] = "GITHUB_TOKEN",
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
    from torchmend import pipeline
    from torchmend.cli.config import config_for
    from torchmend.cli.fixview import print_proposal_list, print_written, unfixed_view
    from torchmend.cli.pr import check_pull_request, open_pull_request
    from torchmend.cli.render import counts_text
    from torchmend.cli.running import (
        config_start,
        given_script,
        link_outside,
        profile,
        profile_trace,
        project_root_for,
        project_root_of,
        run_spec,
        stopped,
        warn_failed_after_compile,
    )
    from torchmend.cli.tables import laid_out
    from torchmend.codemods.review import ACCEPTED, CONFLICT
    from torchmend.interrupts import STOPPING
    from torchmend.suppress import SCAN_HINT, apply_suppressions
    from torchmend.vcs.body import fix_report, verify_command
    from torchmend.vcs.ship import PrOptions

    if sum((yes, diff, check)) > 1:
        fail(ExitCode.USAGE, "choose one of --yes, --diff and --check")
    if format is not CheckFormat.table and not check:
        fail(ExitCode.USAGE, f"--format {format.value} goes with --check (the other modes print a diff or ask)")
    interactive = not (yes or diff or check)
    if interactive and not sys.stdin.isatty():
        fail(
            ExitCode.USAGE,
            "stdin is not a terminal, so fix cannot ask about each change: use --yes (apply the "
            "safe changes), --diff (print them) or --check (exit 6 when there are any)",
        )
    if quiet and not yes:
        fail(ExitCode.USAGE, "--quiet goes with --yes (it shortens the list of what was written)")
    if pr and (diff or check):
        fail(ExitCode.USAGE, "--pr ships what fix writes: it does not go with --diff or --check")
    cfg = config_for(config_start(script, args, nproc_per_node))  # a bad one stops here, before anything runs
    steps, timeout, backend = cfg.get("steps", steps), cfg.get("timeout", timeout), cfg.get("backend", backend)
    select, ignore, project = cfg.get("select", select), cfg.get("ignore", ignore), cfg.get("project-root", project)
    # the scan's backend verifies too, unless told otherwise: a patch that verifies on aot_eager is judged on aot_eager
    verify_backend = cfg.get("verify-backend", verify_backend) or backend
    rtol, atol = cfg.get("rtol", rtol), cfg.get("atol", atol)
    unsafe, remote, base = cfg.get("unsafe-fixes", unsafe), cfg.get("remote", remote), cfg.get("base", base)
    random_stream = bool(cfg.get("allow-random-stream", allow_random_stream))
    trace = from_trace is not None and script is None
    if not trace:
        if path_map:
            fail(ExitCode.USAGE, "--path-map goes with --from-trace")
        spec = run_spec(
            script, args, nproc_per_node, from_trace, steps=steps, timeout=timeout, backend=backend, seed=seed
        )
        given = given_script(script, args, nproc_per_node)  # type: ignore[arg-type]
        script = spec.script
        _check_python(script, "the script")
    # script is None exactly when the findings come from a trace; the project is drawn from the path as given
    root = (project or (project_root_of(Path.cwd()) if script is None else project_root_for(given))).resolve()
    if script is not None:
        _refuse_link_outside(given, root)
    pr_options = PrOptions(remote=remote, base=base, repo=repo, api_url=api_url, token_env=token_env) if pr else None
    if pr_options is not None:
        check_pull_request(root, pr_options)
    check_journal(root, writes=not (diff or check))
    ui = err if diff or format is not CheckFormat.table else out  # with --diff or a --format, stdout carries it alone
    if trace:
        before = profile_trace(from_trace, root, path_map, console=ui)  # type: ignore[arg-type]
    else:
        # The scan gets caches of its own: it stands in for verify's first before-run, which must not be
        # served from a cache that earlier runs of the script warmed.
        before = profile(
            spec, root, live=ui.is_terminal, show_output=show_output, console=ui, label="scanning", own_caches=True
        )
    if before.failed:
        warn_failed_after_compile(before)
    for path in _project_files(before, root):
        real = link_outside(path, root)
        if real is None:
            _check_python(path, "a file with findings")
        else:  # the scan counts it as a library's (by its real path); say why it is left alone
            ui.print(
                f"[yellow]warning:[/] {os.path.relpath(path, root)} leads through a symbolic link to {real}, outside "
                "the project: its findings are not fixed (torchmend never edits files outside the project)"
            )

    findings, suppressed, unused = apply_suppressions(
        before.findings, root, config=cfg, select=select, ignore=ignore, hint=SCAN_HINT
    )
    # A trace that does not say its torch release is fixed for the installed one (the checkout's environment).
    fixes = pipeline.propose(
        findings, root, select, ignore, torch_version=before.summary.torch_version or pipeline.installed_torch()
    )
    proposals, unfixed = fixes.proposals, fixes.unfixed
    ui.print(
        f"{counts_text(findings)}; [bold]{len(proposals)} change{'s' * (len(proposals) != 1)} proposed[/], "
        f"{len(unfixed)} not fixable" + (f", {len(suppressed)} suppressed" if suppressed else "")
    )
    for u in unused:
        ui.print(Text(f"{u.rule} {u.file}:{u.line}: {u.reason}", style="dim"))
    if unfixed:
        with laid_out(ui) as width:
            ui.print(unfixed_view(unfixed, width))
    display = fixes.where

    if check:
        if format is CheckFormat.table:
            print_proposal_list(out, proposals, display)
        else:
            from torchmend import rules
            from torchmend.cli import formats

            listed = [f for f in before.findings if rules.select([f.rule], select, ignore)]
            print(formats.report(format, listed, root, formats.text_fixes(fixes)), end="")
        raise typer.Exit(int(ExitCode.FINDINGS) if proposals else 0)
    if not proposals:
        ui.print("[green]Nothing to change.[/]")
        return
    try:
        decisions = (
            pipeline.accept_all(fixes, unsafe, random_stream=random_stream) if not interactive else _interactive(fixes)
        )
    except EOFError:
        err.print("\n[bold]interrupted: nothing was written.[/]")
        raise typer.Exit(int(ExitCode.INTERRUPTED)) from None
    except STOPPING as e:
        err.print()
        stopped(e, "nothing was written")
    for d in decisions:
        if d.outcome == CONFLICT or (d.detail and d.outcome != ACCEPTED):
            ui.print(Text(f"skipped {display(d.proposal)} {d.proposal.rule}: {d.detail}", style="yellow"))

    if diff:
        write_stdout(pipeline.patch_bytes(fixes))
        return
    if not fixes.changes():
        ui.print("No change accepted; nothing written.")
        return
    verification = None
    tried: list[tuple[Proposal, str, str]] = []
    if trace:
        out.print(
            "[yellow]not verified: the findings came from a trace, and nothing was run. Check the changes "
            "with `torchmend verify SCRIPT --patch FILE` where the job can run.[/]"
        )
    elif no_verify:
        out.print("[yellow]--no-verify: writing without re-running the patched script.[/]")
    else:
        used = f"the {verify_backend} backend" if verify_backend else "the script's own backend"
        out.print(f"[dim]verifying: before and after on {used}[/]")
        verification, tried = _verify(before, fixes, root, verify_backend, repeat, rtol, atol)
        if not fixes.changes():
            out.print("No change helped; nothing written.")
            return
    accepted = fixes.accepted
    command = (
        ""
        if trace
        else verify_command(
            fixes.session.display(str(script)),
            spec.args,
            steps=steps,
            timeout=timeout,
            backend=verify_backend,
            seed=seed,
            repeat=repeat,
            launcher=spec.launcher,
        )
    )
    report = fix_report(accepted, verification, command, where=display, refused=tried)
    try:
        record = pipeline.write(fixes, root, report)
    except pipeline.ProjectBusy as e:
        fail(ExitCode.PROJECT_BUSY, f"nothing was written: {e}")
    except pipeline.WriteRefused as e:
        fail(ExitCode.WRITE_REFUSED, f"nothing was written: {e}")
    except STOPPING as e:  # it waited for the write to finish: the files are all written, the record complete
        stopped(e, "the write under way was finished first: every file was written; `torchmend undo` puts them back")
    if not interactive:  # an interactive run showed each diff already
        print_written(out, fixes.change_diffs(), display, quiet)
    out.print(
        f"[bold green]Wrote {len(record.files)} file{'s' * (len(record.files) != 1)}[/] "
        f"({len(accepted)} change{'s' * (len(accepted) != 1)}): "
        + ", ".join(fixes.session.display(p) for p in record.files)
    )
    out.print(f"Undo with [bold]torchmend undo[/] (patch saved at {record.patch}).")
    if pr_options is not None:
        open_pull_request(root, record, pr_options, report)


def _check_python(path: Path, what: str) -> None:
    """Refuse a file Python itself rejects (an undecodable byte even in a comment, a bad coding line, a syntax
    error) before anything runs or is written: torchmend would otherwise misread it or write it back wrong."""
    from torchmend.sources import NotSource, check_python

    try:
        check_python(str(path))
    except NotSource as e:
        fail(ExitCode.SCRIPT_FAILED, f"Python rejects {what}: {e}; fix or re-encode it first")
    except OSError as e:
        fail(ExitCode.SCRIPT_NOT_FOUND, f"cannot read {path}: {e.strerror or e}")


def _refuse_link_outside(path: Path, root: Path) -> None:
    """A file that a symbolic link puts outside the project is read, never edited: refuse before anything is
    run or written (the store checks again when writing)."""
    from torchmend.cli.running import link_outside

    real = link_outside(path, root)
    if real is not None:
        fail(
            ExitCode.WRITE_REFUSED,
            f"{path} leads through a symbolic link to {real}, outside the project ({root}); torchmend never "
            "edits files outside the project, and nothing was written. Run fix where the file is, or give "
            "--project DIR holding both",
        )


def _project_files(scan: Scan, root: Path) -> list[Path]:
    """The project files the findings point at (what a proposal may edit), in order, each once."""
    paths: dict[str, None] = {}
    for f in scan.findings:
        for loc in (f, f.user_frame, f.call_site, f.compiled_function):
            if loc is not None and loc.path.startswith(str(root) + "/") and Path(loc.path).is_file():
                paths.setdefault(loc.path)
    return [Path(p) for p in paths]


def check_journal(root: Path, writes: bool) -> None:
    """Before anything runs: a fix that was interrupted while writing is rolled back (or, for --diff and --check,
    which write nothing, named); and when this fix will write, its undo records must have a place to go."""
    from torchmend.cli.undo import roll_back_incomplete
    from torchmend.store import WriteRefused, check_state_dir, records

    if not writes:
        for r in records(root).incomplete:
            err.print(
                f"[yellow]warning:[/] the fix of {r.created} was interrupted while writing; `torchmend undo` "
                "rolls it back"
            )
        return
    try:
        check_state_dir(root)
    except WriteRefused as e:
        fail(ExitCode.WRITE_REFUSED, f"nothing was run or written: {e}")
    roll_back_incomplete(root)


def _verify(
    scan: Scan, fixes: Fixes, root: Path, backend: str | None, repeat: int, rtol: float, atol: float
) -> tuple[Verification, list[tuple[Proposal, str, str]]]:
    """Render pipeline.verify_rounds; exit with VERIFY_FAILED when it refuses. Returns the last verdict
    (the session keeps the changes left to write) and the changes refused on the way (how found, why)."""
    from torchmend import pipeline
    from torchmend.cli.fixview import findings_at, verification_view
    from torchmend.cli.running import stop_on_signals
    from torchmend.cli.verify import show_run

    done = None
    rounds = pipeline.verify_rounds(
        scan, fixes, root, backend=backend, repeat=repeat, rtol=rtol, atol=atol, on_run=show_run
    )
    with stop_on_signals("the verification runs were stopped; nothing was written"):
        for event in rounds:
            if isinstance(event, pipeline.Round):
                out.print(verification_view(event.verification))
                for e in event.effects:
                    what = findings_at(e.removed or e.remaining)
                    if e.helped:
                        out.print(Text(f"  ✓ {e.proposal.rule} change removed {what}", style="green"))
                    else:
                        out.print(Text(f"  ✗ {e.proposal.rule} change did not remove {what}: not written", style="red"))
            elif isinstance(event, pipeline.Retry):
                out.print("[dim]Verifying again without the changes that did not help.[/]")
            elif isinstance(event, pipeline.Probe):
                which = ", ".join(f"{p.rule} at {fixes.where(p)}" for p in event.changes)
                out.print(Text(f"  probe: {which} alone: {event.verification.verdict.replace('_', ' ')}", style="dim"))
            elif isinstance(event, pipeline.Dropped):
                said: tuple[str, ...] = ()
                for r in event.refused:
                    why = "the same reasons" if r.reasons == said else "; ".join(r.reasons)
                    said = r.reasons
                    out.print(
                        Text(
                            f"  ✗ {r.proposal.rule} change at {fixes.where(r.proposal)} refused ({r.found_by}): {why}",
                            style="red",
                        )
                    )
                    if r.fallback is not None:
                        out.print(Text(f"  ↻ trying its next candidate instead: {r.fallback.why}", style="yellow"))
                out.print("[dim]Verifying the other changes again without the refused ones.[/]")
            else:
                done = event
    assert done is not None
    if done.outcome == pipeline.REFUSED:
        fail(ExitCode.VERIFY_FAILED, "verification refused these changes; nothing was written")
    if done.outcome == pipeline.STILL_UNHELPFUL:
        fail(ExitCode.VERIFY_FAILED, "a change still did not help after a second round; nothing was written")
    return done.verification, [(r.proposal, r.found_by, "; ".join(r.reasons)) for r in done.tried]
