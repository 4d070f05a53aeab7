"""The runs behind a tune: every setting once per repeat, interleaved (eager, default, ..., eager, default, ...),
each in its own process with its own empty inductor and triton caches, so no setting is served from another's
cache and a slow minute of a shared machine falls on every setting alike.

The first round starts with eager and default; what they show (the device, sizes that recompile) decides the
rest of the list (see tune/settings.py), which then runs in that round and every later one.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from torchmend.model import Finding, Summary
from torchmend.profiler.findings import analyse
from torchmend.profiler.numerics import DISABLE_ENV
from torchmend.profiler.runner import RunOutcome, RunSpec, run
from torchmend.tune.settings import Setting
from torchmend.values import Root

# A recompile whose guard is a tensor's size: the shapes vary, so dynamic= matters.
_SIZE_GUARD = re.compile(r"size mismatch|stride mismatch|\.size\(\)\[\d+\]|\.shape\[\d+\]")
_SIZE_RULES = ("TM204", "TM208")


@dataclass
class TuneRun:
    setting: Setting
    index: int  # 0-based repeat
    summary: Summary
    findings: list[Finding] = field(repr=False)
    outcome: RunOutcome = field(repr=False)

    @property
    def failed(self) -> bool:
        return self.outcome.ended_by.no_run

    @property
    def error(self) -> str:
        return str(self.outcome.end.get("error") or self.outcome.ended_by)

    @property
    def end(self) -> dict[str, Any]:
        return self.outcome.end

    @property
    def times(self) -> list[float]:
        """Seconds from the script's start to the end of each optimizer step."""
        return list(self.end.get("step_times") or [])

    @property
    def step_seconds(self) -> list[float]:
        """Each step's own time; the first one counts from the script's start (imports and compiles included)."""
        t = self.times
        return [t[0], *(b - a for a, b in zip(t, t[1:]))] if t else []

    @property
    def fixed_s(self) -> float | None:
        """What the run cost beyond its steady steps: the time to its last step less (steps - 1) steady steps, i.e.
        the first step and every compile, recompile, autotuning and CUDA-graph recording after it."""
        t, steady = self.times, self.summary.steady_step_s
        if not t or steady is None:
            return None
        return t[-1] - (len(t) - 1) * steady

    @property
    def cuda(self) -> bool:
        return "cuda_peak_mb" in self.end

    @property
    def peak_mb(self) -> float | None:
        """Peak GPU memory allocated by torch on CUDA, else the process's peak resident set (MiB)."""
        value = self.end.get("cuda_peak_mb", self.end.get("peak_rss_mb"))
        return float(value) if value is not None else None

    def cudagraph_skips(self) -> list[str]:
        """Why graphs of this run were left without CUDA graphs (reduce-overhead, max-autotune), as inductor said."""
        reasons = (e.get("cudagraph_skip_reason") for e in self.outcome.events if e.get("ev") == "compile_end")
        return list(dict.fromkeys(r for r in reasons if r))

    def asked(self) -> list[dict[str, Any]]:
        """What the script's own torch.compile calls asked for (the child records each call)."""
        return [
            {k: e.get(k) for k in ("backend", "mode", "dynamic", "options")}
            for e in self.outcome.events
            if e.get("ev") == "compile_call"
        ]


def shapes_vary(run: TuneRun) -> str | None:
    """Why dynamic= matters for this script, from a compiled run: a recompile whose guard is a size (the finding
    or the raw guard text), or None."""
    for f in run.findings:
        if f.rule in _SIZE_RULES or f.cause in _SIZE_RULES:
            return f"{f.rule} at {f.file}:{f.line}: {f.reason}"
    for ev in run.outcome.events:
        reason = ev.get("recompile_reason") or ""
        if ev.get("ev") == "compile_end" and _SIZE_GUARD.search(reason):
            return f"a recompile on a size guard: {reason.splitlines()[0]}"
    return None


def measure(spec: RunSpec, setting: Setting, index: int, caches: Path, root: Root) -> TuneRun:
    """One run of the script under `setting`, with empty caches under `caches` and no numerics capture (its
    fingerprints of outputs would cost time inside the steps being timed)."""
    env = (
        *spec.env,
        ("TORCHINDUCTOR_CACHE_DIR", str(caches / "inductor")),
        ("TRITON_CACHE_DIR", str(caches / "triton")),
        (DISABLE_ENV, "1"),
    )
    backend = None if setting.eager else setting.backend
    outcome = run(replace(spec, env=env, backend=backend, compile=setting.override()))
    findings, summary = analyse(outcome.events, root.path, outcome.ended_by, outcome.wall_s)
    return TuneRun(setting, index, summary, findings, outcome)


def run_settings(
    spec: RunSpec,
    root: Root,
    first: list[Setting],
    repeat: int,
    decide: Callable[[list[TuneRun]], list[Setting] | None],
    on_done: Callable[[TuneRun], None] | None = None,
    runs: list[TuneRun] | None = None,
) -> list[TuneRun]:
    """Run `first` in round 0, then `decide(runs so far)`: the settings to add, or None to stop there (nothing
    compiled); then the whole list once per further repeat. `on_done(run)` after each run. The runs are appended to `runs` as they end, so a
    caller stopped by a signal still holds the finished ones. An eager run failing in round 0 ends it (no baseline)."""
    settings = list(first)
    runs = [] if runs is None else runs
    scratch = Path(tempfile.mkdtemp(prefix="torchmend-tune-"))
    try:
        for i in range(repeat):
            j = 0
            while j < len(settings):
                setting = settings[j]
                caches = scratch / f"{i}-{j}"
                result = measure(spec, setting, i, caches, root)
                shutil.rmtree(caches, ignore_errors=True)
                runs.append(result)
                if on_done:
                    on_done(result)
                if i == 0 and setting.eager and result.failed:
                    return runs  # no baseline to compare the other settings with
                j += 1
                if i == 0 and j == len(first):
                    more = decide(runs)
                    if more is None:
                        return runs
                    settings += [s for s in more if s not in settings]
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return runs
