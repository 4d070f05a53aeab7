"""The benchmark suite's smoke run end to end: `benchmarks/suite.py --smoke` in a subprocess on one of its two
scenarios (print_in_forward: about 45 s on a 2-core CPU, its plain cost run on aot_eager too; the other's fix is module_counter's in the codemods' e2e
tests), then its Markdown, JSON and plot, and the counts the scenario really shows."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

# One worker runs this whole file under pytest-xdist: its module-scoped runs are shared by its tests.
pytestmark = pytest.mark.xdist_group("benchmarks_smoke")

ROOT = Path(__file__).resolve().parents[2]
VARIANTS = ("eager", "compiled", "torchmend", "hand")
NUMBERS = (
    "graphs",
    "graph_breaks",
    "recompiles",
    "recompile_limit_hits",
    "compile_seconds",
    "first_step_s",
    "steady_step_s",
)


@pytest.fixture(scope="module")
def smoke(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("suite")
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "suite.py"),
            "--smoke",
            "--scenarios",
            "print_in_forward",
            "--out",
            str(out),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    jsons = list(out.glob("suite-cpu-torch*-smoke.json"))
    assert len(jsons) == 1, sorted(p.name for p in out.iterdir())
    return out, json.loads(jsons[0].read_text())


def test_files(smoke: tuple[Path, dict]) -> None:
    out, data = smoke
    stem = data["stem"]
    md = (out / f"{stem}.md").read_text()
    assert "shared and noisy" in md and "ratios" in md
    assert data["meta"]["torch"] in md and data["meta"]["command"] in md
    assert "| print_in_forward |" in md
    assert "every torch.compile on aot_eager (this run's --backend, not the script's own)" in md
    pytest.importorskip("matplotlib")
    png = out / f"{stem}-overhead-default.png"
    assert png.exists() and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_every_scenario_and_variant_has_numbers(smoke: tuple[Path, dict]) -> None:
    _, data = smoke
    cells = data["cells"]["overhead/default"]
    assert set(cells) == {"print_in_forward"}
    for name, cell in cells.items():
        for v in VARIANTS:
            agg = cell[v]
            assert agg["ok"] == agg["runs"] == 1, (name, v, agg)
            for k in NUMBERS:
                assert agg[k] is not None, (name, v, k)
        s = cell["summary"]
        for k in ("torchmend_over_hand", "compiled_over_torchmend", "eager_over_torchmend"):
            assert isinstance(s[k], float) and s[k] > 0, (name, k, s)
    runs = [r for r in data["runs"] if r["ok"]]
    assert len(runs) == 4
    for r in runs:
        assert len(r["step_s"]) == data["config"]["steps"]["overhead"], r["variant"]
        assert r["ended_by"] == "steps"


def test_counts_are_what_the_scenario_shows(smoke: tuple[Path, dict]) -> None:
    _, data = smoke
    p = data["cells"]["overhead/default"]["print_in_forward"]
    assert p["eager"]["graphs"] == 0 and p["eager"]["compile_seconds"]["median"] == 0
    assert p["compiled"]["graph_breaks"] >= 1 and p["compiled"]["graphs"] >= 2
    assert p["torchmend"]["graph_breaks"] == p["hand"]["graph_breaks"] == 0
    assert p["torchmend"]["graphs"] == p["hand"]["graphs"] == 1
    assert p["summary"]["counts_equal"]


def test_fixes_and_tool_cost(smoke: tuple[Path, dict]) -> None:
    _, data = smoke
    fixes = data["fixes"]
    assert fixes["print_in_forward"]["rules"] == ["TM101"] and fixes["print_in_forward"]["changed"]
    assert "reorderable_logging_functions.add(print)" in fixes["print_in_forward"]["diff"]  # kept, not gated
    cost = data["cost"]["scenarios"]["print_in_forward"]
    assert cost["plain_s"] > 0 and cost["scan_aot_eager_s"] > 0 and cost["aot_over_plain"] > 0
    assert [f[0] for f in cost["findings_aot_eager"]] == ["TM101"]
    assert data["cost"]["plain_backend"] == "aot_eager"  # the smoke run's plain compiles on its --backend too
