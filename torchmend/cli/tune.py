"""`torchmend tune`: run the script as eager and under the compile settings that matter, and say which to use.

Imports nothing heavy at start-up (no torch, no libcst): the tune machinery is imported inside the command."""

from __future__ import annotations

import json
import shlex
import sys
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich.text import Text

from torchmend.cli import options as o
from torchmend.cli.app import app, err, fail, out
from torchmend.cli.exitcodes import ExitCode

if TYPE_CHECKING:
    from torchmend.profiler.runner import RunSpec
    from torchmend.tune.report import Tune
    from torchmend.tune.runs import TuneRun
    from torchmend.tune.settings import Setting
    from torchmend.values import Root


class TuneFormat(str, Enum):
    table = "table"
    json = "json"


@app.command(short_help="Time the script as eager and under each compile mode; recommend one, with break-even.")
def tune(
    script: o.Script,
    args: o.ScriptArgs = None,
    steps: Annotated[
        int, typer.Option(min=2, help="Stop each run after N optimizer steps (the steady step needs a few).")
    ] = 100,
    timeout: Annotated[
        Optional[float],
        typer.Option(
            min=0.1,
            callback=o.finite_seconds,
            help="Stop each run after S seconds of wall time; its steps so far are used.",
        ),
    ] = None,
    settings: Annotated[
        Optional[list[str]],
        typer.Option(
            "--settings",
            "--modes",
            help="Only these settings (repeatable or comma-separated): default, reduce-overhead, "
            "max-autotune-no-cudagraphs, max-autotune, dynamic=True|False|None, MODE:dynamic=X. eager always runs "
            "(the baseline). Default: every mode that exists on the script's device, and the dynamic= settings "
            "when sizes recompile.",
            show_default=False,
        ),
    ] = None,
    backend: Annotated[
        str,
        typer.Option(
            help="The backend every torch.compile call gets. Modes are inductor's: with another backend (aot_eager "
            "for a quick check on a CPU) the settings are eager, default and dynamic=X."
        ),
    ] = "inductor",
    repeat: Annotated[
        int,
        typer.Option(
            min=1,
            max=20,
            help="Run every setting N times, interleaved, each in a fresh process with empty compile caches; "
            "a setting is called faster than eager only when its range is wholly below eager's (N >= 2).",
        ),
    ] = 2,
    horizon: Annotated[
        int,
        typer.Option(
            min=1,
            help="How many steps the real training run takes: a setting that pays for its compile only later is "
            "not recommended.",
        ),
    ] = 10_000,
    report: Annotated[
        Optional[Path],
        typer.Option(
            help="Write a Markdown report here (table, recommendation, command, environment) and the step-time "
            "plot beside it (same name, .svg).",
            show_default=False,
        ),
    ] = None,
    format: Annotated[
        TuneFormat, typer.Option("--format", "-f", help="table, or json (schema torchmend.tune/1).")
    ] = TuneFormat.table,
    project: o.Project = None,
    show_output: o.ShowOutput = False,
) -> None:
    """Run SCRIPT as eager and under each torch.compile setting that matters, interleaved, with fresh compile
    caches per run; report compile seconds, first step, steady step, recompiles, graph breaks, peak memory and
    the break-even step count of each, and recommend one. The script's stdin is /dev/null in every run.

    Examples:

      torchmend tune train.py --steps 200 -- --batch-size 32

      torchmend tune train.py --settings default,max-autotune --repeat 3 --report COMPILE_LOG.md

      torchmend tune train.py --backend aot_eager --repeat 1      (a quick check on a CPU)
    """
    from torchmend.cli.running import run_spec, stopped
    from torchmend.interrupts import STOPPING
    from torchmend.project import Project

    spec = run_spec(script, args, None, None, steps=steps, timeout=timeout)
    if spec.ranked:
        fail(ExitCode.USAGE, "tune runs the script as one process: give the script, not a torchrun command")
    chosen = _chosen(settings, backend)
    if report is not None:
        _check_report(report)  # before the runs, which take minutes: their results must have somewhere to go
    root = Project.at(spec.script.parent, project, config=False).folder  # tune reads no configuration
    command = "torchmend tune " + " ".join(shlex.quote(a) for a in sys.argv[2:])
    finished: list[TuneRun] = []
    try:
        result = _run(spec, root, chosen, backend, repeat, horizon, command, finished)
    except STOPPING as e:  # SIGTERM from a time limit: what finished is still worth a report
        partial = _partial(spec, finished, repeat, horizon, command, e)
        if partial is None:
            stopped(e, "the runs were stopped; no report was written")
        _emit(partial, report, format, show_output)
        stopped(e, f"the runs were stopped after {len(finished)}; the results above are partial")
    _emit(result, report, format, show_output)


def _chosen(settings: list[str] | None, backend: str) -> list[Setting] | None:
    """The settings asked for (None: every one that matters); a bad one is a usage error."""
    from torchmend.tune.settings import SettingError, parse_all

    try:
        return parse_all(settings, backend) if settings else None
    except SettingError as e:
        fail(ExitCode.USAGE, str(e))


def _emit(result: Tune, report: Path | None, format: TuneFormat, show_output: bool) -> None:
    """The output tails (--show-output), the report (--report), then the table or the JSON on stdout."""
    if show_output:
        first: dict[Setting, TuneRun] = {}
        for r in result.runs:
            first.setdefault(r.setting, r)
        for run in first.values():
            err.rule(f"script output (tail): {run.setting.name}, round {run.index + 1}")
            err.print(Text(run.outcome.output_tail))
        err.rule()
    if format is TuneFormat.json:
        from torchmend.tune.report import to_json

        print(json.dumps(to_json(result), indent=2))
    else:
        _print_table(result)
    if report is not None:  # after the results are out: a report that cannot be written loses none of them
        _write_report(result, report)


def _run(
    spec: RunSpec,
    root: Root,
    chosen: list[Setting] | None,
    backend: str,
    repeat: int,
    horizon: int,
    command: str,
    finished: list[TuneRun],
) -> Tune:
    from torchmend.tune import settings as s
    from torchmend.tune.report import Tune, environment
    from torchmend.tune.runs import run_settings, shapes_vary
    from torchmend.tune.verdict import judge

    found = _Found()

    def decide(runs: list[TuneRun]) -> list[Setting] | None:
        if any(r.setting.eager and r.failed for r in runs):
            return None
        compiled = [r for r in runs if not r.setting.eager]
        if compiled and all(r.summary.compiles == 0 and not r.failed for r in compiled):
            return None  # nothing to tune: the script compiles nothing
        cuda = any(r.cuda for r in runs)
        found.vary = next((why for r in compiled if (why := shapes_vary(r))), None)
        if chosen is not None:
            return []
        found.skipped = s.skipped(cuda, backend)
        own = {str(a["dynamic"]) for r in compiled for a in r.asked()}
        return s.more_settings(cuda, found.vary is not None, own, backend)

    def on_done(run: TuneRun) -> None:
        from torchmend.tune.verdict import ms

        what = (
            f"failed ({run.error})"
            if run.failed
            else f"{run.summary.steps} steps, compile {run.summary.compile_seconds:.1f} s, "
            f"first step {ms(run.summary.first_step_s)}, steady {ms(run.summary.steady_step_s)}"
        )
        line = f"tune: {run.setting.name}, round {run.index + 1}: {what} ({run.outcome.wall_s:.1f} s)"
        err.print(Text(line, style="dim"), soft_wrap=True)

    first = chosen if chosen is not None else s.base_settings(backend)
    runs = run_settings(spec, root, first, repeat, decide, on_done=on_done, runs=finished)
    _check(runs)
    verdict = judge(runs, repeat, horizon)
    for row, setting in zip(verdict.rows, dict.fromkeys(r.setting for r in runs)):
        if note := s.cpu_note(setting, verdict.cuda):  # asked for by name on a CPU
            row.note = f"{row.note}; {note}" if row.note else note
    return Tune(
        spec, runs, verdict, command, shapes_vary=found.vary, skipped=found.skipped, environment=environment(runs)
    )


@dataclass
class _Found:
    """What the first eager and default runs showed, for the report."""

    vary: str | None = None  # why dynamic= settings were compared (a size guard), or None
    skipped: dict[str, str] = field(default_factory=dict)  # settings the default list left out, with the reason


def _partial(
    spec: RunSpec, runs: list[TuneRun], repeat: int, horizon: int, command: str, stop: BaseException
) -> Tune | None:
    """The results of the runs that finished before a stop signal, when eager and one compiled setting are
    among them; else None."""
    from torchmend.interrupts import describe
    from torchmend.tune.report import Tune, environment
    from torchmend.tune.verdict import judge

    eager = [r for r in runs if r.setting.eager and not r.failed]
    if not eager or not any(not r.setting.eager and not r.failed for r in runs):
        return None
    verdict = judge(runs, max(r.index for r in runs) + 1, horizon)
    verdict.notes.insert(0, f"{describe(stop)} after {len(runs)} runs: partial results ({repeat} rounds were asked)")
    return Tune(spec, runs, verdict, command, environment=environment(runs))


def _check(runs: list[TuneRun]) -> None:
    """Exit with the documented code when the runs cannot be compared: torch missing, the collector broken, the
    eager run failed, or nothing compiled."""
    eager = runs[0]
    if eager.outcome.ended_by == "no_torch":
        fail(ExitCode.NO_TORCH, f"torch cannot be imported by {eager.outcome.end.get('error')}")
    if eager.outcome.ended_by == "internal_error":
        fail(
            ExitCode.INTERNAL_ERROR,
            f"could not install the collector: {eager.outcome.end.get('error')}",
            eager.outcome.end.get("traceback", ""),
        )
    if eager.failed:
        fail(
            ExitCode.SCRIPT_FAILED,
            f"the script failed as eager ({eager.outcome.ended_by}; exit status {eager.outcome.returncode}): there "
            "is no baseline to compare with. Its output ends with:",
            eager.outcome.output_tail,
        )
    compiled = [r for r in runs if not r.setting.eager]
    if compiled and all(r.summary.compiles == 0 and not r.failed for r in compiled):
        fail(
            ExitCode.NOTHING_COMPILED,
            "the run compiled nothing: the script never reached a torch.compile'd function, so there is no setting "
            "to choose. Check that it calls torch.compile on the code that runs, or raise --steps/--timeout.",
        )


def _check_report(path: Path) -> None:
    """Exit 2 (nothing run) when the --report path cannot be written: it or its plot (.svg) is a folder, a folder
    above it is a file, or the nearest existing folder above it takes no new file (read-only, no permission).
    Creates nothing that stays: the folders are made when the report is written."""
    import tempfile

    for target in (path, path.with_suffix(".svg")):
        if target.is_dir():
            fail(ExitCode.USAGE, f"--report {path}: {target} is a folder; give a file name; nothing was run")
    folder = path.absolute().parent
    while not folder.exists():
        folder = folder.parent
    if not folder.is_dir():
        fail(ExitCode.USAGE, f"--report {path}: {folder} is not a folder; nothing was run")
    try:
        with tempfile.TemporaryFile(dir=folder):  # a real write: permissions, a read-only mount, root's rights
            pass
        for target in (path, path.with_suffix(".svg")):
            if target.exists():
                with open(target, "a", encoding="utf-8"):  # appends nothing: the file stays as it is
                    pass
    except OSError as e:
        fail(ExitCode.USAGE, f"--report {path} cannot be written: {e.strerror or e}; nothing was run")


def _write_report(result: Tune, path: Path) -> None:
    from torchmend.tune.plot import svg
    from torchmend.tune.report import markdown, series

    plot = path.with_suffix(".svg")
    lines = series(result)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if lines:
            title = f"{result.spec.script.name}: step time per setting ({result.environment.get('device', '')})"
            plot.write_text(svg(lines, title), encoding="utf-8")
        path.write_text(markdown(result, plot.name if lines else None), encoding="utf-8")
    except OSError as e:
        fail(ExitCode.USAGE, f"cannot write the report {path}: {e} (the results are above)")
    err.print(f"report written: {path}" + (f" (plot: {plot})" if lines else ""))


def _print_table(result: Tune) -> None:
    """The table at the output's width: the notes in a last column while it has room, under the table otherwise;
    below that, the columns that matter least (graph breaks, peak memory, compile seconds) are left out."""
    from rich.table import Table

    from torchmend.cli.tables import laid_out, text_room
    from torchmend.tune.report import cells, headers, vary_line

    v = result.verdict
    heads = headers(v.cuda)[:-1]
    heads[5] = "breaks"  # narrow columns: the terminal's width is shared by nine
    rows = [cells(r, one=v.repeat < 2)[:-1] for r in v.rows]
    for cell, row in zip(rows, v.rows):
        cell[2] = cells(row, one=True)[2]
    notes = [r.remark for r in v.rows]
    with laid_out(out) as width:
        keep = list(range(len(heads)))
        widths = {i: max(len(heads[i]), *(len(r[i]) for r in rows)) for i in keep}
        with_notes = text_room(width, [widths[i] for i in keep]) >= 16
        for drop in () if with_notes else (5, 6, 1):
            if sum(widths[i] for i in keep) + 3 * len(keep) + 1 <= width:  # rich's box: 3 a column and 1
                break
            keep.remove(drop)
        title = Text.assemble(
            ("tune ", "bold"),
            f"{result.spec.script.name}: {v.repeat} run{'s' * (v.repeat != 1)} per setting, "
            f"{result.environment.get('device', '')}, torch {result.environment.get('torch')}",
        )
        table = Table(title=title, title_justify="left")
        for i in keep:
            table.add_column(heads[i], no_wrap=True, justify="left" if i == 0 else "right")
        if with_notes:
            table.add_column("note", ratio=1, overflow="fold")
        for cell, note in zip(rows, notes):
            table.add_row(*(cell[i] for i in keep), *([note] if with_notes else []))
        out.print(table)
        if not with_notes:
            for row in v.rows:
                if row.note:  # the recommended row's mark is in the table already
                    out.print(Text(f"{row.setting}: {row.remark}"))
        left_out = [heads[i] for i in range(len(heads)) if i not in keep]
        if left_out:
            out.print(Text(f"left out at this width: {', '.join(left_out)} (see --format json or --report)", "dim"))
        for note in v.notes:
            out.print(Text(f"note: {note}", style="dim"))
        if vary := vary_line(result):
            out.print(Text(vary, style="dim"))
        for name, why in result.skipped.items():
            out.print(Text(f"not run: {name}: {why}", style="dim"))
        out.print(Text.assemble(("recommended: ", "bold"), (v.recommended, "bold green"), f": {v.reason}"))
