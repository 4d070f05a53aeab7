"""`torchmend pr`: ship the changes of the last `fix` as a branch, a commit and a GitHub pull request whose
description carries the evidence (findings, diffs, verification). The work is done by torchmend.vcs; this
module prints and maps failures to exit codes. `fix --pr` calls check_pull_request() before it scans and
open_pull_request() after it writes."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich.markup import escape
from rich.text import Text

from torchmend.cli.app import app, err, fail, out
from torchmend.cli.exitcodes import ExitCode

if TYPE_CHECKING:  # heavy (libcst, network, ...): imported where used, so --help stays fast
    from torchmend.store import UndoRecord
    from torchmend.values import Root
    from torchmend.vcs.ship import PrOptions, PrResult


def exit_for(kind: str) -> ExitCode:
    """The exit code for a shipping failure's kind (vcs is imported here, not at start-up)."""
    from torchmend.vcs import forge, ship

    return {
        ship.NOTHING: ExitCode.NOTHING_TO_SHIP,
        ship.NOT_A_REPO: ExitCode.NOT_A_REPO,
        ship.DIRTY: ExitCode.DIRTY_TREE,
        ship.NO_REMOTE: ExitCode.NO_REMOTE,
        ship.PUSH: ExitCode.PUSH_REJECTED,
        ship.USAGE: ExitCode.USAGE,
        forge.AUTH: ExitCode.FORGE_AUTH,
        forge.NOT_FOUND: ExitCode.FORGE_NOT_FOUND,
        forge.INVALID: ExitCode.FORGE_INVALID,
        forge.UNREACHABLE: ExitCode.FORGE_UNREACHABLE,
    }[kind]


def _print_dry_run(result: PrResult) -> None:
    p = result.plan
    state = (
        f"exists with this change ({p.existing_commit[:12]}), reused"
        if p.existing_commit
        else f"new, one commit on {p.current or 'HEAD'} at {p.head[:12]}"
    )
    lines = [
        "Dry run: nothing is committed, pushed or sent.",
        f"branch:        {p.branch} ({state})",
        f"push to:       {p.remote} ({p.remote_url})",
        f"pull request:  {p.repo.full_name} {p.branch} -> {p.base} via {p.api_url}",
        f"title:         {p.title}",
        f"files:         {', '.join(p.files)}",
        *(f"note: {w}" for w in p.warnings),
        "",
        "--- commit message ---",
        p.message.rstrip("\n"),
        "--- pull request body (Markdown) ---",
        p.body.rstrip("\n"),
        "--- end ---",
    ]
    sys.stdout.write("\n".join(lines) + "\n")  # plain: the body is Markdown, not rich markup
    sys.stdout.flush()


def check_pull_request(root: Root, options: PrOptions) -> None:
    """For `fix --pr`, before it scans: exit now (with the matching ExitCode) when its result could not be
    shipped: not a git repository, no commit, no such remote or GitHub repository, no token, or tracked files
    that differ from HEAD. Changes nothing and asks no server."""
    from torchmend.vcs import ship
    from torchmend.vcs.ship import PrError

    try:
        ship.preflight(root, options)
    except PrError as e:
        fail(exit_for(e.kind), escape(e.message) + " (nothing was scanned or written)")


def open_pull_request(root: Root, record: UndoRecord, options: PrOptions, report: str | None = None) -> PrResult:
    """Ship `record`'s changes (already written under `root`) as a branch, a commit, a push and a pull request.

    `report`: the Markdown for the body (torchmend.vcs.body.fix_report); default: the one saved in the record,
    else a body from the record alone. Prints each step; with options.dry_run prints the branch, the commit
    message and the body and changes nothing. On failure prints what happened, what was left and what to do,
    and exits (typer.Exit) with the matching ExitCode.
    """
    from torchmend.vcs import ship
    from torchmend.vcs.ship import PrError

    try:
        result = ship.ship(root, record, options, report, log=lambda s: out.print(Text(s)))
    except PrError as e:
        fail(exit_for(e.kind), escape(e.message), e.left)
    if result.dry_run:
        _print_dry_run(result)
        return result
    for w in result.plan.warnings:
        err.print(Text(f"note: {w}", style="yellow"))
    out.print(
        Text(
            f"You are on {result.plan.current or 'the same detached HEAD'}; your working tree is as it was.",
            style="dim",
        )
    )
    return result


@app.command(short_help="Ship the last fix as a branch, a commit and a GitHub pull request with the evidence.")
def pr(
    project: Annotated[
        Optional[Path],
        typer.Option(
            help="The project whose last fix to ship. Default: the git work tree holding the current directory."
        ),
    ] = None,
    remote: Annotated[
        Optional[str],
        typer.Option(
            help="The git remote to push to; the GitHub repository is read from its URL (https or ssh form). "
            "Default: origin.",
            show_default=False,
        ),
    ] = None,
    base: Annotated[
        Optional[str],
        typer.Option(
            help="The branch the pull request goes into. Default: the branch "
            "yours tracks on the remote, else its name.",
            show_default=False,
        ),
    ] = None,
    repo: Annotated[
        Optional[str],
        typer.Option(help="OWNER/NAME of the GitHub repository, when the remote URL does not say.", show_default=False),
    ] = None,
    api_url: Annotated[
        Optional[str],
        typer.Option(
            help="The GitHub REST API. Default: https://api.github.com; GitHub Enterprise: https://HOST/api/v3.",
            show_default=False,
        ),
    ] = None,
    token_env: Annotated[
        str,
        typer.Option(
            help="The environment variable holding the GitHub token (it is sent "
            "to the API only, never written or shown)."
        ),
    ] = "GITHUB_TOKEN",
    title: Annotated[
        Optional[str],
        typer.Option(help="The pull request's title. Default: the rules fixed and the files.", show_default=False),
    ] = None,
    draft: Annotated[bool, typer.Option("--draft", help="Open the pull request as a draft.")] = False,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            help="Print the branch, the commit message and the pull request body; commit, push and send nothing.",
        ),
    ] = False,
) -> None:
    """Ship the changes of the last `torchmend fix` (already on disk) as a pull request: a branch
    torchmend/<slug> from HEAD with one commit holding only the files the fix wrote, pushed to the remote
    (never forced), and a pull request opened through the GitHub REST API (or the open one for that branch
    updated) with the findings, the diffs and the verification. You stay on your branch; your working tree
    and index are not touched. Refuses when tracked files other than the fix's differ from HEAD.

    Example: GITHUB_TOKEN=... torchmend pr --dry-run
    """
    from torchmend.cli.context import project_errors
    from torchmend.config import Overrides
    from torchmend.project import Project
    from torchmend.store import undo_records
    from torchmend.vcs.ship import PrOptions

    with project_errors():  # the configuration is looked for from --project, else the current directory
        found = Project.at(project or Path.cwd(), project)
    settings = found.config.resolve(Overrides(remote=remote, base=base))
    root = found.root
    records = undo_records(root)
    if not records:
        fail(
            ExitCode.NOTHING_TO_SHIP,
            escape(
                f"no fix of {root} to ship: run `torchmend fix` first (pr ships "
                "what the last fix wrote; `torchmend undo --list` shows the fixes)"
            ),
        )
    open_pull_request(
        found.folder,
        records[-1],
        PrOptions(
            remote=settings.remote,
            base=settings.base,
            repo=repo,
            api_url=api_url,
            token_env=token_env,
            title=title,
            draft=draft,
            dry_run=dry_run,
        ),
    )
