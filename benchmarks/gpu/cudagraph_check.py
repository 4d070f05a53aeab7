"""GPU side: does every torchmend rewrite run under CUDA graphs? (issue 16, part 1)

    python benchmarks/gpu/cudagraph_check.py --resume benchmarks/results/cudagraph-check-h100.jsonl --budget-s 500

Needs torch and this checkout (torchmend's runner: no libcst, typer or rich). It reads the fixed copies that
benchmarks/gpu/prepare.py made where libcst is installed (benchmarks/gpu/fixed/), and runs on CUDA:

  fixture cases (fixtures/scan/<name>, where `fix` changed something):
    eager        the original train.py, TORCH_COMPILE_DISABLE=1
    fixed_eager  the fixed copy, TORCH_COMPILE_DISABLE=1
    fixed_ro     the fixed copy, every torch.compile forced to mode="reduce-overhead" (benchmarks/gpu/sitecustomize.py)
  scenario cases (benchmarks/scenarios/<name>, the suite's torchmend variant), overhead regime:
    eager, fixed_eager   broken.py as written and fixed, TORCH_COMPILE_DISABLE=1
    fixed_ro / hand_ro   the torchmend-fixed broken.py and hand.py, TM_BENCH_MODE=reduce-overhead
  compile timing (module_counter, TM201: target torchmend/hand ≤ 1.05), sequential, interleaved:
    fixed_default / hand_default (inductor, mode default) and the _ro runs above, --timing-repeats each

and checks: the fixed run ends normally; its counts (graphs, breaks, recompiles, limit hits) equal the hand
fix's where there is one; its losses and final weights match the fixed script's in eager (CUDA graphs run
the rewrite right) and, shown beside, the script's as written in eager (what the rewrite itself changes:
a fix that reseeds or drops randomness changes them); rtol 1e-3, as CUDA graphs and inductor reorder float
math; the strict 1e-4 verdict is kept too. Every run is appended to the results file as it ends
(resumable, like the suite); the Markdown next to it is rebuilt from all of it.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import signal
import statistics
import sys
import tempfile
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

import suite_log  # noqa: E402

from torchmend.profiler.findings import analyse  # noqa: E402
from torchmend.profiler.runner import RunSpec, run  # noqa: E402
from torchmend.values import Tolerance  # noqa: E402
from torchmend.verify.numerics import capture_of, compare  # noqa: E402

FIXED = HERE / "fixed"
SCENARIOS = ROOT / "benchmarks" / "scenarios"
FIXTURES = ROOT / "fixtures" / "scan"
COUNTS = ("graphs", "graph_breaks", "recompiles", "recompile_limit_hits")
LOOSE = 1e-3
TIMING_CASE = "scenario:module_counter"
TIMEOUT_S = 600.0
STOP: list[bool] = []


def cases(only: list[str] | None) -> dict[str, dict[str, Any]]:
    """case name -> what to run; only cases whose fix changed something."""
    out: dict[str, dict[str, Any]] = {}
    for fx in sorted((FIXED / "fixtures").glob("*/fix.json")):
        rec = json.loads(fx.read_text())
        if rec["changed"]:
            name = fx.parent.name
            out[f"fixture:{name}"] = {
                "rules": rec["rules"],
                "eager": FIXTURES / name / "train.py",
                "fixed": fx.parent / "train.py",
                "hand": None,
            }
    for fx in sorted((FIXED / "scenarios").glob("*/fix.json")):
        rec = json.loads(fx.read_text())
        if rec["changed"]:
            name = fx.parent.name
            out[f"scenario:{name}"] = {
                "rules": rec["rules"],
                "eager": SCENARIOS / name / "broken.py",
                "fixed": fx.parent / "broken.py",
                "hand": SCENARIOS / name / "hand.py",
            }
    if only:
        out = {k: v for k, v in out.items() if any(o in (k, k.split(":", 1)[1]) for o in only)}
    return out


def env_for(case: str, arm: str, device: str, mode: str) -> tuple[tuple[str, str], ...]:
    arm_mode = "default" if arm.endswith("_default") else mode
    eager = arm.endswith("eager")
    env: list[tuple[str, str]] = [("TORCH_COMPILE_DISABLE", "1" if eager else "0")]
    if case.startswith("scenario:"):
        env += [("TM_BENCH_REGIME", "overhead"), ("TM_BENCH_DEVICE", device), ("TM_BENCH_MODE", arm_mode)]
    else:
        if device == "cuda":
            env.append(("TM_DEFAULT_DEVICE", "cuda"))
        if not eager:
            env.append(("TM_COMPILE_MODE", arm_mode))
    if arm.endswith("_ro"):  # inductor says why it skips CUDA graphs (a CPU tensor, a mutated input...) here
        env.append(("TORCH_LOGS", "perf_hints"))
    return tuple(env)


def measure(script: Path, env: tuple[tuple[str, str], ...], steps: int, backend: str | None) -> dict[str, Any]:
    scratch = Path(tempfile.mkdtemp(prefix="tm-cg-"))
    caches = (("TORCHINDUCTOR_CACHE_DIR", str(scratch / "inductor")), ("TRITON_CACHE_DIR", str(scratch / "triton")))
    spec = RunSpec(
        script=script, steps=steps, cwd=script.parent, backend=backend, env=(*env, *caches), timeout=TIMEOUT_S, seed=0
    )
    outcome = run(spec)
    findings, summary = analyse(outcome.events, script.parent, outcome.ended_by, outcome.wall_s)
    failed = outcome.failed or outcome.ended_by in ("no_torch", "internal_error", "timeout")
    rec = {k: v for k, v in summary.to_json().items() if k != "torch_version"}
    rec.update(ok=not failed, capture=capture_of(outcome.end), findings=sorted({(f.rule, f.line) for f in findings}))
    tail = outcome.output_tail or ""
    rec["cudagraph_skips"] = sorted({ln.strip()[-300:] for ln in tail.splitlines() if "skipping cudagraphs" in ln})
    if failed:
        rec["output_tail"] = tail[-3000:]
    import shutil

    shutil.rmtree(scratch, ignore_errors=True)
    return rec


def plan(
    all_cases: dict[str, dict[str, Any]], timing_repeats: int, timing: bool
) -> tuple[list[tuple[str, str, int]], list[tuple[str, str, int]]]:
    """(the correctness runs, any order; the timing runs, sequential and interleaved)."""
    first = []
    for case, c in all_cases.items():
        first += [(case, a, 0) for a in ("eager", "fixed_eager", "fixed_ro")] + (
            [(case, "hand_ro", 0)] if c["hand"] else []
        )
    second = []
    if timing and TIMING_CASE in all_cases:
        for rep in range(timing_repeats):
            for arm in ("fixed_default", "hand_default", "fixed_ro", "hand_ro"):
                if rep or not arm.endswith("_ro"):  # repeat 0 of the _ro arms is a correctness run already
                    second.append((TIMING_CASE, arm, rep))
    return first, second


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--resume", type=Path, default=None, metavar="FILE", help="results file (JSONL), accumulated")
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    p.add_argument("--mode", default="reduce-overhead", help="the mode forced on the fixed and hand runs")
    p.add_argument("--backend", default=None, help="override the backend (a CPU try-out: aot_eager)")
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--only", nargs="+", default=None, help="case names (module_counter, fixture:several, ...)")
    p.add_argument("--jobs", type=int, default=4, help="correctness runs at once (the timing runs go alone)")
    p.add_argument("--timing-repeats", type=int, default=5)
    p.add_argument("--no-timing", action="store_true")
    p.add_argument("--budget-s", type=float, default=None)
    p.add_argument("--rebuild", action="store_true", help="run nothing; rebuild the Markdown from --resume FILE")
    args = p.parse_args(argv)
    # the children: this checkout's torchmend, and gpu/sitecustomize.py (TM_DEFAULT_DEVICE, TM_COMPILE_MODE)
    os.environ["PYTHONPATH"] = os.pathsep.join(x for x in (str(HERE), str(ROOT), os.environ.get("PYTHONPATH")) if x)
    signal.signal(signal.SIGTERM, lambda *a: STOP.append(True))
    results = args.resume or ROOT / "benchmarks" / "results" / f"cudagraph-check-{args.device}.jsonl"
    all_cases = cases(args.only)
    if not all_cases:
        raise SystemExit(f"no fixed cases under {FIXED}: run benchmarks/gpu/prepare.py where libcst is installed")
    import subprocess

    probe = subprocess.run(
        [
            sys.executable,
            "-c",
            "import torch; print(torch.__version__); print(torch.cuda.is_available() and "
            "torch.cuda.get_device_name(0) or 'cpu')",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\n")
    base = {
        "device": args.device,
        "torch": probe[0],
        "device_name": probe[1],
        "host": platform.node(),
        "backend": args.backend,
        "steps": args.steps,
        "regime": "overhead",
    }
    if not args.rebuild:
        done = suite_log.done_keys(suite_log.load(results))
        first, second = plan(all_cases, args.timing_repeats, not args.no_timing)

        def key(case: str, arm: str, rep: int) -> tuple[Any, ...]:
            return suite_log.key_of(
                {**base, "kind": "cudagraph", "scenario": case, "mode": args.mode, "variant": arm, "repeat": rep}
            )

        first = [x for x in first if key(*x) not in done]
        second = [x for x in second if key(*x) not in done]
        print(
            f"{len(first)} correctness runs, {len(second)} timing runs to make; {len(done)} records already",
            file=sys.stderr,
            flush=True,
        )
        budget = suite_log.Budget(args.budget_s, first_guess=90.0)

        def one(case: str, arm: str, rep: int) -> None:
            c = all_cases[case]
            script = c["eager" if arm == "eager" else arm.split("_")[0]]
            t0 = time.monotonic()
            rec = measure(script, env_for(case, arm, args.device, args.mode), args.steps, args.backend)
            budget.took(time.monotonic() - t0)
            ts = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
            rec.update(
                base,
                kind="cudagraph",
                scenario=case,
                mode=args.mode,
                variant=arm,
                repeat=rep,
                ts=ts,
                rules=c["rules"],
                script=os.path.relpath(script, ROOT),
            )
            suite_log.append(results, rec)
            print(
                f"{case} {arm} #{rep}: {'ok' if rec['ok'] else 'FAILED'} ({rec['ended_by']}), graphs "
                f"{rec['graphs']} breaks {rec['graph_breaks']} recompiles {rec['recompiles']}, compile "
                f"{rec['compile_seconds']:.1f} s",
                file=sys.stderr,
                flush=True,
            )

        with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            pending: set[Future[None]] = set()
            for item in first:
                while len(pending) >= args.jobs:
                    _, pending = wait(pending, return_when=FIRST_COMPLETED)
                if STOP or not budget.allows():
                    break
                pending.add(pool.submit(one, *item))
            wait(pending)
        for item in second:
            if STOP or not budget.allows():
                break
            one(*item)
    md = results.with_suffix(".md")
    md.write_text(report(suite_log.load(results), all_cases, results), encoding="utf-8")
    print(f"wrote {md}", file=sys.stderr)
    return 0


def report(records: list[dict[str, Any]], all_cases: dict[str, dict[str, Any]], results: Path) -> str:
    recs = [r for r in records if r.get("kind") == "cudagraph"]
    by: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in recs:
        by.setdefault((r["scenario"], r["variant"]), []).append(r)
    first = recs[0] if recs else {}
    L = [
        f"# Every rewrite under CUDA graphs: {first.get('device_name', '?')}, torch {first.get('torch', '?')}",
        "",
        f"From `{results.name}` ({len(recs)} runs, {min((r['ts'] for r in recs), default='—')} to "
        f"{max((r['ts'] for r in recs), default='—')}; made by `benchmarks/gpu/cudagraph_check.py`, fixed copies "
        "from `benchmarks/gpu/prepare.py`). The fixed script runs with every torch.compile in mode "
        f"`{first.get('mode', 'reduce-overhead')}`; numerics are its losses and final weights against an eager "
        "run (TORCH_COMPILE_DISABLE=1) of the same fixed script (do CUDA graphs run the rewrite right?) and of "
        f"the script as written (what the rewrite changes), rtol {LOOSE:g}, the strict 1e-4 verdict in brackets.",
        "",
        "| case | rules fixed | fixed runs | counts fixed (graphs/breaks/recompiles/limit) | = hand | "
        "numerics vs the fixed script in eager | vs the script as written in eager | compile s fixed / hand |",
        "|---|---|---|---|---|---|---|---|",
    ]
    failures = []
    skipped: list[tuple[str, list[str]]] = []
    for case, c in all_cases.items():
        fx = by.get((case, "fixed_ro"), [])
        hd = by.get((case, "hand_ro"), [])
        eg = by.get((case, "eager"), [])
        fe = by.get((case, "fixed_eager"), [])
        if not fx:
            L.append(f"| {case} | {', '.join(c['rules'])} | not run yet | — | — | — | — | — |")
            continue
        f0 = fx[0]
        counts = "/".join(str(f0[k]) for k in COUNTS)
        same = "—"
        if hd and hd[0]["ok"] and f0["ok"]:
            same = (
                "yes"
                if all(f0[k] == hd[0][k] for k in COUNTS)
                else "**no** (hand " + "/".join(str(hd[0][k]) for k in COUNTS) + ")"
            )
        num = _numerics(fe, f0)
        num_written = _numerics(eg, f0)
        ratio = "—"
        if hd and f0["ok"] and hd[0]["ok"] and hd[0]["compile_seconds"]:
            ratio = f"{f0['compile_seconds'] / hd[0]['compile_seconds']:.2f}"
        ok = "runs" if all(r["ok"] for r in fx) else "**FAILS**"
        skips = sorted({x for r in fx for x in r.get("cudagraph_skips") or []})
        if skips and all(r["ok"] for r in fx):
            ok = "runs, **CUDA graphs skipped**"
            skipped.append((case, skips))
        L.append(f"| {case} | {', '.join(c['rules'])} | {ok} | {counts} | {same} | {num} | {num_written} | {ratio} |")
        failures += [r for r in fx + hd + eg + fe if not r["ok"]]
    L.append("")
    timing = {
        arm: [r["compile_seconds"] for r in by.get((TIMING_CASE, arm), []) if r["ok"]]
        for arm in ("fixed_default", "hand_default", "fixed_ro", "hand_ro")
    }
    if any(timing.values()):
        L += [
            "## TM201's compile time against the hand fix (module_counter, overhead regime)",
            "",
            "Compile seconds, median (min–max) over interleaved runs, each in a fresh process with fresh "
            "caches; target torchmend/hand ≤ 1.05.",
            "",
            "| mode | torchmend | hand | torchmend / hand |",
            "|---|---|---|---|",
        ]
        for mode, (a, b) in (
            ("default", ("fixed_default", "hand_default")),
            ("reduce-overhead", ("fixed_ro", "hand_ro")),
        ):
            ta, tb = timing[a], timing[b]
            if ta and tb:
                L.append(
                    f"| {mode} | {_spread(ta)} | {_spread(tb)} | "
                    f"{statistics.median(ta) / statistics.median(tb):.3f} ({len(ta)} / {len(tb)} runs) |"
                )
        L.append("")
    if skipped:
        L += ["## Where inductor skipped CUDA graphs (TORCH_LOGS=perf_hints, in the run's output tail)", ""]
        L += [f"- {case}: {'; '.join(f'`{x}`' for x in skips)}" for case, skips in skipped]
        L.append("")
    if failures:
        L += ["## Failed runs", ""]
        for r in failures:
            L += [
                f"- {r['scenario']} {r['variant']} #{r['repeat']}: ended by {r['ended_by']}",
                "",
                "```",
                (r.get("output_tail") or "").strip()[-1500:],
                "```",
                "",
            ]
    return "\n".join(L) + "\n"


def _numerics(eager: list[dict[str, Any]], fixed: dict[str, Any]) -> str:
    """The fixed run's losses and weights against an eager run's: 'match' at rtol 1e-3, and the strict verdict."""
    if not (eager and eager[0]["ok"] and fixed["ok"] and (fixed.get("capture") or {}).get("losses")):
        return "—"
    loose = compare(eager[0]["capture"], fixed["capture"], Tolerance(rtol=LOOSE))
    strict = compare(eager[0]["capture"], fixed["capture"])
    if loose.equal:
        text = "match"
    elif loose.losses_equal and not loose.params_compared:  # e.g. a parameter count the capture saw differently
        text = f"losses match; weights not compared ({loose.params_note})"
    else:
        text = f"**differ** ({loose.describe()})"
    return text + (" (strict: match)" if strict.equal else " (strict: differ)")


def _spread(xs: list[float]) -> str:
    return f"{statistics.median(xs):.2f} ({min(xs):.2f}–{max(xs):.2f})"


if __name__ == "__main__":
    sys.exit(main())
