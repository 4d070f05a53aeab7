#!/usr/bin/env python3
"""The gate (issue 39): real models of several libraries, each in a training script with the problems users put
there; for each, `torchmend fix` on a scratch copy, then an independent before/after measurement.

    python benchmarks/gate/run.py --results OUT.jsonl [--only NAME ...] [--steps 30] [--repeat 3] [--jobs 4]
        [--deadline-s 540] [--resume] [--timing-backend aot_eager] [-- EXTRA FIX ARGS]

Per case (benchmarks/gate/cases/<name>.py), in a temp folder of its own:
  1. fix: `python -m torchmend fix <copy> --yes --unsafe-fixes --steps N [EXTRA] -- --steps N` with this
     Python and torchmend from --torchmend (PYTHONPATH); exit code, wall time, its output (a log file), what it
     says it wrote, and the diff of the copy before/after. Cases run --jobs at a time.
  2. timing: the original and the fixed copy, each --repeat times, interleaved (A B A B ...), each in a fresh
     process with fresh TORCHINDUCTOR_CACHE_DIR and TRITON_CACHE_DIR (a cold compile), under timer.py (torch's
     hooks, no torchmend): per-step times, time to first and last step, compile seconds, ops compiled, losses.
     One case at a time, one run at a time: the timing runs never overlap each other or a fix. Where the fix
     wrote, one more run of the original with TORCH_COMPILE_DISABLE=1 (arm "eager") measures the compiler's own
     difference: losses that differ beyond rtol but no more than compiled vs eager of the original are the
     compiler's rounding grown over a long run, not the patch's ("equal within the compiler's difference").
When the fix wrote nothing, only the original is timed (--aa-unchanged times both anyway: an A/A control).

Results: JSON lines appended to --results as they are made: {"kind": "fix"} once per case, {"kind": "run"} per
timing run, and {"kind": "case"} once a case's fix and runs are all there (the report reads these). --resume
keeps what the file holds (same case source, steps, fix arguments) and does the rest, so a device command that
--deadline-s stopped is continued by the next. A case whose original script fails is recorded as failed to
run; nothing here raises for a case.
"""

from __future__ import annotations

import argparse
import concurrent.futures as futures
import datetime
import difflib
import fnmatch
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
CASES = HERE / "cases"
TIMER = HERE / "timer.py"
RTOL, ATOL = 1e-4, 1e-6
EAGER = "eager"  # the timing arm that runs the original with torch.compile disabled: the numerics reference
START = time.monotonic()
_write_lock = threading.Lock()
_stop = threading.Event()


# ------------------------------------------------------------------------------------------------ cases


# Scripts named for their role, not their model (benchmarks/scenarios/<name>/broken.py): the case is the folder's name.
GENERIC_STEMS = frozenset({"broken", "train", "main", "hand"})


def case_name(path: Path) -> str:
    return path.parent.name if path.stem in GENERIC_STEMS else path.stem


def case_meta(path: Path) -> dict:
    """`# gate: key=value ...` header lines of a case: library, model, planted (comma-separated, or none)."""
    meta: dict = {"case": case_name(path)}
    for line in path.read_text().splitlines()[:5]:
        if line.startswith("# gate:"):
            for m in re.finditer(r"(\w+)=(\S.*?)(?=\s+\w+=|$)", line[len("# gate:") :]):
                meta[m.group(1)] = m.group(2).strip()
    planted = meta.get("planted", "none")
    meta["planted"] = [] if planted == "none" else [p.strip() for p in planted.split(",") if p.strip()]
    return meta


def select_cases(only: list[str] | None, given: list[Path] | None = None) -> list[Path]:
    paths = [p.resolve() for p in given] if given else sorted(CASES.glob("*.py"))
    if only:
        paths = [p for p in paths if any(fnmatch.fnmatch(case_name(p), pat) for pat in only)]
    return paths


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


# ------------------------------------------------------------------------------------------------ results


class Results:
    def __init__(self, path: Path, resume: bool) -> None:
        self.path = path
        self.lines: list[dict] = []
        if resume and path.exists():
            for line in path.read_text().splitlines():
                line = line.strip()
                if line:
                    try:
                        self.lines.append(json.loads(line))
                    except json.JSONDecodeError:
                        pass  # a line cut by a kill: its run is made again
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("")

    def add(self, rec: dict) -> None:
        with _write_lock:
            self.lines.append(rec)
            with self.path.open("a") as f:
                f.write(json.dumps(rec) + "\n")

    def find(self, kind: str, key: dict, **more) -> list[dict]:
        return [
            r for r in self.lines if r.get("kind") == kind and all(r.get(k) == v for k, v in {**key, **more}.items())
        ]


# ------------------------------------------------------------------------------------------------ helpers


def remaining(deadline: float | None) -> float:
    return float("inf") if deadline is None else deadline - (time.monotonic() - START)


def run_proc(cmd: list[str], *, cwd: Path, env: dict, log: Path, timeout: float) -> tuple[int, float, bool]:
    """Run cmd in its own process group, stdout+stderr to log; (exit code, wall seconds, timed out)."""
    t0 = time.monotonic()
    timed_out = False
    with log.open("w") as out:
        out.write("$ " + " ".join(cmd) + "\n")
        out.flush()
        env = {**env, "TM_GATE_T0": repr(time.time())}
        p = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            while True:
                try:
                    p.wait(timeout=1.0)
                    break
                except subprocess.TimeoutExpired:
                    if time.monotonic() - t0 > timeout or _stop.is_set():
                        timed_out = True
                        kill_group(p)
                        break
        except BaseException:
            kill_group(p)
            raise
    return p.returncode if p.returncode is not None else -9, time.monotonic() - t0, timed_out


def kill_group(p: subprocess.Popen) -> None:
    for sig, wait in ((signal.SIGTERM, 5), (signal.SIGKILL, 5)):
        try:
            os.killpg(p.pid, sig)
        except ProcessLookupError:
            return
        try:
            p.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def base_env(args) -> dict:
    env = dict(os.environ)
    tm = str(Path(args.torchmend).resolve())
    env["PYTHONPATH"] = tm + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.update(PYTHONUNBUFFERED="1", COLUMNS="200", NO_COLOR="1", TERM="dumb")
    env.pop("TORCH_COMPILE_DISABLE", None)
    return env


def fresh_caches(env: dict, root: Path) -> dict:
    (root / "inductor").mkdir(parents=True, exist_ok=True)
    (root / "triton").mkdir(parents=True, exist_ok=True)
    return {**env, "TORCHINDUCTOR_CACHE_DIR": str(root / "inductor"), "TRITON_CACHE_DIR": str(root / "triton")}


def tail(path: Path, n: int = 25) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return ""


# ------------------------------------------------------------------------------------------------ fix phase

CHANGE_LINE = re.compile(r"^\s*\S+\.py:\d+\s+TM\d+\b.*$")


def parse_fix_output(text: str) -> dict:
    lines = text.splitlines()
    verdicts = [ln.strip() for ln in lines if re.match(r"^\s*verdict:", ln)]
    wrote = [ln.strip() for ln in lines if re.match(r"^\s*Wrote \d+ file", ln)]
    changes = [ln.strip() for ln in lines if CHANGE_LINE.match(ln)]
    summary = next((ln.strip() for ln in lines if re.match(r"^\s*\d+ findings?:", ln)), "")
    numerics = [ln.strip() for ln in lines if ln.strip().startswith("numerics")]
    # the "not fixed" table: │ file.py:LINE │ TMxxx │ why not ... │ (first row of each finding)
    not_fixed = []
    for ln in lines:
        m = re.match(r"^│\s*(\S+\.py:\d+)\s*│\s*(TM\d+)\s*│\s*(.*?)\s*│?\s*$", ln)
        if m:
            not_fixed.append({"where": m.group(1), "rule": m.group(2), "why": m.group(3)})
    return {
        "verdict": verdicts[-1] if verdicts else "",
        "verdicts": verdicts,
        "wrote_line": wrote[-1] if wrote else "",
        "changes": changes,
        "summary": summary,
        "numerics_line": numerics[-1] if numerics else "",
        "not_fixed": not_fixed,
        "random_stream": "random stream" in text.lower(),
    }


def do_fix(path: Path, key: dict, meta: dict, args, work: Path, logs: Path, deadline: float | None) -> dict:
    case = case_name(path)
    tmp = Path(tempfile.mkdtemp(prefix=f"{case}-fix-", dir=work))
    project = tmp / "project"
    project.mkdir()
    target = project / path.name
    original = path.read_text()
    target.write_text(original)
    env = fresh_caches(base_env(args), tmp / "caches")
    env["XDG_STATE_HOME"] = str(tmp / "state")  # torchmend's undo records: out of the user's home
    env["TORCHINDUCTOR_COMPILE_THREADS"] = str(max(1, (os.cpu_count() or 1) // max(1, args.jobs)))
    verdict = tmp / "verdict.json"  # fix's own outcome, measured by its judging stage (cold, interleaved)
    cmd = [args.python, "-m", "torchmend", "fix", str(target), "--yes", "--unsafe-fixes", "--steps", str(args.steps)]
    cmd += ["--verdict-json", str(verdict), *args.fix_args, "--", "--steps", str(args.steps)]
    log = logs / f"{case}.fix.log"
    budget = min(args.fix_timeout, remaining(deadline))
    rc, wall, timed_out = run_proc(cmd, cwd=project, env=env, log=log, timeout=budget)
    fixed = target.read_text() if target.exists() else original
    diff = "".join(
        difflib.unified_diff(
            original.splitlines(keepends=True), fixed.splitlines(keepends=True), f"a/{path.name}", f"b/{path.name}"
        )
    )
    others = sorted(
        str(p.relative_to(project))
        for p in project.rglob("*")
        if p.is_file() and p != target and ".torchmend" not in p.parts and "__pycache__" not in p.parts
    )
    out = log.read_text(errors="replace")
    rec = {
        "kind": "fix",
        "verdict_json": json.loads(verdict.read_text()) if verdict.exists() else None,
        **key,
        **{k: meta.get(k) for k in ("library", "model", "planted")},
        "host": socket.gethostname(),
        "time": datetime.datetime.now().isoformat(timespec="seconds"),
        "cmd": cmd,
        "rc": rc,
        "timed_out": timed_out,
        "wall_s": round(wall, 2),
        "changed": fixed != original,
        "diff": diff,
        "original_source": original,
        "fixed_source": fixed,
        "other_files": others,
        "log": str(log),
        "log_tail": "\n".join(out.splitlines()[-15:]),
        **parse_fix_output(out),
    }
    if not args.keep:
        shutil.rmtree(tmp, ignore_errors=True)
    return rec


# ------------------------------------------------------------------------------------------------ timing phase


def do_run(path: Path, source: str, arm: str, rep: int, key: dict, args, work: Path, logs: Path, deadline) -> dict:
    case = case_name(path)
    tmp = Path(tempfile.mkdtemp(prefix=f"{case}-{arm}{rep}-", dir=work))
    (tmp / arm).mkdir()
    script = tmp / arm / path.name
    script.write_text(source)
    env = fresh_caches(base_env(args), tmp / "caches")
    env["PYTHONPATH"] = os.environ.get("PYTHONPATH", "")  # the timing runs need no torchmend
    if not env["PYTHONPATH"]:
        env.pop("PYTHONPATH")
    if args.timing_backend:
        env["TM_GATE_BACKEND"] = args.timing_backend
    if arm == EAGER:
        env["TORCH_COMPILE_DISABLE"] = "1"
    rec_path = tmp / "record.json"
    cmd = [args.python, str(TIMER), str(rec_path), str(script), "--steps", str(args.steps)]
    log = logs / f"{case}.{arm}.{rep}.log"
    rc, wall, timed_out = run_proc(
        cmd, cwd=tmp / arm, env=env, log=log, timeout=min(args.run_timeout, remaining(deadline))
    )
    try:
        record = json.loads(rec_path.read_text())
    except (OSError, json.JSONDecodeError):
        record = None
    if not args.keep:
        shutil.rmtree(tmp, ignore_errors=True)
    return {
        "kind": "run",
        **key,
        "arm": arm,
        "rep": rep,
        "host": socket.gethostname(),
        "time": datetime.datetime.now().isoformat(timespec="seconds"),
        "rc": rc,
        "timed_out": timed_out,
        "wall_s": round(wall, 3),
        "log": str(log),
        "log_tail": "" if rc == 0 else tail(log),
        "record": record,
    }


def run_metrics(run: dict) -> dict | None:
    """The numbers of one timing run, or None when it did not finish its steps."""
    rec = run.get("record")
    if run.get("rc") != 0 or not rec or rec.get("status") != "ok" or not rec.get("step_ends"):
        return None
    ends = rec["step_ends"]
    durations = [b - a for a, b in zip(ends, ends[1:])]
    half = durations[len(durations) // 2 :] or durations
    comp = rec.get("compile") or {}
    return {
        "steps": len(ends),
        "steady_s": statistics.median(half) if half else None,
        "first_step_s": ends[0],
        "last_step_s": ends[-1],
        "wall_s": run.get("wall_s"),
        "compile_s": comp.get("compile_s"),
        "frames": comp.get("frames"),
        "recompiles": comp.get("recompiles"),
        "graph_breaks": comp.get("graph_breaks"),
        "ops_total": comp.get("ops_total"),
        "ops_largest": comp.get("ops_largest"),
        "losses": rec.get("losses") or [],
        "device": rec.get("device"),
        "torch": rec.get("torch"),
    }


def close(a: list[float], b: list[float]) -> tuple[bool, float | None]:
    """Whether two loss lists agree within RTOL/ATOL, and the largest relative difference."""
    if not a or not b or len(a) != len(b):
        return False, None
    worst = 0.0
    ok = True
    for x, y in zip(a, b):
        d = abs(x - y)
        worst = max(worst, d / max(abs(y), 1e-12))
        if d > ATOL + RTOL * abs(y) or x != x or y != y:
            ok = False
    return ok, worst


def stats(values: list) -> dict | None:
    vals = [v for v in values if v is not None]
    if not vals:
        return None
    return {"median": statistics.median(vals), "min": min(vals), "max": max(vals), "n": len(vals)}


def summarise(fix: dict, runs: list[dict]) -> dict:
    arms: dict[str, list[dict]] = {"before": [], "after": [], EAGER: []}
    failed: dict[str, list[dict]] = {"before": [], "after": [], EAGER: []}
    for r in sorted(runs, key=lambda r: (r["arm"], r["rep"])):
        m = run_metrics(r)
        (arms if m else failed)[r["arm"]].append(m or r)
    out: dict = {}
    for arm, ms in arms.items():
        if arm == EAGER:
            continue  # a numerics reference only: its times are not the user's compiled run
        out[arm] = {
            k: stats([m[k] for m in ms])
            for k in (
                "steady_s",
                "first_step_s",
                "last_step_s",
                "wall_s",
                "compile_s",
                "frames",
                "recompiles",
                "graph_breaks",
                "ops_total",
                "ops_largest",
            )
        }
        out[arm]["ok_runs"] = len(ms)
        out[arm]["failed_runs"] = len(failed[arm])
        out[arm]["failure"] = failed[arm][0].get("log_tail", "")[-1500:] if failed[arm] else ""
        out[arm]["failure_rc"] = failed[arm][0].get("rc") if failed[arm] else None
        out[arm]["device"] = ms[0]["device"] if ms else None
        out[arm]["torch"] = ms[0]["torch"] if ms else None
    b, a = arms["before"], arms["after"]
    if len(b) >= 2:
        out["aa_equal"], out["aa_max_rel"] = close(b[1]["losses"], b[0]["losses"])
    if b and arms[EAGER]:
        # The compiler's own difference: the original compiled against the original run eagerly. Over a long
        # training run rounding differences grow (chaotically), so a patch that reorders float work differs by
        # about as much; a difference within this one is the compiler's, not the patch's.
        out["compiler_max_rel"] = close(arms[EAGER][0]["losses"], b[0]["losses"])[1]
    if b and a:
        ok, worst = close(a[0]["losses"], b[0]["losses"])
        out["numerics_max_rel"] = worst
        out["numerics_within"] = "rtol" if ok else None
        band = max(out.get("compiler_max_rel") or 0.0, out.get("aa_max_rel") or 0.0)
        if not ok and worst is not None and out.get("compiler_max_rel") is not None and worst <= band:
            ok, out["numerics_within"] = True, "compiler"
        out["numerics_equal"] = ok
        out["losses_counted"] = [len(b[0]["losses"]), len(a[0]["losses"])]
    out["verdict"] = claim(fix, out)
    return out


def beyond(after: dict | None, before: dict | None) -> bool:
    """after is lower than before beyond the spread: its slowest run faster than before's fastest."""
    return bool(after and before and after["max"] < before["min"])


def claim(fix: dict, s: dict) -> str:
    """The "claim holds?" column: a written change must be faster (steady step or time to last step) or faster to
    start (compile or first step) beyond the spread, and compute the same losses."""
    b, a = s["before"], s["after"]
    if not b["ok_runs"]:
        return "case failed to run"
    if not fix.get("changed"):
        return "n/a (nothing written)"
    if not a["ok_runs"]:
        return "no: the fixed copy fails"
    faster = [k for k, name in (("steady_s", "steady"), ("last_step_s", "to last step")) if beyond(a[k], b[k])]
    start = [k for k in ("compile_s", "first_step_s") if beyond(a[k], b[k])]
    slower = [k for k in ("steady_s", "last_step_s") if beyond(b[k], a[k])]
    same = s.get("numerics_equal")
    why = []
    if not (faster or start):
        why.append("not faster beyond the spread")
    if slower and not (faster or start):
        why.append("slower: " + ", ".join(k.removesuffix("_s") for k in slower))
    if not same:
        if fix.get("random_stream"):
            why.append("numerics differ (random stream changed)")
        elif s.get("aa_equal") is False:
            why.append("numerics differ (A/A differs too: nondeterministic)")
        elif s.get("compiler_max_rel") is None:
            why.append("numerics differ (no eager reference run to tell the compiler's own difference)")
        else:
            why.append("numerics differ beyond the compiler's own difference")
    if why:
        return "no: " + "; ".join(why)
    held = "yes: " + ", ".join(k.removesuffix("_s") for k in faster + start)
    return held + ("; but slower: " + ", ".join(k.removesuffix("_s") for k in slower) if slower else "")


# ------------------------------------------------------------------------------------------------ main


def parse_args(argv: list[str]):
    extra: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1 :]
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--results", required=True, type=Path, help="the JSONL results file (appended to)")
    p.add_argument("--only", nargs="+", help="case names or fnmatch patterns (tv_*, pyg_gcn)")
    p.add_argument(
        "--cases",
        nargs="+",
        type=Path,
        help="scripts to run instead of cases/*.py (a scenario's broken.py is named for its folder)",
    )
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--repeat", type=int, default=3, help="timing runs per arm")
    p.add_argument("--jobs", type=int, default=4, help="fixes at once (timing is always one run at a time)")
    p.add_argument("--deadline-s", type=float, default=None, help="start nothing that would end past this")
    p.add_argument("--resume", action="store_true", help="keep what --results holds and do the rest")
    p.add_argument("--python", default=sys.executable, help="the Python that runs torchmend and the scripts")
    p.add_argument("--torchmend", default=str(REPO), help="the folder put on PYTHONPATH for `python -m torchmend`")
    p.add_argument("--work", type=Path, default=None, help="scratch folder (default: a temp folder)")
    p.add_argument("--logs", type=Path, default=None, help="log folder (default: <results>-logs/)")
    p.add_argument("--fix-timeout", type=float, default=480.0)
    p.add_argument("--run-timeout", type=float, default=240.0)
    p.add_argument("--timing-backend", default=None, help="force a backend on the timing runs (a CPU check)")
    p.add_argument("--aa-unchanged", action="store_true", help="time both arms even when the fix wrote nothing")
    p.add_argument("--phases", default="fix,time", help="fix, time, or both (default)")
    p.add_argument("--keep", action="store_true", help="keep the scratch folders")
    p.add_argument(
        "--refix-failed", action="store_true", help="with --resume: fix again where fix crashed or timed out"
    )
    args = p.parse_args(argv)
    args.fix_args = extra
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    signal.signal(signal.SIGTERM, lambda *a: _stop.set())
    deadline = args.deadline_s
    results = Results(args.results, args.resume)
    logs = args.logs or args.results.with_name(args.results.stem + "-logs")
    logs.mkdir(parents=True, exist_ok=True)
    work = args.work or Path(tempfile.mkdtemp(prefix="gate-"))
    work.mkdir(parents=True, exist_ok=True)
    phases = set(args.phases.split(","))
    paths = select_cases(args.only, args.cases)
    if not paths:
        print("no case matches", args.only, file=sys.stderr)
        return 2
    keys = {}
    metas = {}
    for p in paths:
        keys[case_name(p)] = {
            "case": case_name(p),
            "source_sha": sha(p.read_text()),
            "steps": args.steps,
            "fix_args": args.fix_args,
        }
        metas[case_name(p)] = case_meta(p)
    print(
        f"gate: {len(paths)} cases, steps {args.steps}, repeat {args.repeat}, jobs {args.jobs}, "
        f"fix args {args.fix_args or '-'}, results {args.results}",
        flush=True,
    )

    # 1. fix, --jobs at a time
    def needs_fix(p: Path) -> bool:
        done = results.find("fix", keys[case_name(p)])
        if not done:
            return True
        # --refix-failed: again where torchmend itself failed (an internal error, a timeout), not where it refused
        return args.refix_failed and (done[-1]["rc"] in (1, -9, -15, 137, 143) or bool(done[-1].get("timed_out")))

    todo = [p for p in paths if needs_fix(p)] if "fix" in phases else []
    # no fix starts that would end past the deadline: the slowest fix so far (any call), else two minutes
    slowest = [max([r.get("wall_s") or 0.0 for r in results.lines if r.get("kind") == "fix"], default=0.0) or 120.0]
    if todo:
        with futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            pending = {}
            queue = list(todo)
            while queue or pending:
                while queue and len(pending) < args.jobs and not _stop.is_set():
                    if remaining(deadline) < slowest[0]:
                        print(f"deadline: {len(queue)} fixes not started", flush=True)
                        queue.clear()
                        break
                    p = queue.pop(0)
                    pending[
                        pool.submit(do_fix, p, keys[case_name(p)], metas[case_name(p)], args, work, logs, deadline)
                    ] = p
                if not pending:
                    break
                done, _ = futures.wait(pending, return_when=futures.FIRST_COMPLETED)
                for f in done:
                    p = pending.pop(f)
                    try:
                        rec = f.result()
                    except Exception as e:  # a harness bug on one case must not end the others
                        print(f"fix {case_name(p)}: harness error {e!r}", flush=True)
                        continue
                    if rec["timed_out"] and remaining(deadline) <= 1:
                        print(f"fix {case_name(p)}: stopped by the deadline (not recorded)", flush=True)
                        continue
                    slowest[0] = max(slowest[0], rec["wall_s"])
                    results.add(rec)
                    print(
                        f"fix {case_name(p)}: rc {rec['rc']} in {rec['wall_s']:.0f}s, "
                        f"{'wrote' if rec['changed'] else 'nothing written'}; {rec['verdict'] or rec['summary']}",
                        flush=True,
                    )

    # 2. timing, one run at a time
    if "time" in phases:
        for p in paths:
            if _stop.is_set():
                break
            key = keys[case_name(p)]
            if results.find("case", key, repeat=args.repeat):
                continue
            fixes = results.find("fix", key)
            if not fixes:
                continue
            fix = fixes[-1]
            arms = ["before", "after"] if fix["changed"] or args.aa_unchanged else ["before"]
            plan = [(arm, rep) for rep in range(args.repeat) for arm in arms]
            if fix["changed"]:
                plan.append((EAGER, 0))  # the numerics reference: the compiler's own difference
            stopped = False
            for arm, rep in plan:
                if any(run_metrics(r) is None for r in results.find("run", key, arm="before")):
                    break  # the original fails: recorded as such, no more runs of it
                if results.find("run", key, arm=arm, rep=rep):
                    continue
                # no run starts that would end past the deadline: the slowest run of this case so far (any call),
                # else the median of all runs so far
                walls = [r.get("wall_s") or 0.0 for r in results.lines if r.get("kind") == "run"]
                mine = [r.get("wall_s") or 0.0 for r in results.find("run", key)]
                est = max(mine) if mine else (statistics.median(walls) if walls else 30.0)
                if remaining(deadline) < est * 1.2 + 5:
                    stopped = True
                    break
                source = fix.get("original_source", p.read_text()) if arm == "before" else fix["fixed_source"]
                r = do_run(p, source, arm, rep, key, args, work, logs, deadline)
                if r["timed_out"] and (remaining(deadline) <= 1 or _stop.is_set()):
                    stopped = True
                    break
                results.add(r)
                m = run_metrics(r)
                print(
                    f"  {case_name(p)} {arm} {rep}: rc {r['rc']} wall {r['wall_s']:.1f}s"
                    + (
                        f", first step {m['first_step_s']:.1f}s, steady {m['steady_s'] * 1e3:.2f} ms, "
                        f"compile {m['compile_s']:.1f}s"
                        if m
                        else " (failed)"
                    ),
                    flush=True,
                )
            if stopped:
                print(f"deadline: stopped in {case_name(p)}", flush=True)
                break
            runs = [r for r in results.find("run", key) if r["rep"] < args.repeat]
            latest = {(r["arm"], r["rep"]): r for r in runs}
            summary = summarise(fix, list(latest.values()))
            results.add(
                {
                    "kind": "case",
                    **key,
                    "repeat": args.repeat,
                    **{k: fix.get(k) for k in ("library", "model", "planted")},
                    "summary": summary,
                }
            )
            print(f"case {case_name(p)}: {summary['verdict']}", flush=True)

    missing = [case_name(p) for p in paths if not results.find("case", keys[case_name(p)], repeat=args.repeat)]
    print(
        f"{len(paths) - len(missing)} of {len(paths)} cases complete"
        + (f"; still missing: {' '.join(missing)}" if missing else "; nothing missing"),
        flush=True,
    )
    if args.work is None and not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if not missing else 3


if __name__ == "__main__":
    sys.exit(main())
