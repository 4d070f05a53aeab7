"""The corpus benchmark: Hugging Face `transformers` models as a user's own code, scanned and fixed by torchmend.

--zoo picks the zoo (zoos.py): `transformers` (the default, below) or `libraries` (issue 40: torchvision, timm,
torch_geometric, diffusers, vit_pytorch, x_transformers and torchaudio models named LIBRARY:NAME, run by
train_library_model.py, their libraries copied into the vendored project; a model whose library the venv lacks is
recorded as `not_installed`, never run). Everything below holds for both, with that script and those libraries.

Each model class of the list runs in each mode (--modes: `train`, training steps; `eval`, model.eval() and the
forward under torch.no_grad()) and each mode of use (--use):

  vendored  "library maintainer": the scratch project (a git repository) holds a copy of the benchmark venv's
            `transformers` package beside train_model.py, so the model files are project code torchmend may edit
  user      "end user": the project holds train_model.py alone; transformers stays in site-packages, so a fix can
            land only in the user's script and its configuration

and for each (model, mode, use), in the scratch project of that use:

  before  torchmend scan --format json --backend aot_eager --steps 3 train_model.py -- MODEL --mode M
  check   python train_model.py MODEL --mode M --eager --steps 1   (only when the scan fails: no torch.compile,
          does the model build and run? If not, a driver error)
  fix     torchmend fix --yes --unsafe --backend aot_eager --verify-backend aot_eager --steps 3 ...
          (--allow-random-stream added with run.py's --allow-random-stream)
  after   torchmend scan again (only when fix wrote something; else the before scan stands)
  explain benchmarks/corpus/explain.py: for every finding left, torchmend's reason it was not fixed

--scan-only stops after `before` (a baseline: breaks and recompiles by cause, no fix). Each stage is one child
process with a time limit; the tree is reset (git reset --hard, git clean -fdx) before each run. One JSON line per
(model, mode, use) goes to the results file as soon as it is done, so a run that is stopped resumes where it was
(what is already there is skipped unless --redo). --shard I/N runs the I-th of N interleaved slices of the list
(1 <= I <= N); --jobs N runs N such shards at once, each in its own work folder and scratch projects, all
appending to one results file (under a lock). A model whose plain eager run fails is a *driver error* (the generic
inputs do not suit it); torchmend exiting with an internal error (exit 1, or any code it does not document for
that command) or a scan without its JSON is a *torchmend failure*; the two are never mixed. report.py turns the
JSON lines into benchmarks/results/corpus-torch<V>-transformers<V>.md and a plot.

Examples:

  python benchmarks/corpus/run.py --venv /work/corpus/venv --models benchmarks/corpus/models-dev.txt
  python benchmarks/corpus/run.py --models LongformerModel --modes train,eval --use vendored,user --torchmend .
  python benchmarks/corpus/run.py --models benchmarks/corpus/models-zoo.txt --modes train,eval --scan-only \\
      --jobs 16 --results /tmp/zoo.jsonl --report
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import itertools
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from zoos import ZOOS, Zoo, parse_model  # benchmarks/corpus/zoos.py: the script, packages and pins of each zoo

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
TAIL = 2000  # characters of a failing stage's output kept in the record
MODES = ("train", "eval")
USES = {"vendored": "library maintainer", "user": "end user"}  # modes of use: the library copied in, or installed

NOT_INSTALLED = 3  # train_library_model.py's exit when the model's library cannot be imported
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
    ap.add_argument(
        "--zoo",
        choices=sorted(ZOOS),
        default="transformers",
        help="which zoo (zoos.py): transformers (train_model.py, transformers classes) or libraries "
        "(train_library_model.py, LIBRARY:NAME of other libraries); default transformers",
    )
    ap.add_argument("--label", help="the list's label in the results (default: from the file name, else 'custom')")
    ap.add_argument(
        "--venv",
        type=Path,
        help="the benchmark venv; created with the zoo's pinned torch and libraries and torchmend installed "
        "editable from this checkout when it does not exist (default: benchmarks/corpus/.venv, "
        ".venv-libraries for the libraries zoo)",
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
        help="the generic training script copied into the project (default: the zoo's, train_model.py or "
        "train_library_model.py)",
    )
    ap.add_argument(
        "--modes",
        default="train",
        help="comma-separated: train (training steps) and/or eval (model.eval(), forward under no_grad); default train",
    )
    ap.add_argument(
        "--use",
        default="vendored",
        help="comma-separated modes of use: vendored (the library copied into the project: library maintainer) "
        "and/or user (the library left in site-packages: end user); default vendored",
    )
    ap.add_argument(
        "--vendor",
        help="the packages copied from the venv into the project in the vendored use, comma-separated ('' for "
        "none; default: the zoo's, those of them installed)",
    )
    ap.add_argument("--scan-only", action="store_true", help="check and scan only: no fix (a baseline)")
    ap.add_argument(
        "--allow-random-stream",
        action="store_true",
        help="fix with --allow-random-stream too (LayerDrop skips: verified in distribution over seeds)",
    )
    ap.add_argument(
        "--evaluation",
        action="store_true",
        help="allow models of the evaluation lists (models-eval.txt, models-eval-26.txt): never while developing",
    )
    ap.add_argument("--shard", metavar="I/N", help="run the I-th of N interleaved slices of the list (1 <= I <= N)")
    ap.add_argument("--jobs", type=int, default=1, help="run N shards at once, each in its own work folder")
    ap.add_argument(
        "--threads",
        type=int,
        help="OMP/MKL threads of every stage's process (default: the CPU count divided by --jobs when --jobs > 1)",
    )
    ap.add_argument(
        "--stop-after",
        type=float,
        metavar="S",
        help="start no new run S seconds after the start (the run in progress ends within its stages' limits)",
    )
    ap.add_argument(
        "--shuffle",
        type=int,
        metavar="SEED",
        help="run the list in a seeded random order (a run cut short by --stop-after is then a random sample)",
    )
    ap.add_argument("--stop-at", type=float, help=argparse.SUPPRESS)  # epoch seconds, from the --jobs parent
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)  # a shard started by --jobs
    ap.add_argument("--base-project", action="append", default=[], help=argparse.SUPPRESS)  # USE=PATH to clone
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
    a = ap.parse_args(argv)
    zoo = ZOOS[a.zoo]
    a.venv = a.venv or HERE / (".venv" if zoo.name == "transformers" else f".venv-{zoo.name}")
    a.script = a.script or HERE / zoo.script
    a.vendor = ",".join(zoo.vendor) if a.vendor is None else a.vendor
    return a


def read_models(spec: str) -> tuple[list[str], str]:
    """(model names, the list's label)."""
    path = Path(spec)
    if path.is_file():
        names = [line.split("#", 1)[0].strip() for line in path.read_text().splitlines()]
        return [n for n in names if n], path.stem.removeprefix("models-")
    return [n.strip() for n in spec.split(",") if n.strip()], "custom"


def ensure_venv(venv: Path, torch_index: str, zoo: Zoo) -> Path:
    """The venv's python; the venv is created and filled when it does not exist yet (torch first, alone, with its
    exact pin, so that no library's requirement pulls another torch)."""
    python = venv / "bin" / "python"
    if python.exists():
        return python
    print(f"creating the benchmark venv {venv} ({zoo.torch_pin}, {', '.join(zoo.pins)}, torchmend from {REPO})",
          flush=True)  # fmt: skip
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(python), "-m", "pip", "install", "--quiet"]
    subprocess.run(pip + [zoo.torch_pin] + (["--index-url", torch_index] if torch_index else []), check=True)
    subprocess.run(pip + ["-e", f"{REPO}[dev]", *zoo.pins, zoo.torch_pin], check=True)
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
vendor = [v for v in sys.argv[1].split(",") if v]
dists = json.loads(sys.argv[2])
print(json.dumps({"python": sys.version.split()[0], "torch": version("torch"), "transformers": version("transformers"),
                  "torchmend_path": where("torchmend"),
                  "vendor_paths": [p for p in map(where, vendor) if p],
                  "versions": {name: version(dist) for name, dist in dists.items()},
                  "importable": sorted(name for name in dists if importlib.util.find_spec(name))}))
"""


def probe(python: Path, env: dict[str, str], vendor: str, cwd: Path, dists: dict[str, str] | None = None) -> dict:
    """Versions and paths in the venv, read without importing torch (in `cwd`: `python -c` imports from there).
    `vendor`: comma-separated import names; `dists`: import name -> distribution, whose versions and whether they
    can be found are reported (the libraries zoo: which libraries are installed)."""
    out = subprocess.run(
        [str(python), "-c", _PROBE, vendor, json.dumps(dists or {})],
        env=env, cwd=cwd, capture_output=True, text=True, check=True,
    )  # fmt: skip
    info = json.loads(out.stdout)
    tm = info.get("torchmend_path")
    if tm:
        rev = subprocess.run(["git", "-C", tm, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
        dirty = subprocess.run(["git", "-C", tm, "status", "--porcelain", "--", "."], capture_output=True, text=True)
        info["torchmend_commit"] = (rev.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")) or None
    return info


def child_env(torchmend: Path | None, state: Path, threads: int | None = None) -> dict[str, str]:
    env = dict(os.environ)
    if threads:  # shards side by side: each stage's torch on its share of the cores
        env.update({k: str(threads) for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")})
    if torchmend is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(torchmend.resolve()), env.get("PYTHONPATH")]))
    # Wide, plain output: fix's lines are parsed, and a narrow terminal would wrap them.
    env.update({"COLUMNS": "400", "NO_COLOR": "1", "TERM": "dumb", "PYTHONUNBUFFERED": "1"})
    env["TORCHMEND_STATE_DIR"] = str(state)  # undo records of this run only: fix's summary is read from them
    return env


def _git(project: Path, *args: str) -> str:
    cmd = ["git", "-C", str(project), "-c", "user.name=corpus", "-c", "user.email=corpus@localhost", *args]
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def build_project(
    work: Path, script: Path, vendor_paths: list[str], use: str, base: Path | None = None, name: str = "train_model.py"
) -> Path:
    """The scratch project of a mode of use (reused when it was built from the same packages and script): the
    vendored one holds a copy of each package. `base`: a project built already (by the --jobs parent), cloned.
    `name`: the script's name in the project (the zoo's script name, whatever file --script gave)."""
    project = work / ("project" if use == "vendored" else f"project-{use}")
    vendor_paths = vendor_paths if use == "vendored" else []
    held = "\n".join(vendor_paths) if vendor_paths else None  # one package: the key of a single path, as before
    key = hashlib.sha256(f"{held}\n{script.read_bytes().hex()}".encode()).hexdigest()
    marker = work / f"{project.name}.key"
    if project.is_dir() and marker.exists() and marker.read_text() == key:
        return project
    shutil.rmtree(project, ignore_errors=True)
    if base is not None:  # a local clone: objects hard-linked, a working tree of its own
        subprocess.run(["git", "clone", "-q", str(base), str(project)], check=True)
        marker.write_text(key)
        return project
    project.mkdir(parents=True)
    for vendor_path in vendor_paths:
        shutil.copytree(vendor_path, project / Path(vendor_path).name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy2(script, project / name)
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


# fix's count line: `6 findings: 6 to fix, 0 one-time, 0 informational; 1 change proposed for 1 of them, 5 not
# fixable` (issue 41: parts that add up); before it `...; 1 change proposed, 5 not fixable` (issue 30: scan's
# wording), and `6 findings (6 to fix): 1 change proposed, 5 not fixable`.
_SUMMARY = re.compile(
    r"(\d+) findings?(?: \((\d+) to fix\)|: (\d+) to fix, \d+ one-time, \d+ informational;?):? "
    r"(\d+) changes? proposed(?: for (\d+) of them)?, (\d+) not fixable"
)
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
        found, old, new, proposed, covered, unfixable = m.groups()
        fix.update(findings=int(found), to_fix=int(old or new), proposed=int(proposed), not_fixable=int(unfixable))
        if covered is not None:
            fix["proposed_for"] = int(covered)
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


def compact(scan: dict) -> list[dict]:
    """The scan's findings, short: what the report's summary by cause needs (also when no fix runs)."""
    keep = ("rule", "gb_id", "kind", "severity", "file", "line", "function", "count")
    return [
        {**{k: f.get(k) for k in keep}, "reason": (f.get("reason") or "")[:240], "code": (f.get("code") or "")[:160]}
        for f in scan.get("findings", [])
    ]


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


def run_model(model: str, mode: str, use: str, a: argparse.Namespace, python: Path, project: Path) -> dict:
    work: Path = a.work
    logs, scans, patches = work / "logs", work / "scans", work / "patches"
    for d in (logs, scans, patches):
        d.mkdir(parents=True, exist_ok=True)
    run_id = f"{model}.{mode}.{use}".replace(":", "-")  # LIBRARY:NAME: no colon in the logs' file names
    zoo = ZOOS[a.zoo]
    library = zoo.library_of(model)
    rec: dict = {"model": model, "mode": mode, "use": use, "stages": {}}
    if library is not None and library not in a.importable:  # nothing to run: kept apart from a driver error
        detail = f"library not installed: {library} cannot be imported in {a.venv}"
        rec["status"], rec["failure"] = "not_installed", {"kind": "not_installed", "stage": "probe", "detail": detail}
        return rec
    state = work / "state" / run_id
    shutil.rmtree(state, ignore_errors=True)
    env = child_env(a.torchmend, state, a.threads)
    reset(project)
    tm = [str(python), "-m", "torchmend"]
    budget = ["--backend", a.backend, "--steps", str(a.steps)]
    target = [zoo.script, "--", model, "--mode", mode]

    def stage(name: str, cmd: list[str]) -> Stage:
        s = run_stage(cmd, project, env, a.timeout, logs / f"{run_id}.{name}")
        rec["stages"][name] = {"rc": s.rc, "seconds": s.seconds}
        return s

    before_stage = stage("before", tm + ["scan", "--format", "json"] + budget + target)
    before, failure = scan_result(before_stage, "before")
    if before is not None and before_stage.rc == SCRIPT_FAILED_AFTER_COMPILE and not before.get("findings"):
        # It compiled a graph, saw nothing, then failed (MaxViT's view of a non-contiguous tensor): not clean
        before, failure = None, {"kind": "compiled_error", "stage": "before", "rc": 8, "detail": before_stage.tail()}
    if before is None and before_stage.rc in (SCRIPT_FAILED, NOTHING_COMPILED, SCRIPT_FAILED_AFTER_COMPILE):
        # Does the model build and run at all? Asked only when the scan fails: a passing scan says it does.
        check = stage("check", [str(python), zoo.script, model, "--mode", mode, "--eager", "--steps", "1"])
        if check.rc != 0:
            kind = "timeout" if check.timed_out else "driver_error"
            if check.rc == NOT_INSTALLED and library is not None:  # found by the probe, not importable after all
                kind = "not_installed"
            failure = {"kind": kind, "stage": "check", "rc": check.rc, "detail": check.tail()}
    if before is None:
        rec["status"], rec["failure"] = failure["kind"], failure  # type: ignore[index]
        return rec
    (scans / f"{run_id}.before.json").write_text(before_stage.out)
    rec["before"] = counts(before)
    rec["found"] = compact(before)
    rec["status"] = "clean" if not before.get("findings") else "ok"
    if a.scan_only:
        return rec
    after, after_path = before, scans / f"{run_id}.before.json"
    if before.get("findings"):
        stream = ["--allow-random-stream"] if a.allow_random_stream else []
        fix_stage = stage(
            "fix", tm + ["fix", "--yes", "--unsafe", *stream, "--verify-backend", a.backend] + budget + target
        )
        rec["fix"] = parse_fix(fix_stage)
        if fix_stage.timed_out or fix_stage.rc not in FIX_ANSWERS:
            kind = "timeout" if fix_stage.timed_out else "torchmend_failure"
            rec["status"] = kind
            rec["failure"] = {"kind": kind, "stage": "fix", "rc": fix_stage.rc, "detail": fix_stage.tail()}
        rec["written"] = written(project, patches / f"{run_id}.patch", state)
        if rec["written"]["files"] or a.always_rescan:
            after_stage = stage("after", tm + ["scan", "--format", "json"] + budget + target)
            after, failure = scan_result(after_stage, "after")
            if after is None:
                rec["status"], rec["failure"] = failure["kind"], failure  # type: ignore[index]
                return rec
            after_path = scans / f"{run_id}.after.json"
            after_path.write_text(after_stage.out)
    rec["after"] = counts(after)
    rec["after"]["rescanned"] = after is not before
    if after.get("findings"):
        stream = ["--allow-random-stream"] if a.allow_random_stream else []
        ex = stage("explain", [str(python), str(HERE / "explain.py"), str(after_path), str(project), *stream])
        try:
            rec["left"] = json.loads(ex.out)
        except json.JSONDecodeError:
            rec["left"] = [dict(f, fix=None, why=None, advice=None) for f in after["findings"]]
            rec["explain_error"] = ex.tail()
    else:
        rec["left"] = []
    return rec


def evaluation_models() -> set[str]:
    """The models kept for evaluation (models-eval.txt, models-eval-26.txt beside this file)."""
    names: set[str] = set()
    for name in ("models-eval.txt", "models-eval-26.txt"):
        if (HERE / name).exists():
            names |= set(read_models(str(HERE / name))[0])
    return names


def key_of(rec: dict) -> tuple[str, str, str]:
    """(model, mode, use) of a record; records from before modes existed were train mode, vendored."""
    return rec["model"], rec.get("mode", "train"), rec.get("use", "vendored")


def done_runs(results: Path) -> set[tuple[str, str, str]]:
    if not results.exists():
        return set()
    done = set()
    for line in results.read_text().splitlines():
        try:
            done.add(key_of(json.loads(line)))
        except (json.JSONDecodeError, KeyError):
            continue  # a line cut short by a kill: that run happens again
    return done


def append(results: Path, rec: dict) -> None:
    """One line, under an exclusive lock: shards of --jobs append to the same file."""
    with results.open("a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.write(json.dumps(rec) + "\n")
        f.flush()
        fcntl.flock(f, fcntl.LOCK_UN)


def shard_of(models: list[str], spec: str | None) -> list[str]:
    if not spec:
        return models
    m = re.fullmatch(r"(\d+)/(\d+)", spec)
    if not m or not 1 <= int(m.group(1)) <= int(m.group(2)):
        sys.exit(f"--shard {spec}: expected I/N with 1 <= I <= N")
    i, n = int(m.group(1)), int(m.group(2))
    return models[i - 1 :: n]


def split_list(spec: str, allowed: tuple[str, ...] | dict, what: str) -> list[str]:
    items = [x.strip() for x in spec.split(",") if x.strip()]
    bad = [x for x in items if x not in allowed]
    if bad or not items:
        sys.exit(f"{what} {spec!r}: expected a comma-separated list of {', '.join(allowed)}")
    return items


def run_jobs(a: argparse.Namespace, argv: list[str], results: Path, projects: dict[str, Path]) -> int:
    """--jobs N: N shards of this same command at once, each with its own work folder whose scratch projects are
    clones of this one's; all append to `results`. SIGTERM is passed on (each stops after its run in progress)."""
    procs = []
    for i in range(1, a.jobs + 1):
        cmd = [sys.executable, str(Path(__file__).resolve()), *argv, "--jobs", "1", "--child", "--shard",
               f"{i}/{a.jobs}", "--work", str(a.work / f"shard-{i}"), "--results", str(results)]  # fmt: skip
        if a.threads:
            cmd += ["--threads", str(a.threads)]
        if a.stop_at:
            cmd += ["--stop-at", str(a.stop_at)]
        for use, project in projects.items():
            cmd += ["--base-project", f"{use}={project}"]
        procs.append(subprocess.Popen(cmd))

    def pass_on(*_: object) -> None:
        for p in procs:
            p.send_signal(signal.SIGTERM)

    signal.signal(signal.SIGTERM, pass_on)
    return max(p.wait() for p in procs)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    a = parse_args(argv)
    models, label = read_models(a.models)
    label = a.label or label
    zoo = ZOOS[a.zoo]
    if zoo.name != "transformers":  # LIBRARY:NAME entries, each of a library the zoo knows
        try:
            unknown = sorted({lib for lib, _ in map(parse_model, models)} - set(zoo.dists))
        except ValueError as e:
            sys.exit(f"--models: {e}")
        if unknown:
            sys.exit(f"--models: libraries {', '.join(unknown)} are not in the {zoo.name} zoo ({', '.join(zoo.dists)})")
    if a.shuffle is not None:
        random.Random(a.shuffle).shuffle(models)
    if a.stop_after is not None and a.stop_at is None:
        a.stop_at = time.time() + a.stop_after
    held_out = sorted(set(models) & evaluation_models())
    if held_out and not a.evaluation:
        sys.exit(
            f"{len(held_out)} of these models are kept for evaluation ({', '.join(held_out[:8])}"
            f"{', ...' if len(held_out) > 8 else ''}): never run them while developing; --evaluation runs them"
        )
    modes = split_list(a.modes, MODES, "--modes")
    uses = split_list(a.use, USES, "--use")
    if a.jobs > 1 and a.shard:
        sys.exit("--jobs and --shard: pick one (--jobs N runs the shards 1/N .. N/N itself)")
    if a.jobs > 1 and a.threads is None:
        a.threads = max(1, (os.cpu_count() or 1) // a.jobs)
    python = ensure_venv(a.venv.resolve() if a.venv.exists() else a.venv, a.torch_index_url, zoo)
    a.work = a.work.resolve()
    a.work.mkdir(parents=True, exist_ok=True)
    env0 = child_env(a.torchmend, a.work / "state", a.threads)
    info = probe(python, env0, a.vendor, a.work, zoo.dists if zoo.name != "transformers" else None)
    if not info.get("torchmend_path"):
        sys.exit(f"{python} cannot import torchmend: install it into the venv, or name a checkout with --torchmend")
    a.importable = set(info.get("importable") or ())
    stem = zoo.result_stem(info.get("versions") or {"transformers": info["transformers"]}, info["torch"])
    results = a.results or REPO / "benchmarks" / "results" / f"{stem}.jsonl"
    results = results.resolve()
    results.parent.mkdir(parents=True, exist_ok=True)
    bases = dict(b.split("=", 1) for b in a.base_project)
    projects = {
        use: build_project(
            a.work, a.script, info["vendor_paths"], use, Path(bases[use]) if use in bases else None, zoo.script
        )
        for use in uses
    }
    done = set() if a.redo else done_runs(results)
    if a.jobs > 1:
        print(f"{len(models)} models ({label}) x {modes} x {uses} in {a.jobs} shards, {a.threads} threads each; "
              f"results {results}", flush=True)  # fmt: skip
        rc = run_jobs(a, argv, results, projects)
    else:
        rc = run_shard(a, models, label, modes, uses, python, info, results, projects, done)
    if a.report and not a.child:
        from report import write_report  # benchmarks/corpus/report.py

        print(write_report(results))
    return rc


def run_shard(
    a: argparse.Namespace,
    models: list[str],
    label: str,
    modes: list[str],
    uses: list[str],
    python: Path,
    info: dict,
    results: Path,
    projects: dict[str, Path],
    done: set[tuple[str, str, str]],
) -> int:
    mine = shard_of(models, a.shard)
    todo = [(m, mode, use) for m in mine for use in uses for mode in modes if (m, mode, use) not in done]
    tag = f"[shard {a.shard}] " if a.shard else ""
    print(
        f"{tag}{len(mine)} models ({label}) x {len(modes)} modes x {len(uses)} uses, "
        f"{len(mine) * len(modes) * len(uses) - len(todo)} runs already in {results}; torch {info['torch']}, "
        f"transformers {info['transformers']}, torchmend {info.get('torchmend_path')} "
        f"({info.get('torchmend_commit')}); work {a.work}",
        flush=True,
    )
    stop = False

    def interrupted(*_: object) -> None:
        nonlocal stop
        stop = True
        print(f"{tag}stopping after this run", flush=True)

    signal.signal(signal.SIGTERM, interrupted)
    for i, (model, mode, use) in enumerate(todo, 1):
        if stop:
            break
        if a.stop_at and time.time() > a.stop_at:
            print(f"{tag}--stop-after reached: {len(todo) - i + 1} runs not started", flush=True)
            break
        start = time.monotonic()
        rec = run_model(model, mode, use, a, python, projects[use])
        rec.update(
            list=label,
            seconds=round(time.monotonic() - start, 1),
            date=time.strftime("%Y-%m-%d %H:%M"),
            torch=info["torch"],
            transformers=info["transformers"],
            torchmend=info.get("torchmend_commit"),
            backend=a.backend,
            steps=a.steps,
            scan_only=a.scan_only,
        )
        library = ZOOS[a.zoo].library_of(model)
        if library is not None:  # the libraries zoo: which library, at which version
            rec.update(zoo=a.zoo, library=library, library_version=(info.get("versions") or {}).get(library))
        append(results, rec)
        b, af = rec.get("before") or {}, rec.get("after") or {}
        total = lambda c: (c.get("graph_breaks") or 0) + (c.get("recompiles") or 0)  # noqa: E731
        print(
            f"{tag}[{i}/{len(todo)}] {model} {mode} {use}: {rec['status']}"
            + (f", breaks+recompiles {total(b)}" if b else "")
            + (f" -> {total(af)}" if af else "")
            + (f", verdict {rec['fix'].get('verdict')}" if rec.get("fix") else "")
            + f" ({rec['seconds']} s)",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
