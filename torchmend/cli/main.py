"""The `torchmend` command line. Owns all terminal I/O and exit codes; never imports torch."""

from __future__ import annotations

import json
import sys
from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.live import Live
from rich.text import Text

from torchmend import __version__, rules
from torchmend.cli.exitcodes import ExitCode
from torchmend.cli.render import ENDED_BY, print_scan
from torchmend.profiler.findings import analyse
from torchmend.profiler.report import scan_report
from torchmend.profiler.runner import Progress, RunSpec, run as run_child

app = typer.Typer(
    name="torchmend",
    help="Find what stops torch.compile from paying off in a training script (graph breaks, recompilations) "
    "and point at the source line behind each one.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
out = Console()
err = Console(stderr=True)


class Format(str, Enum):
    table = "table"
    json = "json"


def _version(value: bool) -> None:
    if value:
        print(f"torchmend {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[Optional[bool], typer.Option("--version", callback=_version, is_eager=True,
                                                    help="Print the version and exit.")] = None,
) -> None:
    """torchmend: graph breaks and recompilations, found at your source line."""


def project_root_for(script: Path) -> Path:
    """The git work tree holding the script, else the script's directory."""
    for d in [script.parent, *script.parent.parents]:
        if (d / ".git").exists():
            return d
    return script.parent


def fail(code: ExitCode, message: str, detail: str = "") -> None:
    err.print(f"[bold red]torchmend:[/] {message}")
    if detail:
        err.print(Text(detail, style="dim"))
    raise typer.Exit(int(code))


def _check_script(script: Path) -> None:
    if not script.exists():
        fail(ExitCode.SCRIPT_NOT_FOUND, f"script not found: {script}")
    if not script.is_file():
        fail(ExitCode.SCRIPT_NOT_FOUND, f"not a file: {script}")
    try:
        source = script.read_bytes()
        compile(source, str(script), "exec", dont_inherit=True)
    except SyntaxError as e:
        where = f"{e.filename}:{e.lineno}" + (f":{e.offset}" if e.offset else "")
        fail(ExitCode.SCRIPT_FAILED, f"the script has a syntax error at {where}: {e.msg}",
             (e.text or "").rstrip())
    except (OSError, ValueError) as e:
        fail(ExitCode.SCRIPT_NOT_FOUND, f"cannot read {script}: {e}")


def _progress_line(p: Progress) -> Text:
    return Text.assemble(("running ", "dim"), (f"{p.elapsed_s:5.1f} s", "bold"), "  ",
                         f"steps {p.steps}  compiles {p.compiles}  graph breaks {p.breaks}  recompiles {p.recompiles}")


@app.command(context_settings={"help_option_names": ["-h", "--help"]})
def scan(
    script: Annotated[Path, typer.Argument(help="The training script, run as `python SCRIPT ARGS` would run it.",
                                           show_default=False)],
    args: Annotated[Optional[list[str]], typer.Argument(help="Arguments for the script; put them after `--`.",
                                                        show_default=False)] = None,
    steps: Annotated[Optional[int], typer.Option(min=1, help="Stop after N optimizer steps (counted through "
                                                 "PyTorch's global optimizer step hook).")] = None,
    timeout: Annotated[Optional[float], typer.Option(min=0.1, help="Stop after S seconds of wall time, "
                                                     "reporting what was seen so far.")] = None,
    backend: Annotated[Optional[str], typer.Option(help="Override the backend of every torch.compile call, e.g. "
                                                   "aot_eager for fast detection on a CPU (plain `eager` misses "
                                                   "float-to-tensor recompiles). Default: the script's own.")] = None,
    format: Annotated[Format, typer.Option("--format", "-f", help="table (grouped by file) or json "
                                           "(schema torchmend.scan/1, see docs/scan-json.md).")] = Format.table,
    fail_on_findings: Annotated[bool, typer.Option("--fail-on-findings", help="Exit with code 6 when there are "
                                                   "findings to fix (for CI).")] = False,
    project: Annotated[Optional[Path], typer.Option(help="Project root: findings under it are yours, the rest "
                                                    "are libraries. Default: the git work tree holding the "
                                                    "script, else its directory.")] = None,
    show_output: Annotated[bool, typer.Option("--show-output", help="Print the script's own output after the "
                                              "run (it is captured; only its tail is shown on failure).")] = False,
    keep_events: Annotated[Optional[Path], typer.Option(help="Keep the raw event stream and the script's "
                                                        "output in this directory.")] = None,
) -> None:
    """Run SCRIPT under torch.compile in a child process and report every graph break and recompilation
    at your source line, deduplicated, with counts.

    Example: torchmend scan train.py --steps 50 --backend aot_eager -- --batch-size 32
    """
    _check_script(script)
    script = script.resolve()
    root = (project or project_root_for(script)).resolve()
    spec = RunSpec(script=script, args=tuple(args or ()), steps=steps, timeout=timeout, backend=backend,
                   cwd=Path.cwd())

    live_ok = format is Format.table and out.is_terminal
    if live_ok:
        with Live(_progress_line(Progress()), console=out, transient=True, refresh_per_second=8) as live:
            outcome = run_child(spec, on_progress=lambda p: live.update(_progress_line(p)), keep_dir=keep_events)
    else:
        outcome = run_child(spec, keep_dir=keep_events)

    if show_output and outcome.output_tail:
        err.rule("script output (tail)")
        err.print(Text(outcome.output_tail))
        err.rule()
    if outcome.ended_by == "no_torch":
        fail(ExitCode.NO_TORCH, f"torch cannot be imported by {spec.python}: {outcome.end.get('error')}. "
             "Install torch in the environment that runs torchmend.")
    if outcome.ended_by == "internal_error":
        fail(ExitCode.INTERNAL_ERROR, f"could not install the compile-event collector: {outcome.end.get('error')}",
             outcome.end.get("traceback", ""))
    if outcome.ended_by == "interrupted":
        fail(ExitCode.SCRIPT_FAILED, "interrupted")

    findings, summary = analyse(outcome.events, root, outcome.ended_by, outcome.wall_s)
    failed = outcome.ended_by in ("error", "exit", "killed")
    if summary.compiles == 0 and summary.recompile_limit_hits == 0:
        if failed:
            fail(ExitCode.SCRIPT_FAILED, f"the script failed before anything was compiled "
                 f"({ENDED_BY[outcome.ended_by]}; exit status {outcome.returncode}). Its output ends with:",
                 outcome.output_tail)
        budget = {"steps": f" --steps {steps} ended it first;", "timeout": f" --timeout {timeout} ended it first;"}
        fail(ExitCode.NOTHING_COMPILED, "the run ended without compiling anything:"
             f"{budget.get(outcome.ended_by, '')} the script never reached a torch.compile'd function. "
             "Check that it calls torch.compile on the code that runs, or raise the budget.")

    if format is Format.json:
        report = scan_report(spec, str(root), findings, summary, outcome)
        print(json.dumps(report, indent=2))
    else:
        print_scan(out, findings, summary)
    if failed:
        err.print(f"[bold yellow]warning:[/] the script failed after compiling ({ENDED_BY[outcome.ended_by]}); "
                  "the report shows what was seen until then. Its output ends with:")
        err.print(Text(outcome.output_tail, style="dim"))
        raise typer.Exit(int(ExitCode.SCRIPT_FAILED_AFTER_COMPILE))
    if fail_on_findings and any(f.severity == "fix" for f in findings):
        raise typer.Exit(int(ExitCode.FINDINGS))


@app.command("rules")
def list_rules() -> None:
    """List the rule codes that scan reports (TM1xx graph breaks, TM2xx recompiles, TM9xx informational)."""
    from rich.table import Table

    table = Table("code", "kind", "name", "title")
    for r in rules.RULES:
        table.add_row(r.code, r.kind, r.name, r.title + (" (informational)" if r.informational else ""))
    out.print(table)


def run() -> None:
    try:
        app()
    except KeyboardInterrupt:
        sys.exit(130)
