"""Profiling a script from the command line: checks before the run, the live progress line, and the
exits for runs that show nothing (shared by scan and fix)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.live import Live
from rich.text import Text

from torchmend.cli.app import err, fail, out
from torchmend.cli.exitcodes import ExitCode
from torchmend.cli.render import ENDED_BY
from torchmend.profiler.findings import Finding, Summary, analyse
from torchmend.profiler.runner import Progress, RunOutcome, RunSpec, run as run_child


def project_root_for(script: Path) -> Path:
    """The git work tree holding the script, else the script's directory."""
    for d in [script.parent, *script.parent.parents]:
        if (d / ".git").exists():
            return d
    return script.parent


def check_script(script: Path) -> None:
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


def _progress_line(label: str, p: Progress) -> Text:
    return Text.assemble((f"{label} ", "dim"), (f"{p.elapsed_s:5.1f} s", "bold"), "  ",
                         f"steps {p.steps}  compiles {p.compiles}  graph breaks {p.breaks}  recompiles {p.recompiles}")


@dataclass
class Profile:
    findings: list[Finding]
    summary: Summary
    outcome: RunOutcome

    @property
    def failed(self) -> bool:
        return self.outcome.failed


def run_with_progress(spec: RunSpec, live: bool, label: str = "running", keep_events: Path | None = None,
                      console: Console = out) -> RunOutcome:
    if live:
        with Live(_progress_line(label, Progress()), console=console, transient=True,
                  refresh_per_second=8) as view:
            return run_child(spec, on_progress=lambda p: view.update(_progress_line(label, p)), keep_dir=keep_events)
    return run_child(spec, keep_dir=keep_events)


def profile(spec: RunSpec, root: Path, live: bool, show_output: bool = False,
            keep_events: Path | None = None, console: Console = out, label: str = "running") -> Profile:
    """Run the script under the collector; exit with the documented code when the run shows nothing."""
    outcome = run_with_progress(spec, live, label, keep_events=keep_events, console=console)
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
    result = Profile(findings, summary, outcome)
    if summary.compiles == 0 and summary.recompile_limit_hits == 0:
        if result.failed:
            fail(ExitCode.SCRIPT_FAILED, f"the script failed before anything was compiled "
                 f"({ENDED_BY[outcome.ended_by]}; exit status {outcome.returncode}). Its output ends with:",
                 outcome.output_tail)
        budget = {"steps": f" --steps {spec.steps} ended it first;",
                  "timeout": f" --timeout {spec.timeout} ended it first;"}
        fail(ExitCode.NOTHING_COMPILED, "the run ended without compiling anything:"
             f"{budget.get(outcome.ended_by, '')} the script never reached a torch.compile'd function. "
             "Check that it calls torch.compile on the code that runs, or raise the budget.")
    return result


def warn_failed_after_compile(p: Profile) -> None:
    err.print(f"[bold yellow]warning:[/] the script failed after compiling ({ENDED_BY[p.outcome.ended_by]}); "
              "the report shows what was seen until then. Its output ends with:")
    err.print(Text(p.outcome.output_tail, style="dim"))
