"""`--dist loadgroup` keeps a module's xdist_group on one worker (tests/xdist_groups.py), whatever pytest is
installed: the suite's module-scoped runs (test_distributed.py, test_benchmarks_smoke.py, test_numerics.py) are paid
once only where that holds. A real pytest-xdist run of a small suite with two workers."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

pytest.importorskip("xdist")

GROUPED = """
import os
import pytest

pytestmark = pytest.mark.xdist_group("together")


@pytest.mark.parametrize("i", range(8))
def test_grouped(i):
    with open(os.environ["WORKERS_SEEN"], "a") as f:
        f.write(os.environ["PYTEST_XDIST_WORKER"] + "\\n")
"""

LOOSE = """
import time
import pytest


@pytest.mark.parametrize("i", range(8))
def test_loose(i):
    time.sleep(0.05)
"""


def test_a_module_group_runs_on_one_worker(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text(
        f"import sys\nsys.path.insert(0, {str(ROOT / 'tests')!r})\n"
        "from xdist_groups import pytest_xdist_make_scheduler  # noqa: F401\n"
    )
    (tmp_path / "test_grouped.py").write_text(GROUPED)
    (tmp_path / "test_loose.py").write_text(LOOSE)
    seen = tmp_path / "seen.txt"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2", "--dist", "loadgroup", "."],
        cwd=tmp_path,
        env={**os.environ, "WORKERS_SEEN": str(seen)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    workers = seen.read_text().split()
    assert len(workers) == 8 and len(set(workers)) == 1, workers
