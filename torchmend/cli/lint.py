"""`torchmend lint`: the findings the source shows, without running anything; `--fix` applies the codemods."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich.console import Console

from torchmend.cli import options as o
from torchmend.cli.app import Format, app, err, fail, out, write_stdout
from torchmend.cli.exitcodes import ExitCode
from torchmend.cli.printable import printable, printable_data, printable_record

if TYPE_CHECKING:
    from torchmend.lint import LintResult
    from torchmend.model import Finding
    from torchmend.project import Project
    from torchmend.settings import Settings

JSON_SCHEMA = "torchmend.lint/1"

Paths = Annotated[
    Optional[list[Path]],
    typer.Argument(
        help="Files or folders to lint (default: the current folder). Folders are listed as git lists them "
        "(.gitignore respected); virtualenvs, site-packages, __pycache__ and .git never are.",
        show_default=False,
    ),
]


@app.command(short_help="Find graph breaks and recompiles in the source, without running it (static).")
def lint(
    paths: Paths = None,
    select: o.Select = None,
    ignore: o.Ignore = None,
    format: Annotated[
        Format,
        typer.Option(
            "--format",
            "-f",
            help="table (grouped by file), json (schema torchmend.lint/1), sarif (SARIF 2.1.0 for code scanning, "
            "each codemod's change as a fix) or github (workflow annotations, one line per finding).",
        ),
    ] = Format.table,
    fix: Annotated[
        bool,
        typer.Option("--fix", help="Apply the safe fixes (the codemods of `torchmend fix`), then report what remains."),
    ] = False,
    unsafe_fixes: o.LintUnsafe = None,
    unsafe: o.UnsafeAlias = None,
    diff: Annotated[
        bool,
        typer.Option(
            "--diff", help="Print the fixes as one unified diff on stdout and write nothing (findings go to stderr)."
        ),
    ] = False,
    add_ignore: Annotated[
        bool,
        typer.Option(
            "--add-ignore",
            help="Write a `# torchmend: ignore[CODES]` comment on the line of every finding that remains (like "
            "ruff's add-noqa), so that from now on only new findings are reported.",
        ),
    ] = False,
    exit_zero: Annotated[
        bool, typer.Option("--exit-zero", help="Exit 0 even when findings remain (6 otherwise).")
    ] = False,
    show_possible: Annotated[
        bool,
        typer.Option(
            "--show-possible",
            help="Report the possible findings too (code that runs only under some settings, values the source does "
            "not pin down); by default they are left out of the output and the exit code.",
        ),
    ] = False,
    project: o.Project = None,
    no_cache: Annotated[
        bool, typer.Option("--no-cache", help="Parse every file again instead of reusing what the last lint found.")
    ] = False,
) -> None:
    """Report the graph breaks and recompiles that can be seen in the source, without running or importing it
    (libcst only): print/logging, .item()/float()/int() of tensors, if/while on tensors, number attributes
    changed in forward, float learning rates written into param_groups of a compiled optimizer step, tensors
    cached on the module, torch.tensor(number), inside code that torch.compile compiles (followed across the
    project's files). Each finding says how sure it is (likely or possible; the possible ones are shown with
    --show-possible); `torchmend scan SCRIPT` confirms it by running the script.

    Examples:

      torchmend lint

      torchmend lint src/ train.py --select TM1 --format json

      torchmend lint --fix            (torchmend undo puts the files back)

      torchmend lint --diff --unsafe-fixes > fixes.patch

      torchmend lint --format sarif --exit-zero > torchmend.sarif

      torchmend lint --add-ignore     (silence what is there today; report only what is new)
    """
    from torchmend.cli.context import project_errors
    from torchmend.config import Overrides
    from torchmend.project import Project

    unsafe_fixes = unsafe_fixes if unsafe is None else unsafe  # --unsafe: fix's older spelling
    given = _given(paths, fix, diff, add_ignore, unsafe_fixes)
    with project_errors():  # a bad [tool.torchmend] stops here (exit 24)
        project_ = Project.for_paths(given, project)
    settings = project_.config.resolve(Overrides(select=select, ignore=ignore, unsafe_fixes=unsafe_fixes))
    result, suppressed, unused = _lint(given, project_, settings, show_possible, no_cache)
    for line in result.errors:
        err.print(f"[yellow]warning:[/] {printable(line)}")
    findings = result.findings
    if fix or diff:
        # Beside a machine-read report on stdout, what --fix says goes to stderr.
        findings, wrote = _apply(result, project_, settings, write=fix, say=out if format == "table" else err)
        if wrote:  # report what is left where it now is: the fixes moved lines
            result, suppressed, unused = _lint(given, project_, settings, show_possible, no_cache)
            findings = result.findings
    elif add_ignore:
        findings = _add_ignores(findings, project_)
    print_lint(out if not diff else err, result, findings + unused, format, project_.root, suppressed)
    if findings and not exit_zero:
        raise typer.Exit(int(ExitCode.FINDINGS))


def _given(paths: list[Path] | None, fix: bool, diff: bool, add_ignore: bool, unsafe: bool | None) -> list[Path]:
    """The options that go together, and the paths to lint (each must exist; default: the current folder)."""
    if sum((fix, diff, add_ignore)) > 1:
        fail(ExitCode.USAGE, "choose one of --fix, --diff and --add-ignore")
    if unsafe and not (fix or diff):
        fail(ExitCode.USAGE, "--unsafe-fixes goes with --fix or --diff")
    given = list(paths or [Path(".")])
    missing = [p for p in given if not p.exists()]
    if missing:
        fail(ExitCode.SCRIPT_NOT_FOUND, f"{missing[0]} does not exist")
    return given


def _lint(
    given: list[Path], project: Project, settings: Settings, show_possible: bool, no_cache: bool
) -> tuple[LintResult, int, list[Finding]]:
    """Lint the paths and select the findings (pipeline.select, as a scan's): (the result with the findings kept,
    how many were suppressed, the unused suppressions)."""
    from torchmend import pipeline
    from torchmend.lint import PathNotFound, lint_paths

    try:
        # select/ignore are applied with the suppressions, so that what they leave out is counted as suppressed
        result = lint_paths(given, project.folder, cache=not no_cache, excluded=settings.excluded)
    except PathNotFound as e:
        fail(ExitCode.SCRIPT_NOT_FOUND, str(e))
    # Comments are looked for only in files that have one: tokenizing every file would cost more than the lint.
    commented = [p for p in result.files if _mentions_suppression(p)]
    kept, suppressed, unused = pipeline.select(result.findings, project, settings, files=commented)
    if not show_possible:
        result.hidden = sum(f.confidence == "possible" for f in kept)
        kept = [f for f in kept if f.confidence != "possible"]
    result.findings = kept
    return result, len(suppressed), unused


def _mentions_suppression(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            return b"torchmend:" in f.read()
    except OSError:
        return False


def _add_ignores(findings: list[Finding], project: Project) -> list[Finding]:
    """Write the suppression comments for `findings`; the findings left (those in files it could not write)."""
    from torchmend.store import ProjectBusy, WriteRefused
    from torchmend.suppress import write_ignores

    try:
        written = write_ignores(findings, project.folder)
    except ProjectBusy as e:
        fail(ExitCode.PROJECT_BUSY, f"nothing was written: {e}")
    except WriteRefused as e:
        fail(ExitCode.WRITE_REFUSED, f"nothing was written: {e}")
    shown = printable(", ".join(project.display(p) for p in written))
    out.print(
        f"[bold green]Added suppression comments for {len(findings)} finding(s)[/]"
        + (f" in {shown}" if written else "")
        + " (`git diff` shows them)."
    )
    return []


def _apply(
    result: LintResult, project: Project, settings: Settings, write: bool, say: Console
) -> tuple[list[Finding], bool]:
    """Propose and accept the fixes as `fix --yes` does; print the diff (write=False) or write the files. Returns
    the findings no accepted change fixes, and whether files were written."""
    from torchmend import pipeline
    from torchmend.cli.context import check_journal
    from torchmend.codemods.review import ACCEPTED, CONFLICT

    check_journal(project, writes=write)
    fixes = pipeline.propose(result.findings, project, torch_version=pipeline.installed_torch())
    decisions = pipeline.accept_all(fixes, settings.unsafe)
    ui = say if write else err
    for d in decisions:
        if d.outcome == CONFLICT or (d.detail and d.outcome != ACCEPTED):
            ui.print(printable(f"[yellow]skipped {fixes.where(d.proposal)} {d.proposal.rule}: {d.detail}[/]"))
    fixed = {id(f) for p in fixes.accepted for f in p.findings}
    remaining = [f for f in result.findings if id(f) not in fixed]
    if not write:
        write_stdout(pipeline.patch_bytes(fixes))
        return result.findings, False  # nothing was written: every finding is still there
    if not fixes.changes():
        unsafe_left = sum(p.safety == "unsafe" for p in fixes.proposals) if not settings.unsafe else 0
        more = f" ({unsafe_left} unsafe: --unsafe-fixes)" if unsafe_left else ""
        ui.print(f"No fix applied{more}; nothing written.")
        return remaining, False
    try:
        record = pipeline.write(fixes, project)
    except pipeline.ProjectBusy as e:
        fail(ExitCode.PROJECT_BUSY, f"nothing was written: {e}")
    except pipeline.WriteRefused as e:
        fail(ExitCode.WRITE_REFUSED, f"nothing was written: {e}")
    ui.print(
        f"[bold green]Fixed {len(result.findings) - len(remaining)} finding(s)[/] in "
        + printable(", ".join(fixes.display(p) for p in record.files))
        + " (not verified: nothing was run; `torchmend verify SCRIPT --patch "
        + f"{record.patch}` checks it, `torchmend undo` puts the files back)."
    )
    return remaining, True


def print_lint(
    console: Console, result: LintResult, findings: list[Finding], format: Format, root: Path, suppressed: int = 0
) -> None:
    """All of lint's output, in one place. File names are shown printable() (a name that is not valid UTF-8 holds
    surrogates no stream or JSON parser takes); SARIF's URIs carry their bytes, percent-encoded."""
    if format in (Format.sarif, Format.github):
        from torchmend import pipeline
        from torchmend.cli import formats

        proposed = pipeline.propose(findings, root, torch_version=pipeline.installed_torch())
        text = printable(formats.report(format, findings, root, formats.text_fixes(proposed)))
        if console is out:
            print(text, end="")
        else:  # with --diff, stdout carries the patch
            console.print(text, end="", markup=False, highlight=False, soft_wrap=True)
        return
    if format is Format.json:
        report = {
            "schema": JSON_SCHEMA,
            "root": str(root),
            "files_checked": result.files_checked,
            "findings": [f.to_json() for f in findings],
            "suppressed": suppressed,
            "possible_not_shown": result.hidden,
        }
        text = json.dumps(printable_data(report), indent=2)
        if console is out:
            print(text)
        else:
            console.print(text, markup=False, highlight=False, soft_wrap=True)
        return
    from torchmend.cli.render import counts_text, findings_view
    from torchmend.cli.tables import laid_out

    findings = [printable_record(f) for f in findings]

    with laid_out(console) as width:
        if findings:
            console.print(findings_view(findings, width))
        likely = sum(f.confidence == "likely" for f in findings)
        files = f"{result.files_checked} file{'s' * (result.files_checked != 1)}"
        took = f"{result.seconds:.2f} s"
        if findings:
            console.print(
                f"{counts_text(findings)} ({likely} likely, {len(findings) - likely} possible) in {files}, {took}, "
                "static: `torchmend scan SCRIPT` confirms them by running it."
            )
        else:
            console.print(f"[bold green]No findings[/] in {files} ({took}, static).")
        if result.hidden:
            console.print(
                f"[dim]{result.hidden} possible finding{'s' * (result.hidden != 1)} not shown (code that only some "
                "settings run, or values the source does not pin down): --show-possible[/]"
            )
        if suppressed:
            console.print(
                f"[dim]{suppressed} finding{'s' * (suppressed != 1)} suppressed "
                "(ignore comments, --select/--ignore, per-file-ignores)[/]"
            )
