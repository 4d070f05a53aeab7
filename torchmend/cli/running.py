"""Profiling a script from the command line: checks before the run, the live progress line, and the
exits for runs that show nothing (shared by scan and fix)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import typer
from rich.console import Console
from rich.text import Text

from torchmend.cli.app import err, fail, out
from torchmend.cli.exitcodes import ExitCode
from torchmend.profiler import pathmap

if TYPE_CHECKING:  # heavy (libcst, network, ...): imported where used, so --help stays fast
    from torchmend.pipeline import Scan
    from torchmend.profiler.runner import Progress, RunOutcome, RunSpec
    from torchmend.project import Project
    from torchmend.settings import Settings


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
        fail(ExitCode.SCRIPT_FAILED, f"the script has a syntax error at {where}: {e.msg}", (e.text or "").rstrip())
    except (OSError, ValueError) as e:
        fail(ExitCode.SCRIPT_NOT_FOUND, f"cannot read {script}: {e}")


def _progress_line(label: str, p: Progress) -> Text:
    return Text.assemble(
        (f"{label} ", "dim"),
        (f"{p.elapsed_s:5.1f} s", "bold"),
        "  ",
        f"steps {p.steps}  compiles {p.compiles}  graph breaks {p.breaks}  recompiles {p.recompiles}",
    )


def scan_with_progress(
    spec: RunSpec,
    project: Project,
    settings: Settings,
    live: bool,
    label: str = "running",
    keep_events: Path | None = None,
    console: Console = out,
    own_caches: bool = False,
) -> Scan:
    from rich.live import Live

    from torchmend.pipeline import scan
    from torchmend.profiler.runner import Progress

    if live:
        with Live(_progress_line(label, Progress()), console=console, transient=True, refresh_per_second=8) as view:
            return scan(
                spec,
                project,
                settings,
                on_progress=lambda p: view.update(_progress_line(label, p)),
                keep_events=keep_events,
                own_caches=own_caches,
            )
    return scan(spec, project, settings, keep_events=keep_events, own_caches=own_caches)


def profile(
    spec: RunSpec,
    project: Project,
    settings: Settings,
    live: bool,
    show_output: bool = False,
    keep_events: Path | None = None,
    console: Console = out,
    label: str = "running",
    own_caches: bool = False,
) -> Scan:
    """Run the script under the collector (pipeline.scan: its findings selected with `settings`); exit with the
    documented code when the run shows nothing. `own_caches`: compile with empty caches of its own (fix: the scan stands in for verify's first
    before-run)."""

    with stop_on_signals("the script was stopped; nothing was written"):
        result = scan_with_progress(
            spec, project, settings, live, label, keep_events=keep_events, console=console, own_caches=own_caches
        )
    outcome = result.outcome
    warn_left_running(outcome)
    if show_output and outcome.output_tail:
        err.rule("script output (tail)")
        err.print(Text(outcome.output_tail))
        err.rule()
    if outcome.ended_by == "no_torch":
        fail(
            ExitCode.NO_TORCH,
            f"torch cannot be imported by {spec.python}: {outcome.end.get('error')}. "
            "Install torch in the environment that runs torchmend.",
        )
    if outcome.ended_by == "internal_error":
        fail(
            ExitCode.INTERNAL_ERROR,
            f"could not install the compile-event collector: {outcome.end.get('error')}",
            outcome.end.get("traceback", ""),
        )
    if not result.compiled:
        if result.failed:
            fail(
                ExitCode.SCRIPT_FAILED,
                f"the script failed before anything was compiled ({how_it_ended(outcome)}). Its output ends with:",
                failure_text(outcome),
            )
        budget = {
            "steps": f" --steps {spec.steps} ended it first;",
            "timeout": f" --timeout {spec.timeout} ended it first;",
        }
        fail(
            ExitCode.NOTHING_COMPILED,
            "the run ended without compiling anything:"
            f"{budget.get(outcome.ended_by, '')} the script never reached a torch.compile'd function. "
            "Check that it calls torch.compile on the code that runs, or raise the budget.",
        )
    return result


@contextlib.contextmanager
def stop_on_signals(what: str) -> Iterator[None]:
    """Ctrl-C, SIGTERM or SIGHUP in the block (torchmend.interrupts): the runner has already stopped the script
    and removed its folders; say so in one line (`what`: what became of the work) and exit 130, 143 or 129."""
    from torchmend.interrupts import STOPPING

    try:
        yield
    except STOPPING as e:
        stopped(e, what)


def stopped(exc: BaseException, what: str) -> NoReturn:
    from torchmend.cli import failure
    from torchmend.interrupts import describe, exit_code

    failure.record(exit_code(exc), f"{describe(exc)}: {what}")
    with contextlib.suppress(OSError):  # SIGHUP: the terminal may be gone
        err.print(f"[bold red]torchmend:[/] {describe(exc)}: {what}")
    raise typer.Exit(exit_code(exc))


def warn_failed_after_compile(p: Scan) -> None:

    err.print(
        f"[bold yellow]warning:[/] the script failed after compiling ({how_it_ended(p.outcome)}); "
        "the report shows what was seen until then. Its output ends with:"
    )
    err.print(Text(failure_text(p.outcome), style="dim"))


def how_it_ended(outcome: RunOutcome) -> str:
    """How a failed run ended, in words: its detail (the signal, the real exit status, a full disk) when the
    runner has one, else the kind of end and the exit status."""
    from torchmend.cli.render import ENDED_BY

    if outcome.detail and outcome.ended_by in ("killed", "lost"):
        return outcome.detail
    said = f"{ENDED_BY.get(outcome.ended_by, outcome.ended_by)}; exit status {outcome.returncode}"
    return f"{said}; {outcome.detail}" if outcome.detail else said


def warn_left_running(outcome: RunOutcome) -> None:
    """The processes the script started outside its process group (setsid): stopped, or still running (named)."""
    if outcome.stopped:
        err.print(
            Text(
                f"stopped {len(outcome.stopped)} process{'es' * (len(outcome.stopped) != 1)} the script left running "
                f"outside its process group: {', '.join(outcome.stopped)}",
                style="dim",
            )
        )
    if outcome.left_running:
        err.print(
            "[bold yellow]warning:[/] the script left processes running that torchmend could not stop: "
            + ", ".join(outcome.left_running)
        )


def failure_text(outcome: RunOutcome) -> str:
    """What to show of a failed run: the output's tail; for a ranked run, the traceback of the rank that
    failed first (torchrun's own summary fills the tail)."""
    if outcome.end.get("rank") is not None and outcome.end.get("traceback"):
        return f"rank {outcome.end['rank']} failed first:\n{outcome.end['traceback']}"
    return outcome.output_tail


def run_spec(
    script: Path | None, args: list[str] | None, nproc_per_node: int | None, from_trace: Path | None, **fields: object
) -> RunSpec:
    """The run a command line asks for: a script, `--nproc-per-node N`, or a torchrun command after `--`."""
    from torchmend.profiler.launch import LaunchError, resolve
    from torchmend.profiler.runner import RunSpec

    if script is None:
        fail(ExitCode.USAGE, "give a training script (or --from-trace DIR)")
    if from_trace is not None:
        fail(ExitCode.USAGE, "--from-trace reads the logs of a run that already happened: give no script with it")
    try:
        launch = resolve(str(script), list(args or ()), nproc_per_node)
    except LaunchError as e:
        fail(ExitCode.USAGE, str(e))
    path = Path(launch.script)
    check_script(path)
    return RunSpec(script=path.resolve(), args=launch.args, launcher=launch.launcher, cwd=Path.cwd(), **fields)  # type: ignore[arg-type]


def profile_trace(
    trace_path: Path, project: Project, settings: Settings, path_map: list[str] | None, console: Console = out
) -> Scan:
    """Findings from a TORCH_TRACE directory (pipeline.scan_trace), with its source paths mapped onto this
    checkout; says which mappings were guessed and which files cannot be found."""
    from torchmend.pipeline import scan_trace
    from torchmend.profiler.tracedir import TraceError

    try:
        maps = pathmap.parse(path_map or ())
    except pathmap.PathMapError as e:
        fail(ExitCode.USAGE, str(e))
    try:
        result = scan_trace(trace_path, project, maps, settings)
    except TraceError as e:
        fail(ExitCode.TRACE_UNREADABLE, str(e))
    for m in result.guessed:
        console.print(
            f"[dim]paths: {m.old} → {m.new} (guessed from {m.files} file{'s' * (m.files != 1)}; "
            "set it with --path-map OLD=NEW)[/]"
        )
    missing = result.unmapped
    if missing:
        err.print(
            f"[yellow]warning:[/] {len(missing)} source file{'s' * (len(missing) != 1)} the trace names "
            "cannot be found in this checkout; findings there cannot be fixed (use --path-map OLD=NEW): "
            + ", ".join(missing[:5])
            + (" ..." if len(missing) > 5 else "")
        )
    for p in result.trace.ignored:  # type: ignore[union-attr]
        err.print(f"[dim]ignored {p.name}: an older log for a rank already read (an earlier run?)[/]")
    if not result.compiled:
        fail(ExitCode.TRACE_UNREADABLE, f"the trace under {trace_path} records no completed compilation")
    return result


def spec_of(
    settings: Settings,
    script: Path | None,
    args: list[str] | None,
    nproc_per_node: int | None,
    from_trace: Path | None,
    path_map: list[str] | None,
    **fields: object,
) -> RunSpec | None:
    """The run scan and fix make (budget and backend from `settings`; `fields`: more of RunSpec's, the seed), or
    None when the findings come from a trace (`--from-trace` without a script)."""
    if from_trace is not None and script is None:
        return None
    if path_map:
        fail(ExitCode.USAGE, "--path-map goes with --from-trace")
    return run_spec(
        script,
        args,
        nproc_per_node,
        from_trace,
        steps=settings.steps,
        timeout=settings.timeout,
        backend=settings.backend,
        **fields,
    )


def scan_of(
    spec: RunSpec | None,
    project: Project,
    settings: Settings,
    from_trace: Path | None,
    path_map: list[str] | None,
    *,
    console: Console,
    live: bool,
    show_output: bool = False,
    keep_events: Path | None = None,
    label: str = "running",
    own_caches: bool = False,
) -> Scan:
    """The findings of the run (profile()), or of the trace when `spec` is None (profile_trace()); selected and
    suppressed by the pipeline, the documented exits taken."""
    if spec is None:
        assert from_trace is not None  # spec_of() gives None only for a trace
        return profile_trace(from_trace, project, settings, path_map, console=console)
    return profile(spec, project, settings, live, show_output, keep_events, console, label, own_caches)
