"""`torchmend fix`: scan, propose, review each change (or --yes / --diff / --check), re-run, write safely."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import typer
from rich.console import Console
from rich.text import Text

from torchmend.cli import options as o
from torchmend.cli.app import app, err, fail, out, write_stdout
from torchmend.cli.exitcodes import ExitCode

if TYPE_CHECKING:  # heavy (libcst, network, ...): imported where used, so --help stays fast
    from torchmend.codemods.base import Proposal
    from torchmend.codemods.review import Decision
    from torchmend.pipeline import Fixes, Scan
    from torchmend.pipeline.events import Verified as pipeline_Verified
    from torchmend.project import Project
    from torchmend.settings import Settings
    from torchmend.vcs.ship import PrOptions
    from torchmend.verify.compare import Verification

CheckFormat = o.CheckFormat  # where it was defined before options.py held the shared options


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
    from torchmend.pipeline import review

    loop = review(fixes)
    try:
        ask = next(loop)
        while True:
            p = ask.proposal
            out.print(
                change_panel(p, fixes.display(p.path), fixes.line_of(p), ask.before, ask.after, ask.index, ask.total)
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
    backend: o.FixBackend = None,
    nproc_per_node: o.NprocPerNode = None,
    from_trace: o.FixFromTrace = None,
    path_map: o.PathMap = None,
    project: o.Project = None,
    select: o.Select = None,
    ignore: o.Ignore = None,
    yes: o.Yes = False,
    unsafe_fixes: o.Unsafe = None,
    unsafe: o.UnsafeAlias = None,
    allow_random_stream: o.RandomStream = None,
    diff: o.Diff = False,
    check: o.Check = False,
    format: o.CheckFormatOption = o.CheckFormat.table,
    quiet: o.Quiet = False,
    no_verify: o.NoVerify = False,
    verify_backend: o.VerifyBackend = None,
    verdict_json: o.VerdictJson = None,
    repeat: o.JudgeRepeat = None,
    seed: o.Seed = 0,
    rtol: o.Rtol = None,
    atol: o.Atol = None,
    show_output: o.ShowOutput = False,
    pr: o.Pr = False,
    remote: o.Remote = None,
    base: o.Base = None,
    repo: o.Repo = None,
    api_url: o.ApiUrl = None,
    token_env: o.TokenEnv = "GITHUB_TOKEN",
) -> None:
    """Find what stops torch.compile from paying off in SCRIPT and fix it in your source: each change is
    shown as a diff with the finding behind it and its safety, and you accept or reject it (like
    `git add -p`). The accepted changes are re-run before anything is written; files are written
    atomically and `torchmend undo` puts them back. The script's stdin is /dev/null in every run (they must
    all see the same input).

    Examples:

      torchmend fix train.py --steps 30 --backend aot_eager -- --batch-size 32

      torchmend fix --nproc-per-node 2 train.py --yes

      torchmend fix --from-trace /logs/job-1234 --diff > fix.patch
    """
    from torchmend.cli.context import script_project
    from torchmend.cli.running import scan_of, spec_of
    from torchmend.config import Overrides

    interactive = _mode(yes, diff, check, format, quiet, pr)
    if verdict_json is not None:
        _check_writable(verdict_json)
    project_, given = script_project(script, args, nproc_per_node, project)  # a bad configuration stops here
    unsafe_fixes = unsafe_fixes if unsafe is None else unsafe  # --unsafe: the older spelling
    settings = project_.config.resolve(Overrides(
        select=select, ignore=ignore, steps=steps, timeout=timeout, backend=backend, rtol=rtol, atol=atol,
        verify_backend=verify_backend, unsafe_fixes=unsafe_fixes, allow_random_stream=allow_random_stream,
        remote=remote, base=base,
    ))  # fmt: skip
    spec = spec_of(settings, script, args, nproc_per_node, from_trace, path_map, seed=seed)
    ship = _before_run(project_, given if spec else None, settings, pr, repo, api_url, token_env, diff or check)
    if spec is not None and not (check or diff or no_verify):  # the script will run again: fork its runs
        from torchmend.profiler.forkserver import warm

        warm(spec.python)
    ui = err if diff or format is not o.CheckFormat.table else out  # with --diff or a --format, stdout carries it alone
    # The scan gets caches of its own: it stands in for verify's first before-run, which must not be served from a
    # cache that earlier runs of the script warmed.
    before = scan_of(
        spec, project_, settings, from_trace, path_map, console=ui, live=ui.is_terminal, show_output=show_output,
        label="scanning", own_caches=True,
    )  # fmt: skip
    fixes = _proposed(before, project_, ui)
    if check:
        _list_changes(format, before, fixes, project_.root)
    if not _decide(fixes, interactive, settings, ui, diff):
        return
    repeat = repeat or (1 if settings.verify_backend else 3)  # timed runs on the script's own backend; 1 on a named one
    verified = _verified(
        before, fixes, project_, settings, repeat, no_verify, follow_up=not interactive, verdict_json=verdict_json
    )
    if verified is not None:
        _write(before, fixes, project_, settings, verified, ship, (repeat, seed), quiet=quiet, asked=interactive)


def _mode(yes: bool, diff: bool, check: bool, format: o.CheckFormat, quiet: bool, pr: bool) -> bool:
    """The options that go together, checked before anything else; whether fix asks about each change."""
    if sum((yes, diff, check)) > 1:
        fail(ExitCode.USAGE, "choose one of --yes, --diff and --check")
    if format is not o.CheckFormat.table and not check:
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
    return interactive


def _before_run(
    project: Project,
    given: Path | None,
    settings: Settings,
    pr: bool,
    repo: str | None,
    api_url: str | None,
    token_env: str,
    writes_nothing: bool,
) -> PrOptions | None:
    """Before anything runs: the script is one fix may edit, the pull request could be shipped (--pr), and the
    journal is in order. Returns the pull request's options (None without --pr)."""
    from torchmend.cli.context import check_journal, project_errors
    from torchmend.cli.pr import check_pull_request
    from torchmend.vcs.ship import PrOptions

    if given is not None:
        with project_errors():
            project.check_editable(given, "the script")
    options = None
    if pr:
        options = PrOptions(remote=settings.remote, base=settings.base, repo=repo, api_url=api_url, token_env=token_env)
        check_pull_request(project.folder, options)
    check_journal(project, writes=not writes_nothing)
    return options


def _proposed(before: Scan, project: Project, ui: Console) -> Fixes:
    """The proposals for the scan's findings, with what stands in their way said: a failed run, files a link puts
    outside the project, the counts, the unused suppressions and the findings no codemod fixes."""
    from torchmend import pipeline
    from torchmend.cli.context import project_errors
    from torchmend.cli.fixview import proposed_text, unfixed_view
    from torchmend.cli.running import warn_failed_after_compile
    from torchmend.cli.tables import laid_out

    if before.failed:
        warn_failed_after_compile(before)
    places = (loc for f in before.findings for loc in (f, f.user_frame, f.call_site, f.compiled_function) if loc)
    with project_errors():
        outside = project.files_outside(loc.path for loc in places)
    for path, real in outside:  # the scan counts it as a library's (by its real path); say why it is left alone
        ui.print(
            f"[yellow]warning:[/] {project.display(path)} leads through a symbolic link to {real}, outside "
            "the project: its findings are not fixed (torchmend never edits files outside the project)"
        )
    # A trace that does not say its torch release is fixed for the installed one (the checkout's environment).
    version = before.summary.torch_version or pipeline.installed_torch()
    fixes = pipeline.propose(before.findings, project, torch_version=version, placements=before.placements)
    ui.print(proposed_text(before.findings, fixes.proposals, fixes.unfixed, len(before.suppressed)))
    for u in before.unused:
        ui.print(Text(f"{u.rule} {u.file}:{u.line}: {u.reason}", style="dim"))
    if fixes.unfixed:
        with laid_out(ui) as width:
            ui.print(unfixed_view(fixes.unfixed, width))
    return fixes


def _list_changes(format: o.CheckFormat, before: Scan, fixes: Fixes, root: Path) -> NoReturn:
    """--check: list the changes fix would make, and exit 6 when there are any."""
    from torchmend.cli.fixview import print_proposal_list

    if format is o.CheckFormat.table:
        print_proposal_list(out, fixes.proposals, fixes.where)
    else:
        from torchmend.cli import formats

        print(formats.report(format, before.findings, root, formats.text_fixes(fixes)), end="")
    raise typer.Exit(int(ExitCode.FINDINGS) if fixes.proposals else 0)


def _decide(fixes: Fixes, interactive: bool, settings: Settings, ui: Console, diff: bool) -> bool:
    """Accept the changes: each asked about on a terminal, else every safe one (and what the settings opt into);
    with --diff print them. Whether there is anything to verify and write."""
    from torchmend import pipeline
    from torchmend.cli.running import stopped
    from torchmend.codemods.review import ACCEPTED, CONFLICT
    from torchmend.interrupts import STOPPING

    if not fixes.proposals:
        ui.print("[green]Nothing to change.[/]")
        return False
    try:
        if interactive:
            decisions = _interactive(fixes)
        else:
            decisions = pipeline.accept_all(fixes, settings.unsafe, random_stream=settings.random_stream)
    except EOFError:
        err.print("\n[bold]interrupted: nothing was written.[/]")
        raise typer.Exit(int(ExitCode.INTERRUPTED)) from None
    except STOPPING as e:
        err.print()
        stopped(e, "nothing was written")
    for d in decisions:
        if d.outcome == CONFLICT or (d.detail and d.outcome != ACCEPTED):
            ui.print(Text(f"skipped {fixes.where(d.proposal)} {d.proposal.rule}: {d.detail}", style="yellow"))
    if diff:
        write_stdout(pipeline.patch_bytes(fixes))
        return False
    if not fixes.changes():
        ui.print("No change accepted; nothing written.")
        return False
    return True


def _verified(
    before: Scan,
    fixes: Fixes,
    project: Project,
    settings: Settings,
    repeat: int,
    no_verify: bool,
    follow_up: bool,
    verdict_json: Path | None = None,
) -> tuple[Verification | None, list[tuple[Proposal, str, str]]] | None:
    """Verify the accepted changes (unless the findings came from a trace, or --no-verify): the last verdict and the
    changes refused on the way; None when no change helped (nothing is written). `follow_up`: nobody was asked
    about each change (--yes), so a verified round may add a safe last resort its patched run asks for."""
    if before.spec is None or no_verify:  # a change only a run can judge is not written unjudged
        for p in fixes.withdraw_unjudged():
            out.print(f"[yellow]not written: {p.rule} at {fixes.where(p)}, {p.why}: only a run can judge it[/]")
        if not fixes.changes():
            out.print("Nothing left to write.")
            return None
    if before.spec is None:
        out.print(
            "[yellow]not verified: the findings came from a trace, and nothing was run. Check the changes "
            "with `torchmend verify SCRIPT --patch FILE` where the job can run.[/]"
        )
        return None, []
    if no_verify:
        out.print("[yellow]--no-verify: writing without re-running the patched script.[/]")
        return None, []
    # The script's own backend judges, unless told otherwise; the scan's backend, when it is another, screens first.
    judge = settings.verify_backend
    screen = settings.backend if settings.backend != judge else None
    verified = _verify(before, fixes, project, settings, (screen, judge), repeat, follow_up, verdict_json)
    if verified is None or not fixes.changes():  # the outcome line said why
        return None
    return verified


def _write(
    before: Scan,
    fixes: Fixes,
    project: Project,
    settings: Settings,
    verified: tuple[Verification | None, list[tuple[Proposal, str, str]]],
    ship: PrOptions | None,
    runs: tuple[int, int],
    *,
    quiet: bool,
    asked: bool,
) -> None:
    """Write the accepted changes with their report (all or nothing, journaled), say what was written, and ship it
    with --pr."""
    from torchmend import pipeline
    from torchmend.cli.fixview import print_written
    from torchmend.cli.pr import open_pull_request
    from torchmend.cli.running import stopped
    from torchmend.interrupts import STOPPING
    from torchmend.vcs.body import fix_report, verify_command

    verification, tried = verified
    spec, (repeat, seed) = before.spec, runs
    command = ""
    if spec is not None:
        command = verify_command(
            fixes.display(str(spec.script)),
            spec.args,
            budget=settings.budget,
            backend=settings.verify_backend,
            seed=seed,
            repeat=repeat,
            launcher=spec.launcher,
        )
    accepted = fixes.accepted
    report = fix_report(accepted, verification, command, where=fixes.where, refused=tried)
    try:
        record = pipeline.write(fixes, project, report)
    except pipeline.ProjectBusy as e:
        fail(ExitCode.PROJECT_BUSY, f"nothing was written: {e}")
    except pipeline.WriteRefused as e:
        fail(ExitCode.WRITE_REFUSED, f"nothing was written: {e}")
    except STOPPING as e:  # it waited for the write to finish: the files are all written, the record complete
        stopped(e, "the write under way was finished first: every file was written; `torchmend undo` puts them back")
    if not asked:  # an interactive run showed each diff already
        print_written(out, fixes.change_diffs(), fixes.where, quiet)
    n = len(record.files)
    out.print(
        f"[bold green]Wrote {n} file{'s' * (n != 1)}[/] ({len(accepted)} change{'s' * (len(accepted) != 1)}): "
        + ", ".join(fixes.display(p) for p in record.files)
    )
    out.print(f"Undo with [bold]torchmend undo[/] (patch saved at {record.patch}).")
    if ship is not None:
        open_pull_request(project.folder, record, ship, report)


def _verify(
    scan: Scan,
    fixes: Fixes,
    project: Project,
    settings: Settings,
    backends: tuple[str | None, str | None],
    repeat: int,
    follow_up: bool = False,
    verdict_json: Path | None = None,
) -> tuple[Verification, list[tuple[Proposal, str, str]]] | None:
    """Render pipeline.verify_rounds (screening on `backends[0]` when given, judging on `backends[1]`, None: the
    script's own); exit with VERIFY_FAILED when it refuses. Returns the last verdict (the session keeps the changes
    left to write) and the changes refused on the way (how found, why); None when no change helped, whichever
    round found it (none helped, or one still did not after the second round): nothing is written, and fix ends
    with OK as the outcome line says (one outcome, one exit code: issue 41)."""
    from torchmend import pipeline
    from torchmend.cli.fixview import verification_view
    from torchmend.cli.roundsview import event_view, outcome_view
    from torchmend.cli.running import stop_on_signals
    from torchmend.cli.verify import show_run

    screen, judge = backends
    done = None
    rounds = pipeline.verify_rounds(
        scan, fixes, project, settings, backend=judge, screen=screen, repeat=repeat, on_run=show_run,
        follow_up=follow_up,
    )  # fmt: skip
    with stop_on_signals("the verification runs were stopped; nothing was written"):
        for event in rounds:
            if isinstance(event, pipeline.Verified):
                done = event
            else:
                out.print(event_view(event, fixes.where))
    assert done is not None
    if verdict_json is not None:
        _write_verdict(verdict_json, done, fixes)
    if done.kept_earlier:  # the round before a dropped follow-up is what is written: its verdict again, last
        out.print(verification_view(done.verification))
    if done.outcome == pipeline.REFUSED:
        fail(ExitCode.VERIFY_FAILED, "verification refused these changes; nothing was written")
    out.print(outcome_view(done))
    if not done.ok:
        return None
    return done.verification, [(r.proposal, r.found_by, "; ".join(map(str, r.reasons))) for r in done.tried]


def _check_writable(path: Path) -> None:
    """--verdict-json's file can be written (before anything runs: no result is lost for want of a folder)."""
    import os

    folder = path.absolute().parent
    if path.is_dir() or not folder.is_dir() or not os.access(folder, os.W_OK | os.X_OK):
        fail(ExitCode.USAGE, f"--verdict-json: cannot write {path} (a folder that exists and is writable is needed)")


def _write_verdict(path: Path, done: pipeline_Verified, fixes: Fixes) -> None:
    """The outcome of the verification stages as JSON, written atomically (a temporary file renamed over)."""
    import json
    import os
    import tempfile

    def change(p: Proposal) -> dict[str, object]:
        return {"rule": p.rule, "where": fixes.where(p), "why": p.why, "safety": p.safety, "global": p.global_setting}

    doc = {
        "outcome": done.outcome,
        "written": [change(p) for p in done.accepted] if done.ok else [],
        "refused": [
            change(r.proposal)
            | {"found_by": r.found_by, "reasons": [x.text for x in r.reasons], "kinds": [x.kind for x in r.reasons]}
            for r in done.tried
        ],
        "verification": done.verification.to_json(),
    }
    folder = path.absolute().parent
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=folder)
    with os.fdopen(fd, "w") as f:
        json.dump(doc, f, indent=1)
    os.replace(tmp, path)
