"""A tune's results as data (`--format json`, schema torchmend.tune/1) and as a Markdown report with its SVG plot."""

from __future__ import annotations

import datetime
import os
import platform
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from torchmend import __version__
from torchmend.profiler.runner import RunSpec
from torchmend.tune.runs import TuneRun
from torchmend.tune.settings import EAGER
from torchmend.tune.verdict import NEVER, Row, Stat, Verdict, ms

SCHEMA = "torchmend.tune/1"


@dataclass
class Tune:
    spec: RunSpec
    runs: list[TuneRun]
    verdict: Verdict
    command: str
    shapes_vary: str | None = None
    skipped: dict[str, str] = field(default_factory=dict)
    environment: dict[str, Any] = field(default_factory=dict)


def vary_line(tune: Tune) -> str | None:
    """What the report says when sizes recompile: whether dynamic= settings were compared."""
    if not tune.shapes_vary:
        return None
    if any(r.setting.dynamic is not None for r in tune.runs):
        return f"shapes vary ({tune.shapes_vary}): dynamic= settings were compared"
    return f"shapes vary ({tune.shapes_vary}): name dynamic=True and dynamic=False in --settings to compare them"


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return f"{line.split(':', 1)[1].strip()}, {os.cpu_count()} cores"
    except OSError:
        pass
    return f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores"


def environment(runs: list[TuneRun]) -> dict[str, Any]:
    """torch's and Python's versions (as the child saw them), the device, the date."""
    start = next((r.outcome.start for r in runs if r.outcome.start), {})
    gpu = next((r.end["cuda_device"] for r in runs if r.end.get("cuda_device")), None)
    return {
        "torch": start.get("torch"),
        "python": start.get("python"),
        "device": f"cuda: {gpu}" if gpu else f"cpu: {cpu_name()}",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }


def series(tune: Tune) -> dict[str, list[float]]:
    """Per setting, the step times of its run with the median steady step (the plot's lines)."""
    out: dict[str, list[float]] = {}
    for row in tune.verdict.rows:
        good = [r for r in tune.runs if r.setting.name == row.setting and not r.failed and r.step_seconds]
        if not good:
            continue
        target = row.steady_s.median or 0.0
        run = min(good, key=lambda r: abs((r.summary.steady_step_s or 0.0) - target))
        out[row.setting] = run.step_seconds
    return out


def to_json(tune: Tune) -> dict[str, Any]:
    v = tune.verdict
    return {
        "schema": SCHEMA,
        "torchmend_version": __version__,
        "command": tune.command,
        "script": str(tune.spec.script),
        "args": list(tune.spec.args),
        "budget": {"steps": tune.spec.steps, "timeout_s": tune.spec.timeout},
        "repeat": v.repeat,
        "horizon": v.horizon,
        "environment": tune.environment,
        "cuda": v.cuda,
        "shapes_vary": tune.shapes_vary,
        "skipped": tune.skipped,
        "script_compile_calls": tune.runs[0].asked() if tune.runs else [],
        "recommended": v.recommended,
        "reason": v.reason,
        "notes": v.notes,
        "settings": [r.to_json() for r in v.rows],
        "runs": [
            {
                "setting": r.setting.name,
                "repeat": r.index,
                "ended_by": r.outcome.ended_by,
                "error": r.error if r.failed else None,
                "steps": r.summary.steps,
                "compile_seconds": r.summary.compile_seconds,
                "first_step_s": r.summary.first_step_s,
                "steady_step_s": r.summary.steady_step_s,
                "fixed_s": r.fixed_s,
                "recompiles": r.summary.recompiles,
                "graph_breaks": r.summary.graph_breaks,
                "peak_rss_mb": r.end.get("peak_rss_mb"),
                "cuda_peak_mb": r.end.get("cuda_peak_mb"),
                "step_s": [round(s, 6) for s in r.step_seconds],
            }
            for r in tune.runs
        ],
    }


def span(stat: Stat, one: bool = False) -> str:
    """`1.23 ms (1.2–1.31)`: the median, then the min–max in the median's unit; the median alone for one run."""
    if stat.median is None:
        return "—"
    if one or stat.low == stat.high or stat.low is None or stat.high is None:
        return ms(stat.median)
    scale = 1e3 if stat.median < 1 else 1.0
    return f"{ms(stat.median)} ({stat.low * scale:.3g}–{stat.high * scale:.3g})"


def memory(stat: Stat) -> str:
    """MiB: whole above 10, else with the decimals a small GPU peak needs (a few KiB of activations is not 0)."""
    if stat.median is None:
        return "—"
    return f"{stat.median:,.0f}" if stat.median >= 10 else f"{stat.median:.2g}"


def cells(row: Row, one: bool) -> list[str]:
    """A row's cells, in HEADERS order (shared by the terminal table and the Markdown)."""
    be = row.break_even
    return [
        row.setting,
        "—" if row.compile_s.median is None or row.setting == EAGER else f"{row.compile_s.median:.1f}",
        span(row.first_step_s, one),
        span(row.steady_s, one),
        str(row.recompiles),
        str(row.graph_breaks),
        memory(row.peak_mb),
        "—" if be is None else (NEVER if be == NEVER else f"{be:,}" if isinstance(be, int) else str(be)),
        row.remark,
    ]


def headers(cuda: bool) -> list[str]:
    return [
        "setting",
        "compile s",
        "first step",
        "steady step",
        "recompiles",
        "graph breaks",
        "peak GPU MiB" if cuda else "peak RSS MiB",
        "break-even",
        "note",
    ]


def markdown(tune: Tune, plot_name: str | None) -> str:
    v = tune.verdict
    env = tune.environment
    one = v.repeat < 2
    lines = [
        f"# torchmend tune: {tune.spec.script.name}",
        "",
        f"**Recommended: `{v.recommended}`**: {v.reason}.",
        "",
        "| " + " | ".join(headers(v.cuda)) + " |",
        "|" + "---|" * len(headers(v.cuda)),
    ]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in cells(r, one)) + " |" for r in v.rows]
    lines.append("")
    lines += [f"- {n}" for n in v.notes]
    if vary := vary_line(tune):
        lines.append(f"- {vary}")
    lines += [f"- not run: `{name}`: {why}" for name, why in tune.skipped.items()]
    asked = {(a["backend"], a["mode"], a["dynamic"]) for r in tune.runs[:1] for a in r.asked()}
    for backend, mode, dynamic in sorted(asked, key=str):
        lines.append(f"- the script's own torch.compile call: backend={backend}, mode={mode}, dynamic={dynamic}")
    if plot_name:
        lines += ["", f"![step time per optimizer step, one line per setting]({plot_name})"]
    budget = f"--steps {tune.spec.steps}" if tune.spec.steps else "no step budget"
    lines += [
        "",
        "## How it was measured",
        "",
        f"- command: `{tune.command}`",
        f"- torch {env.get('torch')}, python {env.get('python')}; device {env.get('device')}; {env.get('date')}; "
        f"torchmend {__version__}",
        f"- {v.repeat} run{'s' * (v.repeat != 1)} per setting, interleaved (each round runs every setting once), "
        f"each in a fresh process with empty inductor/triton caches; {budget}"
        + (f", --timeout {tune.spec.timeout} s per run" if tune.spec.timeout else ""),
        "- first step: from the script's start (imports, model set-up, the first compile) to the end of its first "
        "optimizer step; steady step: the median step over the second half of a run; both the median over the runs "
        "(min–max in brackets); compile s: dynamo's compile time (entire_frame_compile_time_s) summed over frames",
        "- peak memory: "
        + ("torch.cuda.max_memory_allocated" if v.cuda else "the process's peak resident set")
        + " at the end of the run",
        "- break-even: the step count N from which compiling has paid for itself: N = 1 + ceil((F_c - F_e) / "
        "(steady_e - steady_c)), where F = the time to the last step less (steps - 1) steady steps (the first step "
        "plus every compile, recompile, autotuning and CUDA-graph recording after it), c the setting, e eager; "
        "never when its steady step is not faster",
        f"- recommended: the fastest steady step among the settings that recompile no more than default, pay off "
        f"within --horizon {v.horizon} steps and"
        + (
            " are faster than eager beyond noise (their steady-step range wholly below eager's)"
            if not one
            else " are faster than eager (one run each: no ranges to check)"
        )
        + "; eager when none does",
        "",
    ]
    return "\n".join(lines)
