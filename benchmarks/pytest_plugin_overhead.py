"""What the pytest plugin costs a passing test: the same marked test with the plugin and without it, side by side.

A scratch project holds one test file with three identical tests (a fresh small model compiled with aot_eager, five
training steps; clean: no break, no recompile) marked `@pytest.mark.torchmend`. Each round runs it in three fresh
pytest processes, in rotating order: with the plugin (`-p torchmend.plugin`); without it (`-p no:torchmend.plugin`, the mark
then only a registered name); and without it but with a `torch._dynamo.reset()` at the start of each test, which is
what the plugin does first, so plugin / plain-reset is the cost of recording and judging alone. A conftest measures
each test's call phase (wall and CPU seconds, one thread). Printed, medians over the rounds: the first test of a
session (it pays dynamo's warm-up and, with the plugin, the analysis imports), the 2nd and 3rd tests (without a
reset, a new instance of the same module class reuses the compiled code: no compile at all), and the whole pytest
process.

Run: .venv/bin/python benchmarks/pytest_plugin_overhead.py [--rounds N] [--steps N]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

MODEL = """\
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(32, 64)
        self.fc2 = nn.Linear(64, 1)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))
"""

TEST = """\
import os

import pytest
import torch

from model import Net

STEPS = {steps}


def train():
    if os.environ.get("BENCH_RESET"):  # the plain-reset arm: start from nothing compiled, as the plugin does
        torch._dynamo.reset()
    torch.manual_seed(0)
    model = Net()
    compiled = torch.compile(model, backend="aot_eager")
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for _ in range(STEPS):
        loss = torch.nn.functional.mse_loss(compiled(torch.randn(16, 32)), torch.randn(16, 1))
        loss.backward()
        opt.step()
        opt.zero_grad()


@pytest.mark.torchmend(graph_breaks=0, recompiles=0)
def test_first():
    train()


@pytest.mark.torchmend(graph_breaks=0, recompiles=0)
def test_second():
    train()


@pytest.mark.torchmend(graph_breaks=0, recompiles=0)
def test_third():
    train()
"""

CONFTEST = """\
import json
import os
import time

import pytest


@pytest.hookimpl(wrapper=True, tryfirst=True)  # outermost: the plugin's own work is inside the measured span
def pytest_runtest_call(item):
    wall, cpu = time.perf_counter(), time.process_time()
    try:
        return (yield)
    finally:
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        with open(os.environ["BENCH_DURATIONS"], "a") as f:
            f.write(json.dumps([item.nodeid, wall, cpu]) + "\\n")


def pytest_runtest_logreport(report):
    if report.when == "call" and report.outcome != "passed":
        with open(os.environ["BENCH_DURATIONS"], "a") as f:
            f.write(json.dumps([report.nodeid, "failed", 0]) + "\\n")
"""

INI = "[pytest]\nmarkers =\n    torchmend: registered here too, so the plain arm knows the name\n"

ARMS = {
    "plugin": ["-p", "torchmend.plugin"],
    "plain": ["-p", "no:torchmend.plugin"],
    "plain-reset": ["-p", "no:torchmend.plugin"],
}


def run_arm(project: Path, arm: str) -> tuple[list[float], list[float], float]:
    durations = project / f"durations-{arm}.jsonl"
    durations.unlink(missing_ok=True)
    # one thread: the machine this was written on is shared, and CPU seconds are what compare there
    env = dict(os.environ, BENCH_DURATIONS=str(durations), PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    if arm == "plain-reset":
        env["BENCH_RESET"] = "1"
    t0 = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *ARMS[arm], "test_bench.py"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
    )
    wall = time.monotonic() - t0
    rows = [json.loads(line) for line in durations.read_text().splitlines()]
    if proc.returncode != 0 or len(rows) != 3 or any(r[1] == "failed" for r in rows):
        sys.exit(f"the {arm} arm did not pass:\n{proc.stdout[-3000:]}\n{proc.stderr[-2000:]}")
    return [r[1] for r in rows], [r[2] for r in rows], wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=5)
    a = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="torchmend-pytest-bench-") as tmp:
        project = Path(tmp)
        (project / "model.py").write_text(MODEL)
        (project / "test_bench.py").write_text(TEST.format(steps=a.steps))
        (project / "conftest.py").write_text(CONFTEST)
        (project / "pytest.ini").write_text(INI)
        # (measure, arm) -> values; measures: first/later test call, wall and CPU; the whole pytest process, wall
        seen: dict[tuple[str, str], list[float]] = {}
        for i in range(a.rounds):
            for arm in list(ARMS)[i % 3 :] + list(ARMS)[: i % 3]:  # rotate which arm goes first
                walls, cpus, w = run_arm(project, arm)
                seen.setdefault(("first test, wall", arm), []).append(walls[0])
                seen.setdefault(("first test, CPU", arm), []).append(cpus[0])
                seen.setdefault(("2nd and 3rd tests, wall", arm), []).extend(walls[1:])
                seen.setdefault(("2nd and 3rd tests, CPU", arm), []).extend(cpus[1:])
                seen.setdefault(("whole pytest process, wall", arm), []).append(w)
            print(f"round {i + 1}/{a.rounds} done", file=sys.stderr, flush=True)
    print(f"{a.rounds} rounds, {a.steps} training steps per test, torch.compile(backend='aot_eager'), one thread")
    print(f"{'median seconds':28} {'plain':>6} {'reset':>6} {'plugin':>6} {'plugin/plain':>12} {'plugin/reset':>12}")
    for measure in dict.fromkeys(m for m, _ in seen):
        p, r, q = (statistics.median(seen[(measure, arm)]) for arm in ("plain", "plain-reset", "plugin"))
        print(f"{measure:28} {p:6.3f} {r:6.3f} {q:6.3f} {q / p:12.2f} {q / r:12.2f}")
    print("ranges (min-max):")
    for (measure, arm), values in seen.items():
        print(f"  {measure:28} {arm:12} {min(values):.3f}-{max(values):.3f}")


if __name__ == "__main__":
    main()
