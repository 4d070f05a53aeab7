"""Multi-rank runs: `scan --nproc-per-node`, `scan -- torchrun ...`, and `scan/fix --from-trace` on the
TORCH_TRACE logs of a real 2-rank DDP job (gloo, CPU). The fixture breaks the graph at a `print` on every
rank and recompiles on rank 1 only (fixtures/distributed/ddp/train.py says how)."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, CliResult, torchmend

# One worker runs this whole file under pytest-xdist: its module-scoped runs are shared by its tests.
pytestmark = pytest.mark.xdist_group("distributed")

FIXTURE = ROOT / "fixtures" / "distributed" / "ddp" / "train.py"
PRINT_LINE, TEMPERATURE_LINE = 27, 28  # the `print` in forward; the line that divides by `temperature`
FAST = {"BACKEND": "aot_eager"}


def _key(f: dict) -> tuple:
    return f["rule"], f["file"], f["line"]


def _ranks(f: dict) -> dict[int, int]:
    return {int(r): n for r, n in (f["ranks"] or {}).items()}


def _by_rule(report: dict) -> dict[str, dict]:
    return {f["rule"]: f for f in report["findings"] if f["where"] == "project"}


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The user's checkout: a copy of the fixture in a directory of its own (its project root)."""
    d = tmp_path_factory.mktemp("checkout")
    shutil.copy(FIXTURE, d / "train.py")
    return d


@pytest.fixture(scope="module")
def ranked_events(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the `ranked` scan keeps its ranks' event streams (`--keep-events`)."""
    return tmp_path_factory.mktemp("ranked-events")


@pytest.fixture(scope="module")
def ranked(checkout: Path, ranked_events: Path):
    """`torchmend scan ... -- torchrun --nproc-per-node=2 train.py`, the torchrun command-line form (the
    `--nproc-per-node 2` form runs in the fix, failing-rank and hung-rank tests; launch.resolve gives both the same
    launch, tests/unit/test_launch_and_pathmap.py): both ranks, json. `--steps 10` (all the script makes) ends every
    rank at its last step through the budget (os._exit), before the exit where torch 2.13's gloo can deadlock. Its
    events are kept: the rank-divergence test judges a patched run against them."""
    r = torchmend(
        "scan",
        "--format",
        "json",
        "--steps",
        "10",
        "--timeout",
        "300",
        "--keep-events",
        str(ranked_events),
        "--",
        "torchrun",
        "--nproc-per-node=2",
        "train.py",
        cwd=checkout,
        env=FAST,
    )
    assert r.returncode == 0, r.stderr
    return r.json


@pytest.fixture(scope="module")
def trace_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """TORCH_TRACE logs of the same job run by plain torchrun somewhere else (another directory tree, as a
    cluster's would be): the checkout's paths are not in them."""
    elsewhere = tmp_path_factory.mktemp("cluster") / "home" / "alice" / "proj"
    elsewhere.mkdir(parents=True)
    shutil.copy(FIXTURE, elsewhere / "train.py")
    logs = elsewhere.parent / "logs"
    tmp = tmp_path_factory.mktemp("torchrun-tmp")  # torchrun leaves torchelastic_* directories in TMPDIR
    env = dict(os.environ, TORCH_TRACE=str(logs), TMPDIR=str(tmp), **FAST)
    proc = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--standalone", "train.py"],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    shutil.rmtree(elsewhere)  # as on another machine: the recorded paths do not exist here
    return logs


def test_every_rank_is_collected_and_tagged(ranked: dict) -> None:
    s = ranked["summary"]
    assert s["ranks"] == 2
    assert [r["rank"] for r in s["per_rank"]] == [0, 1]
    assert [r["recompiles"] for r in s["per_rank"]] == [0, 1]
    assert all(r["graph_breaks"] >= 1 for r in s["per_rank"])
    assert s["graph_breaks"] == sum(r["graph_breaks"] for r in s["per_rank"])
    assert ranked["launcher"] == ["--nproc-per-node=2", "--standalone"]


def test_ddp_own_breaks_are_expected_not_to_fix(ranked: dict) -> None:
    expected = [f for f in ranked["findings"] if f["expected"]]
    assert sorted(f["gb_id"] for f in expected) == ["GB0007", "GB0156"]
    assert all(f["severity"] == "info" and "DistributedDataParallel" in f["expected"] for f in expected)


def test_break_on_every_rank_recompile_on_rank_1_only(ranked: dict) -> None:
    found = _by_rule(ranked)
    brk = found["TM101"]
    assert (brk["file"], brk["line"]) == ("train.py", PRINT_LINE)
    assert _ranks(brk) == {0: 1, 1: 1} and not brk["divergent"]
    rec = found["TM202"]
    assert (rec["file"], rec["line"], rec["variable"]) == ("train.py", TEMPERATURE_LINE, "temperature")
    assert _ranks(rec) == {1: 1} and rec["divergent"]
    assert rec["severity"] == "fix"  # once on one rank: the other rank waits, so it is worth fixing
    assert sorted(f["rule"] for f in ranked["findings"] if f["divergent"]) == ["TM202"]


def test_same_findings_as_a_single_process_run(checkout: Path, ranked: dict) -> None:
    """One process (world size 1) whose own rank is the divergent one shows the same findings."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {
        **FAST,
        "RANK": "0",
        "WORLD_SIZE": "1",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(port),
        "DIVERGENT_RANK": "0",
    }
    single = torchmend("scan", "train.py", "--format", "json", "--timeout", "300", cwd=checkout, env=env)
    assert single.returncode == 0, single.stderr
    assert {_key(f) for f in single.json["findings"]} == {_key(f) for f in ranked["findings"]}
    assert all(f["ranks"] is None for f in single.json["findings"])
    assert single.json["summary"]["ranks"] is None


def test_table_names_ranks_and_divergence(checkout: Path, trace_dir: Path) -> None:
    r = torchmend("scan", "--from-trace", str(trace_dir), cwd=checkout)  # the same report as a live run's
    assert r.returncode == 0, r.stderr
    assert "2 ranks (counts summed over them)" in r.stdout
    assert "rank 1: " in r.stdout and "1 recompile," in r.stdout
    out = " ".join(r.stdout.split())
    assert "1 rank-divergent finding: TM202 train.py:28 on rank 1 (1×)" in out
    assert "a collective that one rank skips (a branch on the rank or on its data) hangs the job" in out
    # DDP's own breaks (its logger, `_inside_ddp_forward`): shown apart, not counted as findings to fix
    assert "2 expected from DistributedDataParallel" in out
    assert "from DistributedDataParallel (its logger), expected on " in out


def test_from_trace_gives_the_same_findings_with_paths_mapped(checkout: Path, ranked: dict, trace_dir: Path) -> None:
    r = torchmend("scan", "--from-trace", str(trace_dir), "--format", "json", cwd=checkout)
    assert r.returncode == 0, r.stderr
    old = str(trace_dir.parent / "proj")
    assert f"paths: {old} → {checkout} (guessed from 1 file" in r.stderr
    report = r.json
    assert report["script"] is None and report["summary"]["ended_by"] == "trace"
    assert sorted(Path(p).name.split("_")[5] for p in report["trace"]["files"]) == ["0", "1"]  # rank_N_
    assert report["trace"]["path_map"] == [{"old": old, "new": str(checkout), "guessed": True}]
    assert [(_key(f), _ranks(f), f["divergent"]) for f in report["findings"]] == [
        (_key(f), _ranks(f), f["divergent"]) for f in ranked["findings"]
    ]
    assert _by_rule(report)["TM202"]["path"] == str(checkout / "train.py")


def test_explicit_path_map(checkout: Path, trace_dir: Path) -> None:
    old = trace_dir.parent / "proj"
    r = torchmend(
        "scan", "--from-trace", str(trace_dir), "--path-map", f"{old}={checkout}", "--format", "json", cwd=ROOT
    )  # run from elsewhere: the project is what --project says
    assert r.returncode == 0, r.stderr
    assert "guessed" not in r.stderr
    assert {f["rule"] for f in r.json["findings"] if f["where"] == "project"} == set()  # ROOT is the project
    r = torchmend(
        "scan",
        "--from-trace",
        str(trace_dir),
        "--path-map",
        f"{old}={checkout}",
        "--project",
        str(checkout),
        "--format",
        "json",
        cwd=ROOT,
    )
    assert r.returncode == 0, r.stderr
    assert {f["rule"] for f in r.json["findings"] if f["where"] == "project"} == {"TM101", "TM202"}


def test_fix_from_trace_proposes_without_running(checkout: Path, trace_dir: Path, tmp_path: Path) -> None:
    before = (checkout / "train.py").read_text()
    r = torchmend("fix", "--from-trace", str(trace_dir), "--diff", "--unsafe", cwd=checkout)
    assert r.returncode == 0, r.stderr
    assert (checkout / "train.py").read_text() == before  # --diff writes nothing
    assert "+        if not torch.compiler.is_compiling():" in r.stdout
    assert "model(x, torch.tensor(temperature, device=x.device))" in r.stdout
    work = tmp_path / "w"
    shutil.copytree(checkout, work)
    subprocess.run(["patch", "-p1", "--quiet"], input=r.stdout, text=True, cwd=work, check=True)
    compile((work / "train.py").read_text(), "train.py", "exec")


def test_fix_with_ranks_verifies_on_both_ranks(tmp_path: Path) -> None:
    shutil.copy(FIXTURE, tmp_path / "train.py")

    def fix() -> CliResult:
        return torchmend(
            "fix",
            "--nproc-per-node",
            "2",
            "train.py",
            "--yes",
            "--unsafe",
            "--steps",
            "10",
            "--timeout",
            "60",
            "--verdict-json",
            str(tmp_path / "verdict.json"),
            cwd=tmp_path,
            env=FAST,
        )

    r = fix()
    if r.returncode == 10 and re.search(r"recorded (10 and 0|0 and 10) losses|ran out of its time budget", r.stdout):
        # A verification arm (either) that hung until the timeout without its END event: torch 2.13's gloo can deadlock
        # a rank while the job shuts down (see the fixture), seen in about 1 of 4 runs on a loaded 2-core
        # machine, also before torchmend's changes. One retry tells that apart from a torchmend failure.
        r = fix()
    assert r.returncode == 0, r.stdout + r.stderr
    # judged on the script's own backend, aot_eager (FAST): untimed, and the scan stands as the before-run
    assert "judging on the script's own backend (1 run per arm, not timed" in r.stdout
    assert "verdict: no measured speed change" in r.stdout
    assert "numerics match" in r.stdout
    text = (tmp_path / "train.py").read_text()
    assert "torch.tensor(temperature, device=x.device)" in text and "is_compiling()" in text
    # each rank judged on its own runs (verify/ranks.py): its numbers, its counts; the ranks compile alike after
    doc = json.loads((tmp_path / "verdict.json").read_text())["verification"]
    assert [r["rank"] for r in doc["ranks"]] == [0, 1]
    assert all(r["numerics"]["compared"] and r["verdict"] != "refused" for r in doc["ranks"])
    rank1 = {m["name"]: m for m in doc["ranks"][1]["counts"]}
    assert (rank1["recompiles"]["before"]["median"], rank1["recompiles"]["after"]["median"]) == (1, 0)
    assert "ranks_differ" not in doc["reason_kinds"]
    out = " ".join(r.stdout.split())
    assert "rank 0: frames compiled " in out and "rank 1: frames compiled " in out and "numerics match" in out


def test_a_change_that_makes_the_ranks_compile_different_graphs_is_refused(
    checkout: Path, ranked: dict, ranked_events: Path
) -> None:
    """The gate judges each rank (verify/ranks.py): a patch that drops the print on rank 0 only makes fewer breaks
    in all and the same numbers, and rank 0 then compiles forward whole where rank 1 still breaks. The `ranked` scan's
    kept events are the original's run; the patched one is one more real 2-rank run (aot_eager, as the scan)."""
    from torchmend.model import EndedBy
    from torchmend.profiler.events import END, read_events
    from torchmend.profiler.runner import RunOutcome, RunSpec
    from torchmend.values import Root
    from torchmend.verify.compare import REFUSED, judge
    from torchmend.verify.reasons import ReasonKind
    from torchmend.verify.runs import from_outcome, run_one

    events = [{**e, "rank": r} for r in (0, 1) for e in read_events(ranked_events / f"events.rank{r}.jsonl")]
    end = next(e for e in reversed(events) if e.get("ev") == END and e["rank"] == 0)
    s = ranked["summary"]
    original = RunOutcome(events, EndedBy(s["ended_by"]), 0, s["wall_seconds"], "", end)
    root = Root(checkout)
    before = from_outcome("before", 0, original, root)
    script = checkout / "train.py"
    text = script.read_text()
    gated = text.replace("import time\n", "import time\n\nRANK = int(os.environ['RANK'])\n", 1).replace(
        '        print("hidden", h.shape)', '        if RANK != 0:\n            print("hidden", h.shape)', 1
    )
    spec = RunSpec(
        script,
        steps=10,
        timeout=300,
        cwd=checkout,
        launcher=tuple(ranked["launcher"]),
        env=tuple(FAST.items()),
        overlay=((str(script), gated),),
    )
    after = run_one(spec, root, "after")
    assert after.summary.ranks == 2, after.outcome.output_tail
    v = judge([before], [after], root=root, timed=False)
    assert v.metric("graph_breaks").after.median < v.metric("graph_breaks").before.median  # fewer, summed
    assert v.numerics is not None and v.numerics.equal
    assert v.verdict == REFUSED and v.kinds() == {ReasonKind.RANKS_DIFFER}, v.reasons
    assert [r.rank for r in v.ranks] == [0, 1]
    assert all(r.verification.numerics is not None and r.verification.numerics.equal for r in v.ranks)
    (reason,) = v.reasons
    assert "graph breaks 3 on rank 0, 4 on rank 1" in reason.text
    assert "the original's ranks agreed" in reason.text and "4 graph breaks" in reason.text


def test_a_failing_rank_is_reported(checkout: Path) -> None:
    r = torchmend(
        "scan",
        "--nproc-per-node",
        "2",
        "train.py",
        "--format",
        "json",
        "--timeout",
        "240",
        cwd=checkout,
        env={**FAST, "CRASH_RANK": "1"},
    )
    assert r.returncode == 8, r.stderr  # failed after compiling: the report shows what was seen
    assert r.json["error"] == "RuntimeError: rank 1 gave up at step 3"  # the first to fail, not rank 0's echo
    assert r.json["error_rank"] == 1
    assert "rank 1 gave up at step 3" in r.stderr


def test_a_hung_rank_is_stopped_at_the_timeout_with_every_worker(checkout: Path) -> None:
    r = torchmend(
        "scan",
        "--nproc-per-node",
        "2",
        "train.py",
        "--format",
        "json",
        "--timeout",
        "20",
        "--keep-events",
        str(checkout / "events"),
        cwd=checkout,
        env={**FAST, "HANG_RANK": "1"},
    )
    assert r.returncode == 0, r.stderr
    assert r.json["summary"]["ended_by"] == "timeout"
    from torchmend.profiler.events import read_events

    pids = [
        e["pid"]
        for p in (checkout / "events").glob("events.rank*.jsonl")
        for e in read_events(p)
        if e.get("ev") == "start"
    ]
    assert len(pids) == 2
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


@pytest.mark.parametrize(
    "args, code, message",
    [
        (("scan", "--from-trace", "."), 22, "holds no trace logs"),
        (("scan", "--from-trace", "nowhere"), 22, "no such file or directory"),
        (("scan", "--from-trace", ".", "--path-map", "oops"), 2, "--path-map wants OLD=NEW"),
        (("scan", "train.py", "--from-trace", "."), 2, "give no script with it"),
        (("scan", "--", "torchrun", "--nnodes", "2", "train.py"), 2, "--nnodes 2"),
        (("scan", "--", "torchrun", "-m", "pkg.train"), 2, "runs a module"),
        (("scan", "--nproc-per-node", "2", "--", "torchrun", "train.py"), 2, "goes in the torchrun command"),
        (("scan",), 2, "give a training script"),
        (("scan", "train.py", "--path-map", "a=b"), 2, "--path-map goes with --from-trace"),
    ],
)
def test_bad_input(checkout: Path, tmp_path: Path, args: tuple, code: int, message: str) -> None:
    r = torchmend(*args, cwd=checkout)
    assert r.returncode == code, r.stdout + r.stderr
    assert message in " ".join(r.stderr.split()), r.stderr
