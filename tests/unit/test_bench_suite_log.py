"""The benchmark suite's accumulating results file, on fake records: append/load/resume keys, the slice of the
plan a device command runs, the time budget, a child's peak RSS, and the report rebuilt from the records."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))

import suite  # noqa: E402
import suite_log  # noqa: E402

BASE = {"device": "cuda", "torch": "2.11.0", "backend": None, "host": "h", "device_name": "H100"}


def fake_run(scenario: str, variant: str, rep: int, *, mode: str = "default", steady: float = 1e-3, **kw) -> dict:
    rec = {
        **BASE,
        "kind": "run",
        "ts": f"2026-11-24T1{rep}:00:00+00:00",
        "steps": 500,
        "scenario": scenario,
        "regime": "overhead",
        "mode": mode,
        "variant": variant,
        "repeat": rep,
        "ok": True,
        "ended_by": "steps",
        "graphs": 1,
        "graph_breaks": 0,
        "recompiles": 0,
        "recompile_limit_hits": 0,
        "compile_seconds": 2.0,
        "first_step_s": 5.0,
        "steady_step_s": steady,
        "wall_seconds": 20.0,
        "step_s": [0.1, steady, steady],
        "capture": {"losses": [1.0, 0.5, 0.25], "params": None, "outputs": None, "numerics": None},
    }
    rec.update(kw)
    return rec


def config(**kw) -> dict:
    cfg = {
        "scenarios": ["a", "b"],
        "regimes": ["overhead"],
        "modes": ["default"],
        "repeat": 2,
        "steps": {"overhead": 500},
        "backend": None,
        "fix_steps": 30,
        "smoke": False,
        "cost_scenarios": [],
        "notes": [],
        "target_ratio": 1.03,
        "parts": ["variants", "cost"],
        "stem": "suite-cuda-torch2.11",
    }
    cfg.update(kw)
    return cfg


def report_meta() -> dict:
    return {
        "device": "cuda",
        "device_name": "H100",
        "cpu": "x",
        "torch": "2.11.0",
        "cuda_version": None,
        "triton": None,
        "python": "3.12",
        "threads": 8,
        "host_note": "n",
        "command": "c",
        "date": "d",
        "platform": "p",
        "total_wall_s": 1.0,
        "interrupted": False,
        "results_file": "r.jsonl",
    }


def test_append_load_and_a_torn_line(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    suite_log.append(path, fake_run("a", "hand", 0))
    suite_log.append(path, fake_run("a", "hand", 1))
    with open(path, "a") as f:
        f.write('{"schema": "torchmend.bench-suite-run/1", "kind": "ru')  # killed mid-write
    recs = suite_log.load(path)
    assert [r["repeat"] for r in recs] == [0, 1]
    keys = suite_log.done_keys(recs)
    assert suite_log.key_of(fake_run("a", "hand", 0)) in keys
    assert suite_log.key_of(fake_run("a", "hand", 0, mode="reduce-overhead")) not in keys
    assert suite_log.key_of(fake_run("a", "eager", 0)) not in keys
    assert suite_log.load(tmp_path / "none.jsonl") == []


def test_only_and_shard_pick_a_slice() -> None:
    groups = [f"{s}/{r}/{m}" for r in ("overhead", "compute") for m in ("default", "reduce-overhead") for s in "abc"]
    assert suite_log.select(groups, ["b/*"], None) == [
        "b/overhead/default",
        "b/overhead/reduce-overhead",
        "b/compute/default",
        "b/compute/reduce-overhead",
    ]
    assert suite_log.select(groups, ["*/compute/reduce-overhead"], None) == [
        "a/compute/reduce-overhead",
        "b/compute/reduce-overhead",
        "c/compute/reduce-overhead",
    ]
    shards = [suite_log.select(groups, None, (k, 3)) for k in (1, 2, 3)]
    assert sorted(sum(shards, [])) == sorted(groups) and all(len(s) == 4 for s in shards)
    assert suite_log.parse_shard("2/5") == (2, 5) and suite_log.parse_shard(None) is None
    with pytest.raises(ValueError):
        suite_log.parse_shard("6/5")


def test_budget_uses_the_slowest_run_so_far() -> None:
    now = [0.0]
    b = suite_log.Budget(100.0, first_guess=30.0, clock=lambda: now[0])
    assert b.allows()
    now[0] = 60.0
    b.took(10.0)
    assert b.allows()  # 60 + 10 <= 100
    b.took(45.0)
    assert not b.allows()  # 60 + 45 > 100
    assert suite_log.Budget(None).allows()


def test_run_tree_peak_rss_counts_the_grandchild(tmp_path: Path) -> None:
    grandchild = "import subprocess, sys; subprocess.run([sys.executable, '-c', 'x = bytearray(200 << 20)'])"
    wall, rc, out, err, rss = suite_log.run_tree([sys.executable, "-c", grandchild], tmp_path, {}, 60)
    assert rc == 0 and rss is not None and rss > 200 * 1024
    _, rc, _, err, rss = suite_log.run_tree(["sleep", "5"], tmp_path, {}, 0.5)
    assert rc == -9 and rss is None and "timeout" in err


def test_report_rebuilt_from_accumulated_records() -> None:
    recs = [fake_run("a", v, rep, steady=2e-3 if v == "compiled" else 1e-3) for rep in (0, 1) for v in suite.VARIANTS]
    recs += [fake_run("b", v, 0) for v in suite.VARIANTS]  # b: one repeat of two, a second session later
    recs += [
        {
            **BASE,
            "kind": "fix",
            "scenario": "a",
            "ts": "2026-11-24T09:00:00+00:00",
            "rules": ["TM201"],
            "changed": True,
            "diff": "+x",
            "changed_lines": 1,
            "headline": "",
            "rc": 0,
            "wall_s": 1.0,
        }
    ]
    recs += [
        {
            **BASE,
            "kind": "cost",
            "ts": "2026-11-24T12:00:00+00:00",
            "steps": 500,
            "scenario": "a",
            "regime": "overhead",
            "mode": "default",
            "variant": k,
            "repeat": 0,
            "ok": True,
            "wall_s": w,
            "rc": 0,
            "maxrss_kb": m,
            **({} if k == "plain" else {"findings": [["TM101", "broken.py", 3]]}),
        }
        for k, w, m in (
            ("plain", 20.0, 1000 * 1024),
            ("scan_aot_eager", 10.0, 900 * 1024),
            ("scan_inductor", 21.0, 1050 * 1024),
        )
    ]
    meta = report_meta()
    data = suite.build(recs, meta, config())
    a = data["cells"]["overhead/default"]["a"]
    assert a["torchmend"]["runs"] == 2 and a["summary"]["counts_equal"] is True
    assert a["summary"]["torchmend_over_hand"] == pytest.approx(1.0)
    assert a["summary"]["compiled_over_torchmend"] == pytest.approx(2.0)
    assert a["summary"]["numerics"]["torchmend_vs_hand"] == [True, True]
    assert data["meta"]["missing"] == ["b/overhead/default: 4 of 8 runs"]
    assert [(s["runs"], s["cost"]) for s in data["meta"]["sessions"]] == [(8, 0), (4, 0), (0, 3)]
    cost = data["cost"]["scenarios"]["a"]
    assert cost["rss_scan_inductor_over_plain"] == pytest.approx(1.05)
    assert cost["same_findings"] is True
    md = suite.markdown(data, [])
    assert "Which parts ran when" in md and "Still missing" in md and "b/overhead/default: 4 of 8 runs" in md
    assert "Peak memory" in md and "| a | 1000 | 1050 | 900 | 1.05 | 0.90 |" in md
    json.dumps(data)  # the JSON the suite writes


def test_noise_control_from_the_eager_variant_in_two_modes() -> None:
    """Eager is one program under both modes: their ratio is the A/A band, and a 'no' inside it says so."""
    steady = {("a", "default"): 1.0e-3, ("a", "reduce-overhead"): 1.2e-3, ("b", "default"): 1e-3}
    recs = [
        fake_run(
            n, v, 0, mode=m, steady=steady.get((n, m), 1e-3) if v == "eager" else (1.1e-3 if v == "torchmend" else 1e-3)
        )
        for n in ("a", "b")
        for m in ("default", "reduce-overhead")
        for v in suite.VARIANTS
    ]
    data = suite.build(recs, report_meta(), config(modes=["default", "reduce-overhead"], repeat=1))
    noise = data["meta"]["noise"]["overhead"]
    assert noise["pairs"] == {"a": pytest.approx(1 / 1.2), "b": pytest.approx(1.0)}
    assert noise["max_dev"] == pytest.approx(1 - 1 / 1.2)
    s = data["cells"]["overhead/default"]["a"]["summary"]
    assert s["torchmend_over_hand"] == pytest.approx(1.1) and s["within_target"] is False
    assert suite.target_verdict(s, noise) == "no (inside the A/A band ±17 %)"
    assert suite.target_verdict(s, {"pairs": {}, "max_dev": 0.02}) == "**no**"  # ranges of one repeat do not overlap
    md = suite.markdown(data, [])
    assert "A/A control" in md and "| overhead | 0.833 | 1.000 | ±17 % |" in md


def test_cudagraph_check_cases_and_report() -> None:
    sys.path.insert(0, str(BENCH / "gpu"))
    import cudagraph_check as cg

    cases = cg.cases(None)
    mc = cases["scenario:module_counter"]
    fixed = mc["fixed"].read_text()
    assert "self.calls.add_(1)" in fixed and "self.calls = self.calls" not in fixed  # in place: CUDA graphs
    assert all(c["fixed"].exists() and c["eager"].exists() for c in cases.values())
    assert "fixture:several" in cases and cases["fixture:several"]["hand"] is None
    first, timing = cg.plan({"scenario:module_counter": mc}, 3, True)
    assert first == [("scenario:module_counter", a, 0) for a in ("eager", "fixed_eager", "fixed_ro", "hand_ro")]
    assert len(timing) == 3 * 4 - 2 and ("scenario:module_counter", "fixed_ro", 1) in timing
    env = dict(cg.env_for("fixture:several", "fixed_ro", "cuda", "reduce-overhead"))
    assert env["TM_COMPILE_MODE"] == "reduce-overhead" and env["TM_DEFAULT_DEVICE"] == "cuda"
    assert dict(cg.env_for("scenario:item", "hand_default", "cuda", "reduce-overhead"))["TM_BENCH_MODE"] == "default"

    def rec(arm: str, rep: int, compile_s: float, **kw) -> dict:
        r = fake_run("scenario:module_counter", arm, rep, compile_seconds=compile_s, **kw)
        r.update(kind="cudagraph", mode="reduce-overhead")
        return r

    recs = [rec("eager", 0, 0.0), rec("fixed_eager", 0, 0.0), rec("fixed_ro", 0, 10.0)]
    recs += [rec("hand_ro", 0, 10.0, recompiles=1)]
    recs += [rec(a, r, s) for r in (0, 1) for a, s in (("fixed_default", 4.2), ("hand_default", 4.0))]
    md = cg.report(recs, {"scenario:module_counter": mc, "fixture:several": cases["fixture:several"]}, Path("x"))
    row = "| scenario:module_counter | TM201 | runs | 1/0/0/0 | **no** (hand 1/0/1/0) | match (strict: match) | match"
    assert row in md
    assert "| fixture:several | TM101, TM103, TM201, TM202 | not run yet |" in md
    assert "| default | 4.20 (4.20–4.20) | 4.00 (4.00–4.00) | 1.050 (2 / 2 runs) |" in md
