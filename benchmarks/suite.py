"""What a torchmend fix buys, and what the tool costs: a benchmark suite over small seeded training scripts.

    .venv/bin/python benchmarks/suite.py                       # CPU: both regimes, inductor, 3 repeats
    .venv/bin/python benchmarks/suite.py --repeat 2            # the CPU run kept in benchmarks/results/
    .venv/bin/python benchmarks/suite.py --smoke --out /tmp/s  # two scenarios, aot_eager, ~1 min
    python benchmarks/suite.py --device cuda --modes default reduce-overhead   # on a GPU machine

Each scenario under benchmarks/scenarios/<name>/ is a training script with a problem as a user writes it
(broken.py) and the fix an expert would write by hand (hand.py). Four variants of each run, interleaved
(eager, compiled, torchmend, hand, eager, ...), every run in its own process with fresh inductor and
triton caches, through torchmend's own runner (which stops the script after N optimizer steps):

  eager      broken.py with TORCH_COMPILE_DISABLE=1 (torch._dynamo.config.disable: no graph at all)
  compiled   broken.py as written
  torchmend  broken.py after `torchmend fix broken.py --yes --unsafe --no-verify --backend aot_eager` on a
             scratch copy (the committed file is never edited; the diff goes into the JSON)
  hand       hand.py

and, on a few scenarios, what the tool costs: `torchmend scan --backend aot_eager` against the plain
`python broken.py` with the same step budget, and against a scan with the script's own backend (inductor).

Writes <out>/suite-<device>-torch<X.Y>.md, .json and one PNG per regime/mode (through benchmarks/plot.py,
when matplotlib imports; otherwise it prints how to plot the JSON later, on any machine). Imports neither
torch nor matplotlib at module level: torch lives only in the child processes.
"""

from __future__ import annotations

import argparse
import datetime
import difflib
import json
import os
import platform
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
SCENARIO_DIR = HERE / "scenarios"

try:
    import torchmend  # noqa: F401
except ImportError:  # run from a checkout without installing: the repo root holds the package
    sys.path.insert(0, str(ROOT))
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)

import suite_log  # noqa: E402  (benchmarks/suite_log.py, next to this file)

from torchmend.profiler.findings import analyse  # noqa: E402
from torchmend.profiler.runner import RunSpec, run  # noqa: E402
from torchmend.values import Tolerance  # noqa: E402
from torchmend.verify.numerics import capture_of, compare  # noqa: E402

RTOL = Tolerance().rtol

VARIANTS = ("eager", "compiled", "torchmend", "hand")
REGIMES = ("overhead", "compute")
MODES = ("default", "reduce-overhead")
SMOKE_SCENARIOS = ("print_in_forward", "module_counter")
COST_SCENARIOS = ("print_in_forward", "module_counter", "item")
# Optimizer steps per run, per regime: enough for a steady second half (the runner stops the script there).
DEFAULT_STEPS = {"cpu": {"overhead": 300, "compute": 60}, "cuda": {"overhead": 500, "compute": 200}}
SMOKE_STEPS = 30
FIX_STEPS = 30  # the scan inside `torchmend fix`: module_counter needs 9 steps to reach the recompile limit
RUN_TIMEOUT_S = 900.0
TARGET_RATIO = 1.03
LOOSE_RTOL = 1e-3  # a compiled graph may reorder float math: a second, looser check of the numerics
COUNTS = ("graphs", "graph_breaks", "recompiles", "recompile_limit_hits")


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def scenario_names() -> list[str]:
    return sorted(p.name for p in SCENARIO_DIR.iterdir() if (p / "broken.py").is_file() and (p / "hand.py").is_file())


# --- the machine ------------------------------------------------------------------------------------------


def probe(python: str, device: str, rebuild: bool = False) -> dict[str, Any]:
    """torch's version and the device's name, from a child process (this one never imports torch)."""
    code = (
        "import json, sys, torch\n"
        "d = {'torch': torch.__version__, 'python': sys.version.split()[0], 'cuda': None, 'threads': "
        "torch.get_num_threads()}\n"
        "if torch.cuda.is_available():\n"
        "    d['cuda'] = torch.cuda.get_device_name(0); d['cuda_version'] = torch.version.cuda\n"
        "try:\n    import triton; d['triton'] = triton.__version__\nexcept Exception:\n    d['triton'] = None\n"
        "print(json.dumps(d))\n"
    )
    out = subprocess.run([python, "-c", code], capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"cannot import torch with {python}:\n{out.stderr[-2000:]}")
    info = json.loads(out.stdout.strip().splitlines()[-1])
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        cpu = platform.processor() or cpu
    info["cpu"] = f"{cpu}, {os.cpu_count()} cores"
    if device == "cuda" and not info.get("cuda") and not rebuild:
        raise SystemExit("--device cuda, but torch.cuda.is_available() is False in the child")
    info["device_name"] = (info["cuda"] or "?") if device == "cuda" else info["cpu"]
    return info


def torch_short(version: str) -> str:
    m = re.match(r"(\d+)\.(\d+)", version)
    return f"{m.group(1)}.{m.group(2)}" if m else version


# --- running ----------------------------------------------------------------------------------------------


def bench_env(regime: str, mode: str, device: str) -> tuple[tuple[str, str], ...]:
    return (("TM_BENCH_REGIME", regime), ("TM_BENCH_MODE", mode), ("TM_BENCH_DEVICE", device))


def compiling(on: bool) -> tuple[tuple[str, str], ...]:
    """The environment that turns torch.compile off (the eager variant), or keeps it on: TORCH_COMPILE_DISABLE=0 only
    where this process's own environment sets the variable, so that otherwise a run's environment is the one it was
    given (under the test suite's shared fork server, a run forked from it instead of a fresh interpreter)."""
    if not on:
        return (("TORCH_COMPILE_DISABLE", "1"),)
    return (("TORCH_COMPILE_DISABLE", "0"),) if "TORCH_COMPILE_DISABLE" in os.environ else ()


def fresh_caches(scratch: Path, tag: str) -> tuple[tuple[str, str], ...]:
    d = Path(tempfile.mkdtemp(prefix=f"{tag}-", dir=scratch))
    return (("TORCHINDUCTOR_CACHE_DIR", str(d / "inductor")), ("TRITON_CACHE_DIR", str(d / "triton")))


def measure(
    script: Path, steps: int, env: tuple[tuple[str, str], ...], backend: str | None, scratch: Path
) -> tuple[dict[str, Any], dict[str, Any]]:
    """One profiled run: (the JSON record, the numerics capture kept in memory for comparisons)."""
    caches = fresh_caches(scratch, "run")
    spec = RunSpec(
        script=script, steps=steps, cwd=script.parent, backend=backend, env=(*env, *caches), timeout=RUN_TIMEOUT_S
    )
    outcome = run(spec)
    shutil.rmtree(Path(caches[0][1]).parent, ignore_errors=True)
    findings, summary = analyse(outcome.events, script.parent, outcome.ended_by, outcome.wall_s)
    times = outcome.end.get("step_times") or []
    step_s = ([times[0]] + [b - a for a, b in zip(times, times[1:])]) if times else []
    failed = outcome.failed or outcome.ended_by in ("no_torch", "internal_error", "timeout")
    rec = {k: v for k, v in summary.to_json().items() if k != "torch_version"}
    rec.update(
        ok=not failed,
        step_s=[round(s, 6) for s in step_s],
        findings=sorted({(f.rule, f.file, f.line) for f in findings}),
    )
    if failed:
        rec["output_tail"] = outcome.output_tail[-3000:]
    return rec, capture_of(outcome.end)


def timed(cmd: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, int, str]:
    t0 = time.monotonic()
    try:
        out = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, check=False, timeout=RUN_TIMEOUT_S)
        rc, text = out.returncode, out.stdout + ("\n" + out.stderr if out.returncode not in (0, 6) else "")
    except subprocess.TimeoutExpired:
        rc, text = -9, "timeout"
    return time.monotonic() - t0, rc, text


def child_env(extra: tuple[tuple[str, str], ...]) -> dict[str, str]:
    env = dict(os.environ)
    env.update(extra)
    env.setdefault("COLUMNS", "200")
    return env


# --- the torchmend variant --------------------------------------------------------------------------------


def make_fix(name: str, device: str, scratch: Path) -> dict[str, Any]:
    """Copy the scenario, run `torchmend fix` on the copy, and describe what it changed."""
    work = scratch / "fixed" / name
    shutil.copytree(SCENARIO_DIR / name, work, ignore=shutil.ignore_patterns("__pycache__"))
    script = work / "broken.py"
    before = script.read_text(encoding="utf-8")
    state = scratch / "state" / name  # torchmend's undo records: kept out of the user's ~/.local/state
    cmd = [
        sys.executable,
        "-m",
        "torchmend",
        "fix",
        str(script),
        "--yes",
        "--unsafe",
        "--no-verify",
        "--backend",
        "aot_eager",
        "--steps",
        str(FIX_STEPS),
    ]
    env = child_env(
        (
            *bench_env("overhead", "default", device),
            *fresh_caches(scratch, "fix"),
            ("TORCHMEND_STATE_DIR", str(state)),
            *compiling(True),
        )
    )
    wall, rc, output = timed(cmd, work, env)
    after = script.read_text(encoding="utf-8")
    diff = "".join(
        difflib.unified_diff(
            before.splitlines(True), after.splitlines(True), f"a/{name}/broken.py", f"b/{name}/broken.py"
        )
    )
    summary = ""
    for record in sorted(state.rglob("*.json")):
        summary = "; ".join(x for x in (summary, json.loads(record.read_text()).get("summary", "")) if x)
    rules = sorted(set(re.findall(r"TM\d{3}", summary))) if summary else []
    headline = next((line.strip() for line in output.splitlines() if re.search(r"\bfindings?\b.*proposed", line)), "")
    changed_lines = sum(1 for line in diff.splitlines() if line[:1] in "+-" and not line.startswith(("+++", "---")))
    return {
        "script": str(script),
        "command": shlex.join(["torchmend", *cmd[3:]]),
        "rc": rc,
        "wall_s": round(wall, 2),
        "changed": before != after,
        "rules": rules,
        "summary": summary,
        "headline": headline,
        "diff": diff,
        "changed_lines": changed_lines,
        "output_tail": output[-3000:] if rc != 0 or before == after else "",
    }


# --- tool cost --------------------------------------------------------------------------------------------


def scan_findings(text: str) -> list[tuple[str, str, int]] | None:
    try:
        start = text.index("{")
        data = json.loads(text[start : text.rindex("}") + 1])
    except ValueError:
        return None
    return sorted({(f["rule"], f["file"], f["line"]) for f in data.get("findings", [])})


# `python broken.py` with every torch.compile call on the backend in argv[1], as torchmend's runs override it
PLAIN_ON_BACKEND = (
    "import runpy, sys; from torchmend.profiler.collector import override_backend; "
    "override_backend(sys.argv.pop(1)); sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')"
)


def cost_run(kind: str, name: str, steps: int, device: str, scratch: Path, backend: str | None) -> dict[str, Any]:
    """One tool-cost run. *plain* is `python broken.py` on the script's own backend, or on `backend` where the
    measured runs override it (the smoke run: aot_eager, no C++ compile)."""
    d = SCENARIO_DIR / name
    env = (*bench_env("overhead", "default", device), *fresh_caches(scratch, "cost"), *compiling(True))
    if kind == "plain":
        cmd = (
            [sys.executable, "broken.py"]
            if backend is None
            else [sys.executable, "-c", PLAIN_ON_BACKEND, backend, "broken.py"]
        )
        env = (*env, ("TM_BENCH_STEPS", str(steps)))
    else:
        cmd = [sys.executable, "-m", "torchmend", "scan", "broken.py", "--steps", str(steps), "--format", "json"]
        if kind == "scan_aot_eager":
            cmd += ["--backend", "aot_eager"]
    e = child_env(env)
    wall, rc, out, err, rss = suite_log.run_tree(cmd, d, e, RUN_TIMEOUT_S)
    text = out + ("\n" + err if rc not in (0, 6) else "")
    shutil.rmtree(Path(dict(env)["TORCHINDUCTOR_CACHE_DIR"]).parent, ignore_errors=True)
    rec: dict[str, Any] = {"kind": kind, "wall_s": round(wall, 3), "rc": rc, "ok": rc in (0, 6), "maxrss_kb": rss}
    if kind == "plain":
        rec["backend"] = backend  # None: the script's own
    else:
        rec["findings"] = scan_findings(text)
    if not rec["ok"]:
        rec["output_tail"] = text[-2000:]
    return rec


# --- aggregation ------------------------------------------------------------------------------------------


def med(xs: list[Any]) -> float | None:
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def spread(xs: list[float]) -> tuple[float, float, float] | None:
    xs = [x for x in xs if x is not None]
    return (statistics.median(xs), min(xs), max(xs)) if xs else None


def aggregate(runs: list[dict[str, Any]]) -> dict[str, Any]:
    ok = [r for r in runs if r["ok"]]
    agg: dict[str, Any] = {"runs": len(runs), "ok": len(ok), "ended_by": sorted({r["ended_by"] for r in runs})}
    for k in COUNTS:
        vals = sorted({r[k] for r in ok})
        agg[k] = vals[0] if len(vals) == 1 else (vals or None)  # a list when the repeats disagree
    for k in ("compile_seconds", "first_step_s", "steady_step_s", "wall_seconds"):
        s = spread([r[k] for r in ok])
        agg[k] = None if s is None else {"median": s[0], "min": s[1], "max": s[2]}
    return agg


def ratio(a: dict[str, Any] | None, b: dict[str, Any] | None) -> float | None:
    if not a or not b or not b.get("median"):
        return None
    return a["median"] / b["median"]


def summarise(cell: dict[str, Any], comparisons: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Per scenario x regime x mode: the ratios the suite is about."""
    agg = {v: cell[v] for v in VARIANTS}
    st = {v: agg[v]["steady_step_s"] for v in VARIANTS}
    t_h = ratio(st["torchmend"], st["hand"])
    counts_equal = (
        all(agg["torchmend"][k] == agg["hand"][k] for k in COUNTS)
        if agg["torchmend"]["ok"] and agg["hand"]["ok"]
        else None
    )
    overlap = None
    if st["torchmend"] and st["hand"]:
        overlap = st["torchmend"]["min"] <= st["hand"]["max"] and st["hand"]["min"] <= st["torchmend"]["max"]
    failed = [v for v in VARIANTS if agg[v]["runs"] and not agg[v]["ok"]]
    fastest = (st["torchmend"]["min"] / st["hand"]["min"]) if st["torchmend"] and st["hand"] else None
    return {
        "failed": failed,
        "torchmend_over_hand": t_h,
        "torchmend_over_hand_fastest": fastest,
        "within_target": None if t_h is None else t_h <= TARGET_RATIO,
        "ranges_overlap": overlap,
        "counts_equal": counts_equal,
        "compiled_over_torchmend": ratio(st["compiled"], st["torchmend"]),
        "eager_over_torchmend": ratio(st["eager"], st["torchmend"]),
        "compile_s_torchmend_over_hand": ratio(agg["torchmend"]["compile_seconds"], agg["hand"]["compile_seconds"]),
        "numerics": {k: [c["equal"] for c in v] for k, v in comparisons.items()},
        "numerics_loose": {k: [c["loose"] for c in v] for k, v in comparisons.items()},
        "numerics_detail": {k: v[0]["describe"] for k, v in comparisons.items() if v},
    }


# --- Markdown ---------------------------------------------------------------------------------------------


def fmt(x: float | None, digits: int = 2) -> str:
    return "—" if x is None else f"{x:.{digits}f}"


def fmt_spread(s: dict[str, float] | None, scale: float = 1.0, digits: int = 2, show_range: bool = True) -> str:
    if not s:
        return "—"
    text = f"{s['median'] * scale:.{digits}f}"
    if show_range and s["min"] != s["max"]:
        text += f" ({s['min'] * scale:.{digits}f}–{s['max'] * scale:.{digits}f})"
    return text


def fmt_count(x: Any) -> str:
    if x is None:
        return "—"
    return "/".join(map(str, x)) + " (varies)" if isinstance(x, list) else str(x)


def steady_digits(s: dict[str, float] | None) -> int:
    return 3 if s and s["median"] * 1e3 < 10 else 1


def coverage_section(data: dict[str, Any]) -> list[str]:
    """Which parts ran when (from the accumulated results file), and which planned runs are still missing."""
    meta, cfg = data["meta"], data["config"]
    if not meta.get("sessions"):
        return []
    L = ["## Which parts ran when", ""]
    L.append(
        f"Built from `{meta.get('results_file', '?')}` ({meta['runs_done']} runs; records from "
        f"{meta.get('first_record')} to {meta.get('last_record')}); every run is appended as it ends, and "
        "`--resume FILE` runs only what the file lacks. Sessions (host, hour):"
    )
    L.append("")
    L.append("| host | first | last | runs | tool-cost runs | runs at once | parts |")
    L.append("|---|---|---|---|---|---|---|")
    for s in meta["sessions"]:
        L.append(
            f"| {s['host']} | {s['first']} | {s['last']} | {s['runs']} | {s['cost']} | {s.get('at_once', 1)}"
            + (
                f" ({s['cores']} core{'s' if s['cores'] != 1 else ''} each)"
                if s.get("at_once", 1) > 1 and s.get("cores")
                else ""
            )
            + " "
            f"| {', '.join(s['parts'])} |"
        )
    L.append("")
    if any((s.get("at_once") or 1) > 1 for s in meta["sessions"]):
        L.append(
            "*Runs at once* above 1: that many suite processes shared the one GPU (`run_suite.sh` with `JOBS`). "
            "Each run held an exclusive lock from the end of its second step to its exit "
            "(`benchmarks/gpu/steplock/`), so the steady-state half every steady-step figure comes from ran "
            "alone on the GPU; the start-up and first compile of the others overlapped it, so first-step and "
            "compile seconds from those hours include that contention (the tool-cost runs always ran alone)."
        )
        L.append("")
    if meta.get("commands"):
        L.append("Commands that made the records:")
        L.append("")
        L.extend(f"- `{c}`" for c in meta["commands"])
        L.append("")
    miss = meta.get("missing") or []
    if miss:
        L.append(
            f"**Still missing** against the plan of this report ({len(cfg['scenarios'])} scenarios × "
            f"{', '.join(cfg['regimes'])} × {', '.join(cfg['modes'])} × {len(VARIANTS)} variants × "
            f"{cfg['repeat']} repeats): {len(miss)} groups"
        )
        L.append("")
        for m in miss:
            L.append(f"- {m}")
    else:
        L.append("Nothing planned is missing.")
    L.append("")
    return L


def noise_section(noise: dict[str, Any]) -> list[str]:
    if not noise:
        return []
    L = ["## How far apart one program lands (A/A control)", ""]
    L.append(
        "The eager variant runs with the compiler off, so under mode default and under mode reduce-overhead it is "
        "the same program, measured twice at different times. The ratio of its two median steady steps is what "
        "this machine's noise alone does to a ratio; a torchmend/hand ratio inside that band is no verdict either "
        "way (the tables below say so)."
    )
    L.append("")
    names = sorted({n for v in noise.values() for n in v["pairs"]})
    L.append("| regime | " + " | ".join(names) + " | band |")
    L.append("|---|" + "---|" * (len(names) + 1))
    for regime, v in noise.items():
        cells = [fmt(v["pairs"].get(n), 3) for n in names]
        L.append(f"| {regime} | " + " | ".join(cells) + f" | ±{v['max_dev'] * 100:.0f} % |")
    L.append("")
    return L


def markdown(data: dict[str, Any], pngs: list[str]) -> str:
    meta, cfg = data["meta"], data["config"]
    L: list[str] = []
    L.append(
        f"# torchmend benchmark suite: {meta['device']} ({meta['device_name']}), torch {meta['torch']}, "
        f"{meta['date'][:10]}"
    )
    L.append("")
    L.append(
        f"> **This machine is shared and noisy** ({meta['host_note']}): absolute seconds move from run to "
        "run and between machines. Compare only ratios taken within this same run (the four variants of a "
        "scenario ran interleaved, each in a fresh process with fresh inductor/triton caches); read the "
        "min–max ranges before trusting a ratio near 1."
    )
    L.append("")
    if meta.get("interrupted"):
        L.append(
            f"> **Interrupted**: {meta['runs_done']} of {meta['runs_planned']} runs made; the tables hold "
            "those alone (a scenario missing a variant has no ratio)."
        )
        L.append("")
    L.append(
        f"- device: {meta['device']}: {meta['device_name']}"
        + (f"; host CPU {meta['cpu']}" if meta["device"] == "cuda" else "")
    )
    L.append(
        f"- torch {meta['torch']}"
        + (f", CUDA {meta['cuda_version']}" if meta.get("cuda_version") else "")
        + (f", triton {meta['triton']}" if meta.get("triton") else "")
        + f"; python {meta['python']}; "
        f"torch threads {meta['threads']}"
    )
    L.append(f"- date: {meta['date']}; total wall time {meta['total_wall_s'] / 60:.1f} min")
    L.append(f"- command: `{meta['command']}`")
    steps = ", ".join(f"{r} {cfg['steps'][r]}" for r in cfg["regimes"])
    L.append(
        f"- repeat {cfg['repeat']} per variant; optimizer steps per run: {steps}; backend: "
        f"{cfg['backend'] or 'the scripts’ own (inductor)'}; modes: {', '.join(cfg['modes'])}"
    )
    for note in cfg.get("notes", []):
        L.append(f"- note: {note}")
    L.append("")
    L.append(
        "Variants: **eager** = broken.py with `TORCH_COMPILE_DISABLE=1`; **compiled** = broken.py as written; "
        "**torchmend** = broken.py after `torchmend fix --yes --unsafe --no-verify --backend aot_eager` "
        f"(a scratch copy, fixed once per scenario with the overhead regime, {FIX_STEPS} steps); "
        "**hand** = hand.py. Steady step = median step time over the second half of a run's steps "
        "(median over the repeats, min–max in brackets); first step counts from the script's start "
        "(imports and compiles included). Counts are per run (they do not vary between repeats unless "
        "marked)."
    )
    L.append("")

    L.extend(coverage_section(data))
    if data["fixes"]:
        L.append("## What `torchmend fix` changed")
        L.append("")
        L.append("| scenario | rules applied | lines changed (+/−) | fix wall s | what fix said |")
        L.append("|---|---|---|---|---|")
    for name, fx in data["fixes"].items():
        rules = ", ".join(fx["rules"]) if fx["changed"] else "**nothing fixed**"
        L.append(
            f"| {name} | {rules} | {fx['changed_lines']} | {fmt(fx['wall_s'], 1)} | {fx['headline'] or '—'}"
            + (f" (exit {fx['rc']})" if fx["rc"] else "")
            + " |"
        )
    L.append("")

    L.extend(noise_section(meta.get("noise") or {}))
    for key, block in data["cells"].items():
        regime, mode = key.split("/")
        L.append(f"## {regime} regime, mode {mode}: torchmend against the hand fix")
        L.append("")
        L.append(
            f'torchmend/hand is the ratio of the median steady steps (target ≤ {TARGET_RATIO}; "ranges overlap": '
            "the two min–max ranges over the repeats overlap, so the difference is within this machine's "
            "noise); *fastest* is the ratio of the fastest repeats, less sensitive to a burst of load on a "
            "shared machine. compiled/torchmend and eager/torchmend say what the fix buys over the script "
            "as written and over no compile at all."
        )
        L.append("")
        L.append(
            "| scenario | torchmend/hand steady | ≤ 1.03 | fastest | counts torchmend = hand | compiled/torchmend | "
            "eager/torchmend | compile s torchmend/hand | numerics torchmend vs hand |"
        )
        L.append("|---|---|---|---|---|---|---|---|---|")
        for name, cell in block.items():
            s = cell["summary"]
            target = target_verdict(s, meta.get("noise", {}).get(regime))
            counts = "—" if s["counts_equal"] is None else ("yes" if s["counts_equal"] else "**no**")
            num = s["numerics"].get("torchmend_vs_hand") or []
            detail = s["numerics_detail"].get("torchmend_vs_hand", "")
            if not num:
                numerics = "—"
            elif all(num):
                numerics = "match"
            elif all(s["numerics_loose"]["torchmend_vs_hand"]):
                numerics = f"match at rtol {LOOSE_RTOL:g}, not {RTOL:g} ({detail})"
            else:
                numerics = f"**differ** ({detail})"
            if s.get("failed"):
                L.append(
                    f"| {name} | **{', '.join(s['failed'])} failed** (see Failed runs) | — | — | — | "
                    f"{fmt(s['compiled_over_torchmend'])} | {fmt(s['eager_over_torchmend'])} | — | — |"
                )
                continue
            L.append(
                f"| {name} | {fmt(s['torchmend_over_hand'], 3)} | {target} | "
                f"{fmt(s.get('torchmend_over_hand_fastest'), 3)} | {counts} | "
                f"{fmt(s['compiled_over_torchmend'])} | {fmt(s['eager_over_torchmend'])} | "
                f"{fmt(s['compile_s_torchmend_over_hand'])} | {numerics} |"
            )
        L.append("")
        L.append(f"### {regime} / {mode}: every variant")
        L.append("")
        L.append(
            "| scenario | variant | graphs | breaks | recompiles | limit hits | compile s | first step s | "
            "steady step ms | ended |"
        )
        L.append("|---|---|---|---|---|---|---|---|---|---|")
        for name, cell in block.items():
            digits = steady_digits(cell["hand"]["steady_step_s"])
            for v in VARIANTS:
                a = cell[v]
                ended = ", ".join(a["ended_by"]) + ("" if a["ok"] == a["runs"] else f" ({a['runs'] - a['ok']} failed)")
                L.append(
                    f"| {name} | {v} | {fmt_count(a['graphs'])} | {fmt_count(a['graph_breaks'])} | "
                    f"{fmt_count(a['recompiles'])} | {fmt_count(a['recompile_limit_hits'])} | "
                    f"{fmt_spread(a['compile_seconds'], show_range=False)} | "
                    f"{fmt_spread(a['first_step_s'], show_range=False)} | "
                    f"{fmt_spread(a['steady_step_s'], 1e3, digits)} | {ended} |"
                )
        L.append("")

    if data.get("cost"):
        c = data["cost"]
        L.append("## What the tool costs")
        L.append("")
        L.append(
            f"Overhead regime, mode default, {c['steps']} optimizer steps, {c['repeat']} interleaved repeats "
            "(plain, scan aot_eager, scan inductor), medians of wall seconds. *plain* is `python broken.py` "
            "with the same step budget and "
            + (
                "the script's own backend (inductor): what the user pays without torchmend"
                if not c.get("plain_backend")
                else f"every torch.compile on {c['plain_backend']} (this run's --backend, not the script's own)"
            )
            + ". *scan aot_eager* is `torchmend scan --backend aot_eager`; *scan inductor* "
            "is `torchmend scan` with the script's own backend. Same findings = the same (rule, file, line) set."
        )
        L.append("")
        L.append(
            "| scenario | plain s | scan aot_eager s | scan inductor s | scan aot_eager / plain | "
            "scan aot_eager / scan inductor | same findings | findings (aot_eager) |"
        )
        L.append("|---|---|---|---|---|---|---|---|")
        rss_rows = []
        for name, row in c["scenarios"].items():
            same = row["same_findings"]
            L.append(
                f"| {name} | {fmt(row['plain_s'], 1)} | {fmt(row['scan_aot_eager_s'], 1)} | "
                f"{fmt(row['scan_inductor_s'], 1)} | {fmt(row['aot_over_plain'])} | "
                f"{fmt(row['aot_over_inductor'])} | {'—' if same is None else ('yes' if same else '**no**')} | "
                f"{', '.join(f'{r} {f}:{ln}' for r, f, ln in row['findings_aot_eager'] or []) or '—'} |"
            )
            if row.get("plain_rss_mib"):
                rss_rows.append(
                    f"| {name} | {fmt(row['plain_rss_mib'], 0)} | {fmt(row.get('scan_inductor_rss_mib'), 0)} | "
                    f"{fmt(row.get('scan_aot_eager_rss_mib'), 0)} | {fmt(row.get('rss_scan_inductor_over_plain'))} | "
                    f"{fmt(row.get('rss_scan_aot_eager_over_plain'))} |"
                )
        L.append("")
        if rss_rows:
            L.append(
                "Peak memory (RSS, MiB, median over the repeats): the process tree of each command as the kernel "
                "counts it (os.wait4 on the command: its own peak and that of every child it waited for, so "
                "the scan's figure is the larger of the torchmend parent, which imports no torch, and the "
                "profiled script's child; inductor's compile workers count in both). Target: scan (the script's "
                "backend) / plain ≤ 1.1."
            )
            L.append("")
            L.append(
                "| scenario | plain | scan, script's backend | scan aot_eager | scan (own backend) / plain | "
                "scan aot_eager / plain |"
            )
            L.append("|---|---|---|---|---|---|")
            L.extend(rss_rows)
            L.append("")
        if any(not r["same_findings"] for r in c["scenarios"].values() if r["same_findings"] is not None):
            L.append("Where the findings differ:")
            L.append("")
            for name, row in c["scenarios"].items():
                if row["same_findings"] is False:
                    L.append(f"- {name}: aot_eager {row['findings_aot_eager']}; inductor {row['findings_inductor']}")
            L.append("")

    if pngs:
        L.append("## Step times")
        L.append("")
        L.append(
            "Per-step wall time of the first repeat (ms, log scale): compiled as written against the "
            "torchmend-fixed and hand-fixed scripts; recompiles show as spikes."
        )
        L.append("")
        for p in pngs:
            L.append(f"![{p}]({p})")
            L.append("")

    if data["fixes"]:
        L.append("## The torchmend diffs")
        L.append("")
    for name, fx in data["fixes"].items():
        L.append(f"<details><summary>{name}: {', '.join(fx['rules']) or 'no change'}</summary>")
        L.append("")
        L.append("```diff")
        L.append(fx["diff"].rstrip() or "(no change)")
        L.append("```")
        L.append("</details>")
        L.append("")
    failures = [r for r in data["runs"] if not r["ok"]]
    if failures:
        L.append("## Failed runs")
        L.append("")
        for r in failures:
            lines = [ln for ln in (r.get("output_tail") or "").splitlines() if ln.strip()]
            last = next(
                (ln for ln in reversed(lines) if re.match(r"[\w.]*(Error|Exception)\b", ln)), lines[-1] if lines else ""
            )
            L.append(
                f"- {r['regime']}/{r['mode']} {r['scenario']} {r['variant']} repeat {r['repeat']}: "
                f"ended by {r['ended_by']}: `{last.strip()[:300]}`"
            )
            L.append("")
            L.append("```")
            L.append((r.get("output_tail") or "").strip()[-1500:])
            L.append("```")
        L.append("")
    return "\n".join(L)


# --- main -------------------------------------------------------------------------------------------------


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--out", type=Path, default=HERE / "results", help="output directory (default benchmarks/results)")
    p.add_argument("--repeat", type=int, default=3, help="runs per variant, interleaved (default 3)")
    p.add_argument(
        "--steps",
        type=int,
        default=None,
        help="optimizer steps per run, all regimes (default: cpu overhead 300, compute 60; "
        "cuda overhead 500, compute 200)",
    )
    p.add_argument("--regimes", nargs="+", choices=REGIMES, default=list(REGIMES))
    p.add_argument(
        "--modes",
        nargs="+",
        choices=MODES,
        default=["default"],
        help="torch.compile modes; reduce-overhead (CUDA graphs) runs on cuda only",
    )
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument(
        "--backend",
        default=None,
        help="override every torch.compile backend in the measured runs (aot_eager: quick). "
        "Default: the scripts' own (inductor)",
    )
    p.add_argument("--scenarios", nargs="+", default=None, help=f"default: all ({', '.join(scenario_names())})")
    p.add_argument(
        "--cost-scenarios",
        nargs="*",
        default=None,
        help=f"scenarios for the tool-cost runs (default {' '.join(COST_SCENARIOS)}; 'all'; none: skip)",
    )
    p.add_argument("--no-cost", action="store_true", help="skip the tool-cost runs")
    p.add_argument("--no-plot", action="store_true", help="write no PNG")
    p.add_argument(
        "--resume",
        type=Path,
        default=None,
        metavar="FILE",
        help="the accumulating results file (JSONL): skip every run it holds already, append the new ones, "
        "and build the report from all of it (without: a fresh <out>/<stem>.jsonl)",
    )
    p.add_argument(
        "--results", type=Path, default=None, help="results file for a fresh run (default <out>/<stem>.jsonl)"
    )
    p.add_argument("--budget-s", type=float, default=None, help="start no run that would end past this many seconds")
    p.add_argument(
        "--only",
        nargs="+",
        default=None,
        metavar="PATTERN",
        help="run only the groups 'scenario/regime/mode' matching one of these (fnmatch: 'item/*', "
        "'*/compute/reduce-overhead'); the tool cost is 'scenario/cost/default'",
    )
    p.add_argument("--shard", default=None, metavar="K/N", help="run the K-th of N slices of the (remaining) plan")
    p.add_argument(
        "--concurrent",
        type=int,
        default=1,
        metavar="N",
        help="N suite processes share this device at once (benchmarks/gpu/run_suite.sh JOBS=N, each run's "
        "steady half under the step lock): recorded with every run and shown in the report (default 1)",
    )
    p.add_argument("--parts", nargs="+", choices=("variants", "cost"), default=["variants", "cost"], help="what to run")
    p.add_argument(
        "--fixed-dir",
        type=Path,
        default=None,
        help="take the torchmend variant from DIR/<scenario>/broken.py and fix.json (made where libcst is "
        "installed: benchmarks/gpu/prepare.py) instead of running `torchmend fix` here",
    )
    p.add_argument("--stem", default=None, help="name of the report files (default suite-<device>-torch<X.Y>)")
    p.add_argument("--rebuild", action="store_true", help="run nothing: rebuild the report from --resume FILE")
    p.add_argument(
        "--smoke",
        action="store_true",
        help=f"quick check: {', '.join(SMOKE_SCENARIOS)}, overhead regime, aot_eager, repeat 1, "
        f"{SMOKE_STEPS} steps, tool cost on {SMOKE_SCENARIOS[0]}",
    )
    args = p.parse_args(argv)
    if args.smoke:
        args.scenarios = args.scenarios or list(SMOKE_SCENARIOS)
        args.regimes = ["overhead"]
        args.modes = ["default"]
        args.backend = args.backend or "aot_eager"
        args.repeat = 1 if "--repeat" not in (argv or sys.argv) else args.repeat
        args.steps = args.steps or SMOKE_STEPS
        if args.cost_scenarios is None:
            args.cost_scenarios = [SMOKE_SCENARIOS[0]]
    known = scenario_names()
    args.scenarios = args.scenarios or known
    bad = [s for s in args.scenarios if s not in known]
    if bad:
        p.error(f"unknown scenario(s) {bad}; known: {known}")
    if args.no_cost:
        args.cost_scenarios = []
    elif args.cost_scenarios is None:
        args.cost_scenarios = [s for s in COST_SCENARIOS if s in args.scenarios] or args.scenarios[:1]
    elif args.cost_scenarios == ["all"]:
        args.cost_scenarios = list(args.scenarios)
    bad = [s for s in args.cost_scenarios if s not in known]
    if bad:
        p.error(f"unknown cost scenario(s) {bad}")
    if args.repeat < 1:
        p.error("--repeat must be at least 1")
    try:
        args.shard = suite_log.parse_shard(args.shard)
    except ValueError as e:
        p.error(str(e))
    if args.rebuild and not args.resume:
        p.error("--rebuild needs --resume FILE")
    return args


STOP: list[bool] = []  # non-empty once SIGTERM/SIGINT asked the suite to stop: it then writes what it has


def _on_signal(signum: int, frame: Any) -> None:
    STOP.append(True)
    raise KeyboardInterrupt  # the runner stops its child on this and returns; the loops then end


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    t_start = time.monotonic()
    notes: list[str] = []
    modes = list(args.modes)
    if "reduce-overhead" in modes and args.device != "cuda":
        modes.remove("reduce-overhead")
        notes.append("mode reduce-overhead (CUDA graphs) skipped: it runs on cuda only")
    if "reduce-overhead" in modes and args.backend not in (None, "inductor"):
        modes.remove("reduce-overhead")
        notes.append(f"mode reduce-overhead skipped: --backend {args.backend} drops torch.compile's mode")
    if not modes:
        raise SystemExit("no mode left to run")
    info = probe(sys.executable, args.device, args.rebuild)
    if args.rebuild:  # the report of records made elsewhere (the GPU machine): describe that machine
        theirs = [r for r in suite_log.load(args.resume) if r.get("device") == args.device and r.get("torch")]
        if theirs:
            info.update(torch=theirs[-1]["torch"], device_name=theirs[-1].get("device_name") or "?")
            info["cuda_version"] = theirs[-1].get("cuda_version")
            info["cpu"] = theirs[-1].get("cpu") or info["cpu"]
    steps = {r: args.steps or DEFAULT_STEPS[args.device][r] for r in args.regimes}
    stem = args.stem or f"suite-{args.device}-torch{torch_short(info['torch'])}" + ("-smoke" if args.smoke else "")
    args.out.mkdir(parents=True, exist_ok=True)
    exe = Path(sys.executable)
    exe_shown = os.path.relpath(exe, Path.cwd()) if Path.cwd() in exe.parents else "python"
    command = shlex.join(
        [exe_shown, os.path.relpath(__file__, Path.cwd()), *(argv if argv is not None else sys.argv[1:])]
    )
    host_note = (
        f"{info['cpu']}; no other load controlled"
        if args.device == "cpu"
        else f"a lent GPU machine, host {info['cpu']}"
    )
    meta = {
        "device": args.device,
        "device_name": info["device_name"],
        "cpu": info["cpu"],
        "torch": info["torch"],
        "cuda_version": info.get("cuda_version"),
        "triton": info.get("triton"),
        "python": info["python"],
        "threads": info["threads"],
        "host_note": host_note,
        "command": command,
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "platform": platform.platform(),
    }
    config = {
        "scenarios": args.scenarios,
        "regimes": args.regimes,
        "modes": modes,
        "repeat": args.repeat,
        "steps": steps,
        "backend": args.backend,
        "fix_steps": FIX_STEPS,
        "smoke": args.smoke,
        "cost_scenarios": args.cost_scenarios,
        "notes": notes,
        "target_ratio": TARGET_RATIO,
        "parts": list(args.parts),
        "stem": stem,
    }
    log(
        f"{stem}: {len(args.scenarios)} scenarios x {len(args.regimes)} regimes x {len(modes)} modes x "
        f"{len(VARIANTS)} variants x {args.repeat} repeats; steps {steps}; backend {args.backend or 'own'}"
    )

    results = args.resume or args.results or args.out / f"{stem}.jsonl"
    if not args.resume and results.exists() and not args.rebuild:
        results.unlink()  # a fresh run starts a fresh file; --resume FILE accumulates into FILE
    base = {
        "device": args.device,
        "torch": info["torch"],
        "backend": args.backend,
        "device_name": info["device_name"],
        "host": platform.node(),
        "cuda_version": info.get("cuda_version"),
        "cpu": info["cpu"],
        "command": command,
        "concurrent": args.concurrent,
        # fewer than the host has: pinned (run_suite.sh JOBS > 1); Linux only
        "cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
    }
    if not args.rebuild:
        execute(args, modes, steps, base, results, t_start)
    records = [
        r
        for r in suite_log.load(results)
        if (r.get("device"), r.get("torch"), r.get("backend")) == tuple(base[k] for k in ("device", "torch", "backend"))
    ]
    meta["total_wall_s"] = round(time.monotonic() - t_start, 1)
    meta["interrupted"] = bool(STOP)
    meta["results_file"] = str(results.relative_to(Path.cwd()) if results.is_relative_to(Path.cwd()) else results)
    data = build(records, meta, config)
    json_path = args.out / f"{stem}.json"
    json_path.write_text(json.dumps(data, indent=1), encoding="utf-8")

    pngs: list[str] = []
    if not args.no_plot:
        try:
            import plot  # benchmarks/plot.py; imports matplotlib lazily

            pngs = [p.name for p in plot.plot(data, args.out)]
        except ImportError as e:
            log(
                f"no plots ({e}); plot later, where matplotlib is installed:\n    python benchmarks/plot.py {json_path}"
            )
    md_path = args.out / f"{stem}.md"
    md_path.write_text(markdown(data, pngs), encoding="utf-8")
    log(
        f"wrote {md_path}, {json_path}"
        + "".join(f", {args.out / p}" for p in pngs)
        + f" from {len(records)} records of {results} in {meta['total_wall_s'] / 60:.1f} min"
    )
    left = data["meta"]["missing"]
    log(f"still missing: {len(left)} groups" + "".join(f"\n    {m}" for m in left[:40]) if left else "nothing missing")
    return 130 if STOP else 0


def load_fixes(names: list[str], fixed_dir: Path) -> dict[str, dict[str, Any]]:
    """The torchmend variant made beforehand (benchmarks/gpu/prepare.py, where libcst is installed)."""
    fixes = {}
    for name in names:
        fx = json.loads((fixed_dir / name / "fix.json").read_text(encoding="utf-8"))
        fx["script"] = str(fixed_dir / name / "broken.py")
        fixes[name] = fx
    return fixes


def execute(
    args: argparse.Namespace,
    modes: list[str],
    steps: dict[str, int],
    base: dict[str, Any],
    results: Path,
    t_start: float,
) -> None:
    """Run what the plan and the slice ask for and the results file lacks, appending each run as it ends."""
    done = suite_log.done_keys(suite_log.load(results))
    budget = suite_log.Budget(args.budget_s)
    stamp = {"ts": lambda: datetime.datetime.now().astimezone().isoformat(timespec="seconds")}
    groups = [
        (f"{name}/{regime}/{mode}", regime, mode, rep, name)
        for regime in args.regimes
        for mode in modes
        for rep in range(args.repeat)
        for name in args.scenarios
    ]
    wanted = set(suite_log.select(list(dict.fromkeys(g[0] for g in groups)), args.only, None))
    plan = [
        (g, regime, mode, rep, name, variant)
        for g, regime, mode, rep, name in groups
        if g in wanted and "variants" in args.parts
        for variant in VARIANTS
        if suite_log.key_of(
            {
                **base,
                "kind": "run",
                "steps": steps[regime],
                "scenario": name,
                "regime": regime,
                "mode": mode,
                "variant": variant,
                "repeat": rep,
            }
        )
        not in done
    ]
    # Shards split the groups that still lack runs (not all groups: finished ones would unbalance them); the
    # four variants of a group stay in one process, interleaved.
    picked = set(suite_log.select(list(dict.fromkeys(p[0] for p in plan)), None, args.shard))
    plan = [p[1:] for p in plan if p[0] in picked]
    cost_steps = steps.get("overhead", args.steps or DEFAULT_STEPS[args.device]["overhead"])
    cost_kinds = ("plain", "scan_aot_eager") if args.smoke else ("plain", "scan_aot_eager", "scan_inductor")
    cost_plan = [
        (rep, name, kind)
        for rep in range(args.repeat)
        for name in args.cost_scenarios
        if "cost" in args.parts and suite_log.select([f"{name}/cost/default"], args.only, None)
        for kind in cost_kinds
        if suite_log.key_of(
            {
                **base,
                "kind": "cost",
                "steps": cost_steps,
                "scenario": name,
                "regime": "overhead",
                "mode": "default",
                "variant": kind,
                "repeat": rep,
            }
        )
        not in done
    ]
    if args.shard:  # the cost runs are a slice of their own: spread them over the shards too
        k, n = args.shard
        cost_plan = cost_plan[k - 1 :: n]
    log(f"{len(plan)} runs and {len(cost_plan)} tool-cost runs to make; {len(done)} records in {results} already")
    scratch = Path(tempfile.mkdtemp(prefix="torchmend-suite-"))
    try:
        # 1. the torchmend variant: fix a scratch copy of each scenario (or take the copies made beforehand)
        names = sorted({p[3] for p in plan})
        if args.fixed_dir:
            fixes = load_fixes(names, args.fixed_dir)
        else:
            fixes = {}
            for name in names:
                fixes[name] = fx = make_fix(name, args.device, scratch)
                log(f"fix {name}: {', '.join(fx['rules']) or 'NOTHING FIXED'} ({fx['wall_s']:.1f} s, exit {fx['rc']})")
        have_fix = {(r.get("scenario")) for r in suite_log.load(results) if r.get("kind") == "fix"}
        for name, fx in fixes.items():
            if name not in have_fix:
                kept = {k: v for k, v in fx.items() if k != "script"}
                suite_log.append(results, {**base, "kind": "fix", "scenario": name, "ts": stamp["ts"](), **kept})

        # 2. the four variants, interleaved
        scripts = {(n, "eager"): SCENARIO_DIR / n / "broken.py" for n in names}
        scripts.update({(n, "compiled"): SCENARIO_DIR / n / "broken.py" for n in names})
        scripts.update({(n, "torchmend"): Path(fixes[n]["script"]) for n in names})
        scripts.update({(n, "hand"): SCENARIO_DIR / n / "hand.py" for n in names})
        for i, (regime, mode, rep, name, variant) in enumerate(plan, 1):
            if not budget.allows():
                log(f"budget: {args.budget_s:.0f} s would be passed; stopping after {i - 1} of {len(plan)} runs")
                return
            env = (*bench_env(regime, mode, args.device), *compiling(variant != "eager"))
            t0 = time.monotonic()
            try:
                rec, cap = measure(scripts[name, variant], steps[regime], env, args.backend, scratch)
            except KeyboardInterrupt:
                STOP.append(True)
            if STOP:  # a stopped run is no measurement: leave it out
                STOP.append(True)
                log(f"interrupted after {i - 1} of {len(plan)} runs")
                return
            budget.took(time.monotonic() - t0)
            rec.update(
                base,
                kind="run",
                ts=stamp["ts"](),
                steps=steps[regime],
                scenario=name,
                regime=regime,
                mode=mode,
                variant=variant,
                repeat=rep,
                capture=cap,
            )
            suite_log.append(results, rec)
            st = rec["steady_step_s"]
            log(
                f"[{i}/{len(plan)} {(time.monotonic() - t_start) / 60:.1f} min] {regime}/{mode} {name} {variant} "
                f"#{rep}: {rec['wall_seconds']:.1f} s, graphs {rec['graphs']} breaks {rec['graph_breaks']} "
                f"recompiles {rec['recompiles']} limit {rec['recompile_limit_hits']}, steady "
                f"{'—' if st is None else f'{st * 1e3:.3f} ms'}, {rec['ended_by']}"
                + ("" if rec["ok"] else f"\n{rec.get('output_tail', '')[-1500:]}")
            )

        # 3. what the tool costs
        for rep, name, kind in cost_plan:
            if STOP or not budget.allows():
                log("budget or a signal: the remaining tool-cost runs are left for the next call")
                return
            t0 = time.monotonic()
            try:
                # the smoke run's plain runs on its backend too (aot_eager: no C++ compile, 35 of its 80 s); a full run's
                # plain is what the user pays, on the script's own backend, whatever the measured runs override
                plain_backend = args.backend if args.smoke else None
                rec = cost_run(kind, name, cost_steps, args.device, scratch, plain_backend)
            except KeyboardInterrupt:
                STOP.append(True)
                return
            budget.took(time.monotonic() - t0)
            rec.update(
                base,
                kind="cost",
                variant=rec.pop("kind"),
                ts=stamp["ts"](),
                steps=cost_steps,
                scenario=name,
                regime="overhead",
                mode="default",
                repeat=rep,
            )
            suite_log.append(results, rec)
            log(
                f"[cost {time.monotonic() - t_start:.0f} s] {name} {kind} #{rep}: {rec['wall_s']:.1f} s, "
                f"peak RSS {(rec['maxrss_kb'] or 0) / 1024:.0f} MiB" + ("" if rec["ok"] else f" (exit {rec['rc']})")
            )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def build(records: list[dict[str, Any]], meta: dict[str, Any], config: dict[str, Any]) -> dict[str, Any]:
    """The report's data (the shape of the suite's JSON) from the accumulated records."""
    runs = [r for r in records if r.get("kind") == "run"]
    fixes: dict[str, dict[str, Any]] = {}
    for r in records:
        if r.get("kind") == "fix":
            fixes.setdefault(r["scenario"], {k: v for k, v in r.items() if k not in ("schema", "kind")})
    for fx in fixes.values():
        fx["script"] = f"<scratch>/{fx['scenario']}/broken.py"
    captures = {(r["regime"], r["mode"], r["scenario"], r["variant"], r["repeat"]): r.get("capture") for r in runs}
    regimes = list(dict.fromkeys([*config["regimes"], *(r["regime"] for r in runs)]))
    modes = list(dict.fromkeys([*config["modes"], *(r["mode"] for r in runs)]))
    names = sorted({*config["scenarios"], *(r["scenario"] for r in runs)})
    cells: dict[str, dict[str, Any]] = {}
    for regime in regimes:
        for mode in modes:
            block: dict[str, Any] = {}
            for name in names:
                mine = [r for r in runs if (r["regime"], r["mode"], r["scenario"]) == (regime, mode, name)]
                if not mine:
                    continue
                cell: dict[str, Any] = {v: aggregate([r for r in mine if r["variant"] == v]) for v in VARIANTS}
                comps: dict[str, list[dict[str, Any]]] = {}
                for label, a, b in (
                    ("torchmend_vs_hand", "torchmend", "hand"),
                    ("compiled_vs_torchmend", "compiled", "torchmend"),
                ):
                    for rep in sorted({r["repeat"] for r in mine}):
                        ok = {r["variant"] for r in mine if r["repeat"] == rep and r["ok"]}
                        ca = captures.get((regime, mode, name, a, rep)) or {}
                        cb = captures.get((regime, mode, name, b, rep)) or {}
                        if {a, b} <= ok and ca.get("losses") and cb.get("losses"):
                            c = compare(ca, cb)
                            loose = c.equal or compare(ca, cb, Tolerance(rtol=LOOSE_RTOL)).equal
                            comps.setdefault(label, []).append(
                                {"equal": c.equal, "loose": loose, "describe": c.describe()}
                            )
                cell["summary"] = summarise(cell, comps)
                cell["coverage"] = coverage(mine, config["repeat"])
                block[name] = cell
            if block:
                cells[f"{regime}/{mode}"] = block
    cost = build_cost([r for r in records if r.get("kind") == "cost"], config)
    meta = {**meta, "noise": noise_control(cells)}
    slim_runs = [{k: v for k, v in r.items() if k not in ("capture", "schema")} for r in runs]
    dates = sorted(r["ts"] for r in records if r.get("ts"))
    meta = {**meta, "first_record": dates[0] if dates else None, "last_record": dates[-1] if dates else None}
    meta["runs_done"] = len(runs)
    meta["runs_planned"] = (
        len(config["scenarios"]) * len(config["regimes"]) * len(config["modes"]) * len(VARIANTS) * config["repeat"]
    )
    if "variants" not in config.get("parts", ("variants",)):
        meta["runs_planned"] = len(runs)
    meta["sessions"] = sessions(records)
    meta["commands"] = list(dict.fromkeys(r["command"] for r in records if r.get("command")))
    meta["missing"] = missing(runs, config)
    return {
        "schema": "torchmend.bench-suite/2",
        "stem": config["stem"],
        "meta": meta,
        "config": config,
        "fixes": fixes,
        "cells": cells,
        "runs": slim_runs,
        "cost": cost,
    }


def noise_control(cells: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """An A/A check per regime, from runs the suite makes anyway: the eager variant runs with the compiler off,
    so under mode default and under mode reduce-overhead it is the same program measured twice. The ratio of its
    two median steady steps, per scenario, shows how far two measurements of one program land apart here; a
    torchmend/hand ratio inside that band says nothing either way."""
    out: dict[str, Any] = {}
    regimes = {k.split("/")[0] for k in cells}
    for regime in sorted(regimes):
        a, b = cells.get(f"{regime}/default"), cells.get(f"{regime}/reduce-overhead")
        if not a or not b:
            continue
        pairs = {}
        for name in sorted(set(a) & set(b)):
            r = ratio(a[name]["eager"]["steady_step_s"], b[name]["eager"]["steady_step_s"])
            if r is not None:
                pairs[name] = r
        if pairs:
            out[regime] = {"pairs": pairs, "max_dev": max(abs(r - 1) for r in pairs.values())}
    return out


def target_verdict(s: dict[str, Any], noise: dict[str, Any] | None) -> str:
    """The ≤ target column: yes, or no with how much weight the 'no' carries on this machine."""
    if s["within_target"] is None:
        return "—"
    if s["within_target"]:
        return "yes"
    if noise and abs(s["torchmend_over_hand"] - 1) <= noise["max_dev"]:
        return f"no (inside the A/A band ±{noise['max_dev'] * 100:.0f} %)"
    return "no (ranges overlap)" if s["ranges_overlap"] else "**no**"


def coverage(runs: list[dict[str, Any]], target: int) -> dict[str, Any]:
    stamps = sorted(r["ts"] for r in runs if r.get("ts"))
    per = {v: len({r["repeat"] for r in runs if r["variant"] == v}) for v in VARIANTS}
    return {
        "repeats": per,
        "target": target,
        "first": stamps[0] if stamps else None,
        "last": stamps[-1] if stamps else None,
    }


def sessions(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Which parts ran when: records grouped by host and day-hour, in order."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for r in records:
        if not r.get("ts") or r.get("kind") == "fix":
            continue
        k = (r.get("host") or "?", r["ts"][:13])
        s = out.setdefault(
            k, {"host": k[0], "first": r["ts"], "last": r["ts"], "runs": 0, "cost": 0, "parts": set(), "at_once": 1}
        )
        s["first"], s["last"] = min(s["first"], r["ts"]), max(s["last"], r["ts"])
        s["at_once"] = max(s["at_once"], r.get("concurrent") or 1)
        if r.get("cores"):
            s["cores"] = min(s.get("cores", r["cores"]), r["cores"])
        s["runs" if r["kind"] == "run" else "cost"] += 1
        s["parts"].add(f"{r['regime']}/{r['mode']}" if r["kind"] == "run" else "tool cost")
    return [{**s, "parts": sorted(s["parts"])} for s in sorted(out.values(), key=lambda s: s["first"])]


def missing(runs: list[dict[str, Any]], config: dict[str, Any]) -> list[str]:
    """'scenario/regime/mode: k of n runs' for each planned group that has fewer runs than planned."""
    if "variants" not in config.get("parts", ("variants",)):
        return []
    have: dict[tuple[str, str, str], set[tuple[str, int]]] = {}
    for r in runs:
        have.setdefault((r["scenario"], r["regime"], r["mode"]), set()).add((r["variant"], r["repeat"]))
    want = len(VARIANTS) * config["repeat"]
    out = []
    for regime in config["regimes"]:
        for mode in config["modes"]:
            for name in config["scenarios"]:
                got = len({x for x in have.get((name, regime, mode), set()) if x[1] < config["repeat"]})
                if got < want:
                    out.append(f"{name}/{regime}/{mode}: {got} of {want} runs")
    return out


def build_cost(runs: list[dict[str, Any]], config: dict[str, Any]) -> dict[str, Any] | None:
    if not runs:
        return None
    kinds = [k for k in ("plain", "scan_aot_eager", "scan_inductor") if any(r["variant"] == k for r in runs)]
    cost: dict[str, Any] = {
        "steps": runs[0]["steps"],
        "repeat": max(r["repeat"] for r in runs) + 1,
        "kinds": kinds,
        # the backend of the plain runs: None = the script's own (older records have no key: their own too)
        "plain_backend": next((r.get("backend") for r in runs if r["variant"] == "plain"), None),
        "runs": [{k: v for k, v in r.items() if k != "schema"} for r in runs],
        "scenarios": {},
    }
    for name in sorted({r["scenario"] for r in runs}):
        rs = [r for r in runs if r["scenario"] == name and r["ok"]]
        wall = {
            k: med([r["wall_s"] for r in rs if r["variant"] == k]) for k in ("plain", "scan_aot_eager", "scan_inductor")
        }
        rss = {
            k: med([r.get("maxrss_kb") for r in rs if r["variant"] == k])
            for k in ("plain", "scan_aot_eager", "scan_inductor")
        }
        fa = next((r["findings"] for r in rs if r["variant"] == "scan_aot_eager"), None)
        fi = next((r["findings"] for r in rs if r["variant"] == "scan_inductor"), None)

        def over(a: float | None, b: float | None) -> float | None:
            return a / b if a and b else None

        cost["scenarios"][name] = {
            "plain_s": wall["plain"],
            "scan_aot_eager_s": wall["scan_aot_eager"],
            "scan_inductor_s": wall["scan_inductor"],
            "aot_over_plain": over(wall["scan_aot_eager"], wall["plain"]),
            "aot_over_inductor": over(wall["scan_aot_eager"], wall["scan_inductor"]),
            "plain_rss_mib": None if rss["plain"] is None else rss["plain"] / 1024,
            "scan_aot_eager_rss_mib": None if rss["scan_aot_eager"] is None else rss["scan_aot_eager"] / 1024,
            "scan_inductor_rss_mib": None if rss["scan_inductor"] is None else rss["scan_inductor"] / 1024,
            "rss_scan_inductor_over_plain": over(rss["scan_inductor"], rss["plain"]),
            "rss_scan_aot_eager_over_plain": over(rss["scan_aot_eager"], rss["plain"]),
            "same_findings": None if fa is None or fi is None else [tuple(x) for x in fa] == [tuple(x) for x in fi],
            "findings_aot_eager": fa,
            "findings_inductor": fi,
        }
    return cost


if __name__ == "__main__":
    sys.exit(main())
