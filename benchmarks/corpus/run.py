"""The corpus benchmark: Hugging Face `transformers` models as a user's own code, scanned and fixed by torchmend.

For each model class of the list, in a scratch project (a git repository holding a copy of the benchmark venv's
`transformers` package and train_model.py, so the model files are project code that torchmend may edit):

  check   python train_model.py MODEL --eager --steps 1   (no torch.compile: does the model build and run?)
  before  torchmend scan --format json --backend aot_eager --steps 3 train_model.py -- MODEL
  fix     torchmend fix --yes --unsafe --backend aot_eager --verify-backend aot_eager --steps 3 ...
  after   torchmend scan again (only when fix wrote something; else the before scan stands)
  explain benchmarks/corpus/explain.py: for every finding left, torchmend's reason it was not fixed

Each stage is one child process with a time limit; the tree is reset (git reset --hard, git clean -fdx) before
each model. One JSON line per model goes to the results file as soon as the model is done, so a run that is
stopped resumes where it was (models already there are skipped unless --redo). A model whose plain eager run
fails is a *driver error* (the generic inputs do not suit it); torchmend exiting with an internal error (exit 1, or
any code it does not document for that command) or a scan without its JSON is a *torchmend failure*; the two are
never mixed. report.py turns the JSON lines into benchmarks/results/corpus-torch<V>-transformers<V>.md and a plot.

Examples:

  python benchmarks/corpus/run.py --venv /work/corpus/venv --models benchmarks/corpus/models-dev.txt
  python benchmarks/corpus/run.py --models BertModel,GPT2Model --torchmend . --timeout 300
  python benchmarks/corpus/run.py --models benchmarks/corpus/models-eval.txt --report
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
TORCH_PIN = "torch==2.13.0"
TRANSFORMERS_PIN = "transformers==5.23.0"
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
TAIL = 2000  # characters of a failing stage's output kept in the record

# torchmend's exit codes (torchmend/cli/exitcodes.py) as this driver reads them
OK, INTERNAL_ERROR, SCRIPT_FAILED, NOTHING_COMPILED, SCRIPT_FAILED_AFTER_COMPILE = 0, 1, 4, 5, 8
WRITE_REFUSED, VERIFY_FAILED = 9, 10
# Exit codes that mean torchmend did its job (a finding, a refusal, a failing script are answers, not crashes); a
# crash of torchmend (an uncaught exception: a traceback, exit 1) or of its profiled child's hooks exits 1.
SCAN_ANSWERS = {OK, SCRIPT_FAILED, NOTHING_COMPILED, SCRIPT_FAILED_AFTER_COMPILE}
FIX_ANSWERS = SCAN_ANSWERS | {WRITE_REFUSED, VERIFY_FAILED}


# ------------------------------------------------------------------------------------------------- set-up


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        prog="run.py",
        description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument(
        "--models",
        required=True,
        metavar="A,B|FILE",
        help="model classes exported by transformers, comma-separated, or a file with one per line "
        "(# comments); a file's name gives the list's label (models-dev.txt: dev)",
    )
    ap.add_argument("--label", help="the list's label in the results (default: from the file name, else 'custom')")
    ap.add_argument(
        "--venv",
        type=Path,
        default=HERE / ".venv",
        help="the benchmark venv; created with pinned torch and transformers and torchmend installed "
        "editable from this checkout when it does not exist (default: benchmarks/corpus/.venv)",
    )
    ap.add_argument(
        "--torch-index-url",
        default="",
        help="where pip finds torch when the venv is created (default '': pip's configured index with the exact "
        f"pin, as dev.py does; {TORCH_CPU_INDEX} for PyTorch's CPU wheels)",
    )
    ap.add_argument(
        "--torchmend",
        type=Path,
        metavar="CHECKOUT",
        help="run this checkout's torchmend (put first on PYTHONPATH) instead of the venv's install",
    )
    ap.add_argument(
        "--work",
        type=Path,
        default=Path(os.environ.get("TMPDIR", "/tmp")) / "torchmend-corpus",
        help="scratch folder: the project, logs, patches, scan JSON (default: $TMPDIR/torchmend-corpus)",
    )
    ap.add_argument(
        "--results",
        type=Path,
        help="the JSON lines file (default: benchmarks/results/corpus-torch<V>-transformers<V>.jsonl)",
    )
    ap.add_argument(
        "--script",
        type=Path,
        default=HERE / "train_model.py",
        help="the generic training script copied into the project (default: train_model.py)",
    )
    ap.add_argument(
        "--vendor", default="transformers", help="the package copied from the venv into the project ('' for none)"
    )
    ap.add_argument("--backend", default="aot_eager", help="torchmend's --backend and --verify-backend")
    ap.add_argument("--steps", type=int, default=3, help="optimizer steps per run (default 3)")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per stage (default 300)")
    ap.add_argument("--redo", action="store_true", help="run models that already have a result again")
    ap.add_argument(
        "--always-rescan",
        action="store_true",
        help="scan after fix even when fix wrote nothing (the counts are then measured twice)",
    )
    ap.add_argument("--report", action="store_true", help="write the Markdown report and plot when done")
    return ap.parse_args(argv)


def read_models(spec: str) -> tuple[list[str], str]:
    """(model names, the list's label)."""
    path = Path(spec)
    if path.is_file():
        names = [line.split("#", 1)[0].strip() for line in path.read_text().splitlines()]
        return [n for n in names if n], path.stem.removeprefix("models-")
    return [n.strip() for n in spec.split(",") if n.strip()], "custom"


def ensure_venv(venv: Path, torch_index: str) -> Path:
    """The venv's python; the venv is created and filled when it does not exist yet."""
    python = venv / "bin" / "python"
    if python.exists():
        return python
    print(f"creating the benchmark venv {venv} (torch, transformers, torchmend from {REPO})", flush=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(python), "-m", "pip", "install", "--quiet"]
    subprocess.run(pip + [TORCH_PIN] + (["--index-url", torch_index] if torch_index else []), check=True)
    subprocess.run(pip + ["-e", f"{REPO}[dev]", TRANSFORMERS_PIN, TORCH_PIN], check=True)
    return python


_PROBE = r"""
import importlib.metadata as md, importlib.util, json, sys
def version(name):
    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return None
def where(name):
    spec = importlib.util.find_spec(name)
    return None if spec is None or not spec.submodule_search_locations else list(spec.submodule_search_locations)[0]
vendor = sys.argv[1]
print(json.dumps({"python": sys.version.split()[0], "torch": version("torch"), "transformers": version("transformers"),
                  "torchmend_path": where("torchmend"), "vendor_path": where(vendor) if vendor else None,
                  "vendor_version": version(vendor) if vendor else None}))
"""


def probe(python: Path, env: dict[str, str], vendor: str, cwd: Path) -> dict:
    """Versions and paths in the venv, read without importing torch (in `cwd`: `python -c` imports from there)."""
    out = subprocess.run(
        [str(python), "-c", _PROBE, vendor], env=env, cwd=cwd, capture_output=True, text=True, check=True
    )
    info = json.loads(out.stdout)
    tm = info.get("torchmend_path")
    if tm:
        rev = subprocess.run(["git", "-C", tm, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
        dirty = subprocess.run(["git", "-C", tm, "status", "--porcelain", "--", "."], capture_output=True, text=True)
        info["torchmend_commit"] = (rev.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")) or None
    return info


def child_env(torchmend: Path | None, state: Path) -> dict[str, str]:
    env = dict(os.environ)
    if torchmend is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(torchmend.resolve()), env.get("PYTHONPATH")]))
    # Wide, plain output: fix's lines are parsed, and a narrow terminal would wrap them.
    env.update({"COLUMNS": "400", "NO_COLOR": "1", "TERM": "dumb", "PYTHONUNBUFFERED": "1"})
    env["TORCHMEND_STATE_DIR"] = str(state)  # undo records of this run only: fix's summary is read from them
    return env


def _git(project: Path, *args: str) -> str:
    cmd = ["git", "-C", str(project), "-c", "user.name=corpus", "-c", "user.email=corpus@localhost", *args]
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def build_project(work: Path, script: Path, vendor_path: str | None) -> Path:
    """The scratch project (reused when it was built from the same package and script)."""
    project = work / "project"
    key = hashlib.sha256(f"{vendor_path}\n{script.read_bytes().hex()}".encode()).hexdigest()
    marker = work / "project.key"
    if project.is_dir() and marker.exists() and marker.read_text() == key:
        return project
    shutil.rmtree(project, ignore_errors=True)
    project.mkdir(parents=True)
    if vendor_path:
        shutil.copytree(vendor_path, project / Path(vendor_path).name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy2(script, project / "train_model.py")
    _git(project, "init", "-q")
    _git(project, "add", "-A")
    _git(project, "commit", "-q", "-m", "corpus base")
    marker.write_text(key)
    return project


def reset(project: Path) -> None:
    _git(project, "reset", "-q", "--hard")
    _git(project, "clean", "-q", "-fdx")


# ------------------------------------------------------------------------------------------------- stages


@dataclass
class Stage:
    rc: int | None  # None: killed at the time limit
    out: str
    err: str
    seconds: float

    @property
    def timed_out(self) -> bool:
        return self.rc is None

    def tail(self) -> str:
        return (self.err.strip() or self.out.strip())[-TAIL:]


def run_stage(cmd: list[str], cwd: Path, env: dict[str, str], timeout: float, log: Path) -> Stage:
    """One child process (its own process group, killed whole at the time limit); output kept in log.*."""
    start = time.monotonic()
    proc = subprocess.Popen(
        cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        out, err = proc.communicate(timeout=timeout)
        rc: int | None = proc.returncode
    except subprocess.TimeoutExpired:
        kill_tree(proc.pid)
        out, err = proc.communicate()
        rc = None
    Path(f"{log}.out").write_text(out)
    Path(f"{log}.err").write_text(f"$ {' '.join(cmd)}\n# rc {rc}\n{err}")
    return Stage(rc, out, err, round(time.monotonic() - start, 1))


def kill_tree(pid: int) -> None:
    """SIGKILL a process and every descendant: torchmend starts its profiled child in a session of its own, so
    killing the stage's process group alone would leave that child running."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    tree, todo = [], [pid]
    while todo:
        p = todo.pop()
        tree.append(p)
        todo += children.get(p, [])
    for p in tree:
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass


def scan_result(stage: Stage, label: str) -> tuple[dict | None, dict | None]:
    """(the scan's JSON, a failure record) from a scan stage."""
    if stage.timed_out:
        return None, {"kind": "timeout", "stage": label, "detail": f"no result in {stage.seconds} s"}
    if stage.rc not in SCAN_ANSWERS:
        return None, {"kind": "torchmend_failure", "stage": label, "rc": stage.rc, "detail": stage.tail()}
    if stage.rc == NOTHING_COMPILED:  # the script never reached torch.compile: the driver's doing
        return None, {"kind": "driver_error", "stage": label, "rc": stage.rc, "detail": stage.tail()}
    if stage.rc == SCRIPT_FAILED:  # the eager check passed: the script fails under compile before any graph
        return None, {"kind": "compile_error", "stage": label, "rc": stage.rc, "detail": stage.tail()}
    try:
        data = json.loads(stage.out)
    except json.JSONDecodeError:
        return None, {
            "kind": "torchmend_failure",
            "stage": label,
            "rc": stage.rc,
            "detail": "no JSON on stdout: " + stage.tail(),
        }
    return data, None


def counts(scan: dict) -> dict:
    s = scan.get("summary", {})
    keep = (
        "graph_breaks",
        "recompiles",
        "recompile_limit_hits",
        "graphs",
        "compile_seconds",
        "wall_seconds",
        "steady_step_s",
        "ended_by",
    )
    c = {k: s.get(k) for k in keep}
    c["findings"] = len(scan.get("findings", []))
    c["error"] = (scan.get("error") or "")[-TAIL:] or None
    return c


_SUMMARY = re.compile(r"(\d+) findings? \((\d+) to fix\): (\d+) changes? proposed, (\d+) not fixable")
_VERDICT = re.compile(r"^\s*verdict: (.+?)\s*$", re.M)
_NUMERICS = re.compile(r"^numerics \(rtol [^)]*\): (.*?)\s*$", re.M)
_WROTE = re.compile(r"Wrote (\d+) files? \((\d+) changes?\)")
_EFFECT = re.compile(r"^\s*([✓✗]) (TM\d+) change (removed|did not remove) (.*?)(?:: not written)?\s*$", re.M)
_SKIPPED = re.compile(r"^skipped (\S+) (TM\d+): (.*)$", re.M)


def parse_fix(stage: Stage) -> dict:
    """What fix said (it has no JSON output): proposals, verdict, changes kept and refused."""
    text = stage.out + "\n" + stage.err
    fix: dict = {"rc": stage.rc, "seconds": stage.seconds}
    if m := _SUMMARY.search(text):
        fix.update(zip(("findings", "to_fix", "proposed", "not_fixable"), map(int, m.groups())))
    verdicts = list(_VERDICT.finditer(text))
    fix["verdict"] = verdicts[-1].group(1) if verdicts else None
    fix["rounds"] = len(verdicts)
    if verdicts:  # the verdict's reasons and notes: the indented lines under it
        below = text[verdicts[-1].end() :].lstrip("\n").splitlines()
        under = itertools.takewhile(lambda ln: ln.startswith("  "), below)
        fix["verdict_reasons"] = [ln.strip() for ln in under if not ln.strip().startswith(("✓", "✗"))]
    numerics = _NUMERICS.findall(text)
    fix["numerics"] = numerics[-1] if numerics else None
    fix["effects"] = [{"rule": r, "helped": mark == "✓", "what": what} for mark, r, _, what in _EFFECT.findall(text)]
    fix["skipped"] = [{"where": w, "rule": r, "detail": d} for w, r, d in _SKIPPED.findall(text)]
    if m := _WROTE.search(text):
        fix["files_written"], fix["changes_written"] = int(m.group(1)), int(m.group(2))
    if stage.rc == VERIFY_FAILED and fix["verdict"] is None:
        fix["verdict"] = "refused"
    if stage.rc not in (OK,):
        fix["tail"] = stage.tail()
    for said in ("Nothing to change.", "No change accepted; nothing written.", "No change helped; nothing written."):
        if said in text:
            fix["outcome"] = said
    return fix


def written(project: Path, patch: Path, state: Path) -> dict:
    """What fix changed in the tree: files, lines added/removed, and the rules (from its undo record)."""
    numstat = _git(project, "diff", "--numstat")
    files = []
    for line in numstat.splitlines():
        added, removed, path = line.split("\t", 2)
        files.append({"file": path, "added": int(added), "removed": int(removed)})
    if files:
        patch.write_text(_git(project, "diff"))
    summaries = [json.loads(p.read_text()).get("summary", "") for p in sorted(state.rglob("*.json"))]
    rules = [part.strip() for s in summaries for part in s.split(";") if part.strip()]
    return {"files": files, "lines": sum(f["added"] + f["removed"] for f in files), "rules": rules}


# ------------------------------------------------------------------------------------------------- per model


def run_model(model: str, a: argparse.Namespace, python: Path, project: Path, env_base: dict) -> dict:
    work: Path = a.work
    logs, scans, patches = work / "logs", work / "scans", work / "patches"
    for d in (logs, scans, patches):
        d.mkdir(parents=True, exist_ok=True)
    state = work / "state" / model
    shutil.rmtree(state, ignore_errors=True)
    env = child_env(a.torchmend, state)
    reset(project)
    rec: dict = {"model": model, "stages": {}}
    tm = [str(python), "-m", "torchmend"]
    budget = ["--backend", a.backend, "--steps", str(a.steps)]
    target = ["train_model.py", "--", model]

    def stage(name: str, cmd: list[str]) -> Stage:
        s = run_stage(cmd, project, env, a.timeout, logs / f"{model}.{name}")
        rec["stages"][name] = {"rc": s.rc, "seconds": s.seconds}
        return s

    check = stage("check", [str(python), "train_model.py", model, "--eager", "--steps", "1"])
    if check.rc != 0:
        kind = "timeout" if check.timed_out else "driver_error"
        rec["status"], rec["failure"] = kind, {"kind": kind, "stage": "check", "rc": check.rc, "detail": check.tail()}
        return rec

    before_stage = stage("before", tm + ["scan", "--format", "json"] + budget + target)
    before, failure = scan_result(before_stage, "before")
    if before is None:
        rec["status"], rec["failure"] = failure["kind"], failure  # type: ignore[index]
        return rec
    (scans / f"{model}.before.json").write_text(before_stage.out)
    rec["before"] = counts(before)
    rec["status"] = "clean" if not before.get("findings") else "ok"
    after, after_path = before, scans / f"{model}.before.json"
    if before.get("findings"):
        fix_stage = stage("fix", tm + ["fix", "--yes", "--unsafe", "--verify-backend", a.backend] + budget + target)
        rec["fix"] = parse_fix(fix_stage)
        if fix_stage.timed_out or fix_stage.rc not in FIX_ANSWERS:
            kind = "timeout" if fix_stage.timed_out else "torchmend_failure"
            rec["status"] = kind
            rec["failure"] = {"kind": kind, "stage": "fix", "rc": fix_stage.rc, "detail": fix_stage.tail()}
        rec["written"] = written(project, patches / f"{model}.patch", state)
        if rec["written"]["files"] or a.always_rescan:
            after_stage = stage("after", tm + ["scan", "--format", "json"] + budget + target)
            after, failure = scan_result(after_stage, "after")
            if after is None:
                rec["status"], rec["failure"] = failure["kind"], failure  # type: ignore[index]
                return rec
            after_path = scans / f"{model}.after.json"
            after_path.write_text(after_stage.out)
    rec["after"] = counts(after)
    rec["after"]["rescanned"] = after is not before
    if after.get("findings"):
        ex = stage("explain", [str(python), str(HERE / "explain.py"), str(after_path), str(project)])
        try:
            rec["left"] = json.loads(ex.out)
        except json.JSONDecodeError:
            rec["left"] = [dict(f, fix=None, why=None, advice=None) for f in after["findings"]]
            rec["explain_error"] = ex.tail()
    else:
        rec["left"] = []
    return rec


def done_models(results: Path) -> set[str]:
    if not results.exists():
        return set()
    done = set()
    for line in results.read_text().splitlines():
        try:
            done.add(json.loads(line)["model"])
        except (json.JSONDecodeError, KeyError):
            continue  # a line cut short by a kill: that model runs again
    return done


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    models, label = read_models(a.models)
    label = a.label or label
    python = ensure_venv(a.venv.resolve() if a.venv.exists() else a.venv, a.torch_index_url)
    a.work.mkdir(parents=True, exist_ok=True)
    env0 = child_env(a.torchmend, a.work / "state")
    info = probe(python, env0, a.vendor, a.work)
    if not info.get("torchmend_path"):
        sys.exit(f"{python} cannot import torchmend: install it into the venv, or name a checkout with --torchmend")
    results = a.results or REPO / "benchmarks" / "results" / result_name(info["torch"], info["transformers"], "jsonl")
    results.parent.mkdir(parents=True, exist_ok=True)
    project = build_project(a.work, a.script, info.get("vendor_path"))
    done = set() if a.redo else done_models(results)
    todo = [m for m in models if m not in done]
    print(
        f"{len(models)} models ({label}), {len(models) - len(todo)} already in {results}; torch {info['torch']}, "
        f"transformers {info['transformers']}, torchmend {info.get('torchmend_path')} "
        f"({info.get('torchmend_commit')}); project {project}",
        flush=True,
    )
    stop = False

    def interrupted(*_: object) -> None:
        nonlocal stop
        stop = True
        print("stopping after this model", flush=True)

    signal.signal(signal.SIGTERM, interrupted)
    for i, model in enumerate(todo, 1):
        if stop:
            break
        start = time.monotonic()
        rec = run_model(model, a, python, project, env0)
        rec.update(
            list=label,
            seconds=round(time.monotonic() - start, 1),
            date=time.strftime("%Y-%m-%d %H:%M"),
            torch=info["torch"],
            transformers=info["transformers"],
            torchmend=info.get("torchmend_commit"),
            backend=a.backend,
            steps=a.steps,
        )
        with results.open("a") as f:
            f.write(json.dumps(rec) + "\n")
        b, af = rec.get("before") or {}, rec.get("after") or {}
        total = lambda c: (c.get("graph_breaks") or 0) + (c.get("recompiles") or 0)  # noqa: E731
        print(
            f"[{i}/{len(todo)}] {model}: {rec['status']}"
            + (f", breaks+recompiles {total(b)} -> {total(af)}" if b else "")
            + (f", verdict {rec['fix'].get('verdict')}" if rec.get("fix") else "")
            + f" ({rec['seconds']} s)",
            flush=True,
        )
    if a.report:
        from report import write_report  # benchmarks/corpus/report.py

        print(write_report(results))
    return 0


def result_name(torch_version: str | None, transformers_version: str | None, ext: str) -> str:
    torch_v = (torch_version or "unknown").split("+")[0]
    return f"corpus-torch{torch_v}-transformers{transformers_version or 'unknown'}.{ext}"


if __name__ == "__main__":
    sys.exit(main())
