"""`torchmend scan` and `torchmend rules`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from torchmend import rules
from torchmend.cli import options as o
from torchmend.cli.app import Format, app, err, out
from torchmend.cli.exitcodes import ExitCode

if TYPE_CHECKING:
    from torchmend.pipeline import Scan


@app.command(short_help="Report every graph break and recompilation at your source line.")
def scan(
    script: o.MaybeScript = None,
    args: o.ScriptArgs = None,
    steps: o.Steps = None,
    timeout: o.Timeout = None,
    backend: o.Backend = None,
    nproc_per_node: o.NprocPerNode = None,
    from_trace: o.FromTrace = None,
    path_map: o.PathMap = None,
    select: o.Select = None,
    ignore: o.Ignore = None,
    format: Annotated[
        Format,
        typer.Option(
            "--format",
            "-f",
            help="table (grouped by file), json (schema torchmend.scan/1, docs/scan-json.md), sarif (SARIF 2.1.0 for "
            "code scanning, with the proposed fixes) or github (workflow annotations); see docs/formats.md.",
        ),
    ] = Format.table,
    fail_on_findings: Annotated[
        bool, typer.Option("--fail-on-findings", help="Exit with code 6 when there are findings to fix (for CI).")
    ] = False,
    exit_zero: Annotated[
        bool,
        typer.Option(
            "--exit-zero",
            help="With --fail-on-findings: exit 0 even when there are findings (as `lint --exit-zero`); "
            "no effect without it.",
        ),
    ] = False,
    project: o.Project = None,
    show_output: o.ShowOutput = False,
    keep_events: o.KeepEvents = None,
) -> None:
    """Run SCRIPT under torch.compile in a child process and report every graph break and recompilation
    at your source line, deduplicated, with counts. The script reads torchmend's stdin when it is a pipe or a
    file (`< answers.txt`); from a terminal, and in fix, verify and tune, it reads /dev/null.

    Examples:

      torchmend scan train.py --steps 50 --backend aot_eager -- --batch-size 32

      torchmend scan --nproc-per-node 2 train.py

      torchmend scan -- torchrun --nproc-per-node 2 train.py      (the same)

      torchmend scan --from-trace /logs/job-1234 --path-map /home/alice/proj=.
    """
    from torchmend.cli.context import script_project
    from torchmend.cli.running import scan_of, spec_of, warn_failed_after_compile
    from torchmend.config import Overrides

    project_, _ = script_project(script, args, nproc_per_node, project)  # a bad configuration stops here
    given = Overrides(select=select, ignore=ignore, steps=steps, timeout=timeout, backend=backend)
    settings = project_.config.resolve(given)
    spec = spec_of(settings, script, args, nproc_per_node, from_trace, path_map, stdin=True)  # one run: it can read
    ui = out if format.for_people else err
    live = format.for_people and out.is_terminal
    result = scan_of(
        spec,
        project_,
        settings,
        from_trace,
        path_map,
        console=ui,
        live=live,
        show_output=show_output,
        keep_events=keep_events,
    )
    _render(format, result, project_.root)
    if result.failed:
        warn_failed_after_compile(result)
        raise typer.Exit(int(ExitCode.SCRIPT_FAILED_AFTER_COMPILE))
    if fail_on_findings and not exit_zero and any(f.severity == "fix" for f in result.reported):
        raise typer.Exit(int(ExitCode.FINDINGS))


def _render(format: Format, result: Scan, root: Path) -> None:
    """The scan's report on stdout, in `format`."""
    findings = result.reported
    if format is Format.json:
        from torchmend.profiler.report import scan_report

        report = scan_report(
            result.spec,
            str(root),
            findings,
            result.summary,
            result.outcome,
            trace=result.trace,
            path_maps=result.path_maps,
            placements=result.placements,
        )
        print(json.dumps(report, indent=2))
    elif format is Format.table:
        from torchmend.cli.render import print_scan

        print_scan(out, findings, result.summary, result.placements)
        if result.suppressed:
            n = len(result.suppressed)
            out.print(
                f"[dim]{n} finding{'s' * (n != 1)} suppressed (ignore comments, --select/--ignore, per-file-ignores)[/]"
            )
    else:
        from torchmend import pipeline
        from torchmend.cli import formats

        version = result.summary.torch_version or pipeline.installed_torch()
        fixes = formats.text_fixes(pipeline.propose(result.findings, root, torch_version=version))
        summary = {"summary": result.summary.to_json()}
        print(formats.report(format, findings, root, fixes, run_properties=summary), end="")


@app.command("rules", short_help="List the rule codes and the fix for each.")
def list_rules() -> None:
    """List the rule codes (TM1xx graph breaks, TM2xx recompiles, TM9xx informational) and their fixes."""
    from torchmend.cli.tables import fitted, laid_out

    rows = [
        [
            r.code,
            r.kind,
            r.name,
            r.title + (" (informational)" if r.informational else ""),
            rules.FIXES.get(r.code, "—"),
        ]
        for r in rules.RULES
    ]
    with laid_out(out) as width:
        # The code's family says the kind (TM1xx breaks, TM2xx recompiles): it goes first when the title needs room.
        headers = ["code", "kind", "name", "title", "fix"]
        out.print(fitted(headers, rows, text_column=3, width=width, optional=(1,), labelled=(4,)))
