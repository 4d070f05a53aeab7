"""benchmarks/gate/run.py's judgement of a timed case: losses that drift over a long run are equal only within the
original's own compiled-vs-eager difference (the arm "eager"), never because nothing measured the band."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _run_module():
    spec = importlib.util.spec_from_file_location("gate_run", ROOT / "benchmarks" / "gate" / "run.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["gate_run"] = mod
    spec.loader.exec_module(mod)
    return mod


run = _run_module()


def _run(arm: str, rep: int, losses: list[float], step: float) -> dict:
    ends = [1.0 + step * i for i in range(20)]
    record = {"status": "ok", "step_ends": ends, "losses": losses, "compile": {"compile_s": 1.0}}
    return {"kind": "run", "arm": arm, "rep": rep, "rc": 0, "wall_s": ends[-1], "record": record}


def _case(after: list[float], eager: list[float] | None) -> dict:
    before = [1.0, 0.9, 0.8]
    runs = [_run("before", r, before, 0.02) for r in range(3)] + [_run("after", r, after, 0.01) for r in range(3)]
    if eager is not None:
        runs.append(_run(run.EAGER, 0, eager, 0.05))
    return run.summarise({"changed": True}, runs)


def test_a_drift_within_the_compilers_own_difference_is_equal() -> None:
    s = _case(after=[1.0, 0.9, 0.82], eager=[1.0, 0.9, 0.84])
    assert s["numerics_equal"] and s["numerics_within"] == "compiler"
    assert s["verdict"].startswith("yes"), s["verdict"]
    assert "eager" not in s  # a reference, not an arm whose times are reported


def test_a_drift_beyond_it_differs_and_says_so() -> None:
    s = _case(after=[1.0, 0.9, 0.9], eager=[1.0, 0.9, 0.81])
    assert not s["numerics_equal"]
    assert "beyond the compiler's own difference" in s["verdict"]


def test_without_an_eager_run_a_drift_is_not_excused() -> None:
    s = _case(after=[1.0, 0.9, 0.82], eager=None)
    assert not s["numerics_equal"]
    assert "no eager reference run" in s["verdict"]


def test_within_rtol_needs_no_reference() -> None:
    s = _case(after=[1.0, 0.9, 0.8000001], eager=None)
    assert s["numerics_equal"] and s["numerics_within"] == "rtol"
