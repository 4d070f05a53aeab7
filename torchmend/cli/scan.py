"""`torchmend scan` and `torchmend rules`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from torchmend import rules
from torchmend.cli import options as o
from torchmend.cli.app import Format, app, err, fail, out
from torchmend.cli.exitcodes import ExitCode


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
    at your source line, deduplicated, with counts.

    Examples:

      torchmend scan train.py --steps 50 --backend aot_eager -- --batch-size 32

      torchmend scan --nproc-per-node 2 train.py      (or: torchmend scan -- torchrun --nproc-per-node 2 train.py)

      torchmend scan --from-trace /logs/job-1234 --path-map /home/alice/proj=.
    """
    from torchmend.cli.config import config_for
    from torchmend.cli.render import print_scan
    from torchmend.cli.running import (
        config_start,
        profile,
        profile_trace,
        project_root_for,
        project_root_of,
        run_spec,
        warn_failed_after_compile,
    )
    from torchmend.profiler.report import scan_report
    from torchmend.suppress import SCAN_HINT, apply_suppressions

    cfg = config_for(config_start(script, args, nproc_per_node))  # a bad one stops here, before anything runs
    steps, timeout, backend = cfg.get("steps", steps), cfg.get("timeout", timeout), cfg.get("backend", backend)
    select, ignore, project = cfg.get("select", select), cfg.get("ignore", ignore), cfg.get("project-root", project)
    if from_trace is not None and script is None:
        root = (project or project_root_of(Path.cwd())).resolve()
        result = profile_trace(from_trace, root, path_map, console=out if format.for_people else err)
        spec = None
    else:
        spec = run_spec(script, args, nproc_per_node, from_trace, steps=steps, timeout=timeout, backend=backend)
        if path_map:
            fail(ExitCode.USAGE, "--path-map goes with --from-trace")
        root = (project or project_root_for(spec.script)).resolve()
        result = profile(
            spec,
            root,
            live=format.for_people and out.is_terminal,
            show_output=show_output,
            keep_events=keep_events,
            console=out if format.for_people else err,
        )
    kept, suppressed, unused = apply_suppressions(
        result.findings, root, config=cfg, select=select, ignore=ignore, hint=SCAN_HINT
    )
    findings = kept + unused
    if format is Format.json:
        print(
            json.dumps(
                scan_report(
                    spec,
                    str(root),
                    findings,
                    result.summary,
                    result.outcome,
                    trace=result.trace,
                    path_maps=result.path_maps,
                ),
                indent=2,
            )
        )
    elif format is Format.table:
        print_scan(out, findings, result.summary)
        if suppressed:
            out.print(
                f"[dim]{len(suppressed)} finding{'s' * (len(suppressed) != 1)} suppressed "
                "(ignore comments, --select/--ignore, per-file-ignores)[/]"
            )
    else:
        from torchmend import pipeline
        from torchmend.cli.formats import report

        summary = result.summary
        print(
            report(
                format,
                findings,
                root,
                run_properties={"summary": summary.to_json()},
                torch_version=summary.torch_version or pipeline.installed_torch(),
            ),
            end="",
        )
    if result.failed:
        warn_failed_after_compile(result)
        raise typer.Exit(int(ExitCode.SCRIPT_FAILED_AFTER_COMPILE))
    if fail_on_findings and not exit_zero and any(f.severity == "fix" for f in findings):
        raise typer.Exit(int(ExitCode.FINDINGS))


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
