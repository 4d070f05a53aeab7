"""tune's settings, break-even, recommendation, report and plot, on hand-made run records (no child runs: the real
run is tests/e2e/test_tune_run.py)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from torchmend.model import Summary
from torchmend.profiler.runner import RunOutcome, RunSpec
from torchmend.tune.plot import svg
from torchmend.tune.report import Tune, markdown, series, to_json
from torchmend.tune.runs import TuneRun, shapes_vary
from torchmend.tune.settings import SettingError, more_settings, parse, parse_all, skipped
from torchmend.tune.verdict import NEVER, break_even, judge
from torchmend.values import Root


def _run(
    name: str,
    steady: float,
    first: float = 1.0,
    steps: int = 20,
    recompiles: int = 0,
    index: int = 0,
    extra: float = 0.0,
    ended_by: str = "steps",
    end: dict | None = None,
    events: list | None = None,
) -> TuneRun:
    """A run whose step times are `first`, then `extra` seconds of recompiling in step 2, then steady steps."""
    times = [first]
    for i in range(1, steps):
        times.append(times[-1] + steady + (extra if i == 1 else 0.0))
    summary = Summary(
        frames_compiled=0 if name == "eager" else 1,
        compiles=0 if name == "eager" else 1 + recompiles,
        graphs=0 if name == "eager" else 1,
        graph_breaks=0,
        recompiles=recompiles,
        recompile_limit_hits=0,
        compile_seconds=0.0 if name == "eager" else first / 2,
        steps=steps,
        ended_by=ended_by,
        wall_seconds=first + steps * steady,
        torch_version="2.13",
        first_step_s=first,
        steady_step_s=steady,
    )
    end = {"ev": "end", "reason": ended_by, "step_times": times, "peak_rss_mb": 300.0, **(end or {})}
    outcome = RunOutcome(events or [], ended_by, 0, summary.wall_seconds, "", end)
    return TuneRun(parse(name), index, summary, [], outcome)


def _repeats(name: str, steadies: list[float], **kw) -> list[TuneRun]:
    return [_run(name, s, index=i, **kw) for i, s in enumerate(steadies)]


# --- settings ------------------------------------------------------------------------------------------------


def test_setting_names_round_trip_and_their_overrides() -> None:
    for name in ("eager", "default", "reduce-overhead", "max-autotune", "dynamic=True", "max-autotune:dynamic=False"):
        assert parse(name).name == name
    assert parse("eager").override() == (("eager", True),)
    assert parse("dynamic=False").override() == (("mode", "default"), ("dynamic", False))
    assert parse("reduce-overhead").override() == (("mode", "reduce-overhead"),)
    assert parse("dynamic=None").override() == (("mode", "default"), ("dynamic", None))
    aot = parse("default", backend="aot_eager")
    assert aot.override() == () and aot.backend == "aot_eager"


def test_setting_lists_put_eager_first_once_and_refuse_unknown_names() -> None:
    chosen = parse_all(["default,max-autotune", "default", "dynamic=True"])
    assert [s.name for s in chosen] == ["eager", "default", "max-autotune", "dynamic=True"]
    for bad in ("fast", "default:dynamic=maybe", "default:static"):
        with pytest.raises(SettingError):
            parse(bad)
    with pytest.raises(SettingError, match="modes are inductor's"):
        parse("max-autotune", backend="aot_eager")


def test_the_default_list_follows_the_device_and_the_shapes() -> None:
    names = [s.name for s in more_settings(cuda=True, shapes_vary=False, own_dynamic={"None"})]
    assert names == ["reduce-overhead", "max-autotune-no-cudagraphs", "max-autotune"]
    names = [s.name for s in more_settings(cuda=False, shapes_vary=True, own_dynamic={"False"})]
    assert names == ["max-autotune", "dynamic=True", "dynamic=False", "dynamic=None"]
    assert set(skipped(cuda=False)) == {"reduce-overhead", "max-autotune-no-cudagraphs"}
    assert skipped(cuda=True) == {}
    assert [s.name for s in more_settings(False, True, set(), backend="aot_eager")] == ["dynamic=True", "dynamic=False"]


def test_shapes_vary_is_read_from_a_size_guard() -> None:
    guard = "tensor 'x' size mismatch at index 0. expected 8, actual 4"
    events = [{"ev": "compile_end", "recompile_reason": guard}]
    assert "size mismatch" in (shapes_vary(_run("default", 0.001, events=events)) or "")
    events = [{"ev": "compile_end", "recompile_reason": "L['lr'] == 0.1"}]
    assert shapes_vary(_run("default", 0.001, events=events)) is None


# --- break-even and the recommendation -------------------------------------------------------------------------


def test_break_even_is_the_first_step_count_where_compiling_has_caught_up() -> None:
    # 10 s more up front, 1 ms saved a step: 10,000 steps to win it back, the first step included.
    assert break_even(eager_fixed=2.0, eager_steady=0.003, fixed=12.0, steady=0.002) == 10_001
    assert break_even(2.0, 0.003, 12.0, 0.003) == NEVER
    assert break_even(2.0, 0.003, 12.0, 0.004) == NEVER
    assert break_even(5.0, 0.003, 4.0, 0.002) == 1  # cheaper up front and faster: pays from the start


def test_break_even_counts_recompiles_after_the_first_step() -> None:
    runs = [_run("eager", 0.003, first=2.0), _run("default", 0.002, first=2.0, extra=1.0)]
    v = judge(runs, repeat=1, horizon=100_000)
    row = v.row("default")
    assert row is not None and row.break_even == 1 + 1000  # the second step's 1 s recompile, at 1 ms a step
    assert row.fixed_s.median == pytest.approx(3.0)


def test_recommends_the_fastest_setting_beyond_noise() -> None:
    runs = [
        *_repeats("eager", [0.0100, 0.0105]),
        *_repeats("default", [0.0060, 0.0063]),
        *_repeats("max-autotune", [0.0040, 0.0042]),
    ]
    v = judge(runs, repeat=2, horizon=10_000)
    assert v.recommended == "max-autotune"
    assert "2.5" in v.reason and "faster" in v.reason and "within noise" not in v.reason
    assert v.row("max-autotune").recommended and v.row("max-autotune").remark == "recommended"  # type: ignore[union-attr]


def test_settings_within_noise_of_the_best_are_named() -> None:
    runs = [
        *_repeats("eager", [0.0100, 0.0105]),
        *_repeats("default", [0.0040, 0.0046]),
        *_repeats("max-autotune", [0.0041, 0.0044]),
    ]
    v = judge(runs, repeat=2, horizon=10_000)
    assert v.recommended == "max-autotune" and "within noise of it: default" in v.reason


def test_eager_when_the_compiled_ranges_overlap_eagers() -> None:
    runs = [*_repeats("eager", [0.0100, 0.0130]), *_repeats("default", [0.0095, 0.0120])]
    v = judge(runs, repeat=2, horizon=10_000)
    assert v.recommended == "eager"
    assert "noise" in v.reason and "within noise" in v.row("default").note  # type: ignore[union-attr]


def test_eager_when_nothing_pays_off_within_the_horizon() -> None:
    runs = [_run("eager", 0.003, first=2.0), _run("default", 0.0029, first=60.0)]
    v = judge(runs, repeat=1, horizon=10_000)
    assert v.recommended == "eager" and "within 10000 steps" in v.reason
    assert v.row("default").break_even > 10_000  # type: ignore[operator, union-attr]
    assert any("one run per setting" in n for n in v.notes)


def test_a_setting_that_recompiles_more_than_default_is_left_out() -> None:
    runs = [
        _run("eager", 0.010),
        _run("default", 0.006, recompiles=1),
        _run("dynamic=False", 0.004, recompiles=3),
    ]
    v = judge(runs, repeat=1, horizon=10_000)
    assert v.recommended == "default"
    assert "recompiles more than default (3 vs 1)" in v.row("dynamic=False").note  # type: ignore[union-attr]


def test_a_failed_setting_is_reported_not_recommended() -> None:
    runs = [
        _run("eager", 0.010),
        _run("default", 0.006),
        _run("reduce-overhead", 0.001, ended_by="error", end={"error": "RuntimeError: overwritten by a later run"}),
    ]
    v = judge(runs, repeat=1, horizon=10_000)
    assert v.recommended == "default"
    assert "failed: RuntimeError: overwritten" in v.row("reduce-overhead").note  # type: ignore[union-attr]


def test_never_when_no_compiled_steady_step_is_faster() -> None:
    v = judge([_run("eager", 0.002), _run("default", 0.003)], repeat=1, horizon=10_000)
    assert v.recommended == "eager" and v.reason == "no compiled setting has a faster steady step than eager"
    assert v.row("default").break_even == NEVER  # type: ignore[union-attr]


# --- report and plot ----------------------------------------------------------------------------------------


def _tune(tmp_path: Path) -> Tune:
    cuda = {"cuda_peak_mb": 1234.5, "cuda_device": "NVIDIA H100 80GB HBM3"}
    runs = [
        *_repeats("eager", [0.0100, 0.0105], end=cuda),
        *_repeats("default", [0.0060, 0.0063], end=cuda),
        *_repeats("reduce-overhead", [0.0020, 0.0022], end=cuda),
    ]
    verdict = judge(runs, repeat=2, horizon=10_000)
    spec = RunSpec(script=tmp_path / "train.py", steps=20)
    env = {"torch": "2.11.0", "python": "3.12.3", "device": "cuda: NVIDIA H100 80GB HBM3", "date": "2026-11-24"}
    return Tune(spec, runs, verdict, "torchmend tune train.py --steps 20", environment=env)


def test_markdown_report_holds_the_table_recommendation_command_and_environment(tmp_path: Path) -> None:
    text = markdown(_tune(tmp_path), "COMPILE_LOG.svg")
    assert "**Recommended: `reduce-overhead`**" in text
    assert "| setting | compile s | first step | steady step | recompiles | graph breaks | peak GPU MiB |" in text
    assert "| reduce-overhead | 0.5 | 1 s | 2.1 ms (2–2.2) | 0 | 0 | 1,234 |" in text
    assert "![step time per optimizer step, one line per setting](COMPILE_LOG.svg)" in text
    assert "command: `torchmend tune train.py --steps 20`" in text
    assert "torch 2.11.0" in text and "NVIDIA H100" in text and "max_memory_allocated" in text


def test_small_gpu_peaks_are_not_rounded_to_zero() -> None:
    """A tiny model's GPU peak (tens of KiB) is a reading, not 0 (issue 32: the table showed 0 MiB)."""
    from torchmend.tune.report import memory
    from torchmend.tune.verdict import Stat

    assert [memory(Stat.of([v])) for v in (0.08213, 3.5, 65.14, 1234.5)] == ["0.082", "3.5", "65", "1,234"]
    assert memory(Stat.of([None])) == "—"


def test_json_report_has_rows_and_every_runs_step_times(tmp_path: Path) -> None:
    data = to_json(_tune(tmp_path))
    assert data["schema"] == "torchmend.tune/1" and data["recommended"] == "reduce-overhead"
    assert [s["setting"] for s in data["settings"]] == ["eager", "default", "reduce-overhead"]
    assert len(data["runs"]) == 6 and len(data["runs"][0]["step_s"]) == 20
    assert data["runs"][0]["cuda_peak_mb"] == 1234.5


def test_plot_is_svg_with_one_line_per_setting_on_a_log_axis(tmp_path: Path) -> None:
    tune = _tune(tmp_path)
    lines = series(tune)
    assert list(lines) == ["eager", "default", "reduce-overhead"]
    root = ET.fromstring(svg(lines, "train.py & co"))
    ns = "{http://www.w3.org/2000/svg}"
    polylines = root.findall(f"{ns}polyline")
    assert len(polylines) == 3
    labels = [t.text for t in root.findall(f"{ns}text")]
    assert "1 s" in labels and "1 ms" in labels and "train.py & co" in labels  # decades; the title escaped
    first = polylines[0].get("points", "").split()
    assert len(first) == 20 and float(first[0].split(",")[1]) < float(first[1].split(",")[1])  # step 1 is highest


def test_a_stop_signal_keeps_the_finished_runs_as_a_partial_report(tmp_path: Path) -> None:
    from torchmend.cli.tune import _partial
    from torchmend.interrupts import Stopped

    spec = RunSpec(script=tmp_path / "train.py", steps=20)
    runs = [_run("eager", 0.010), _run("default", 0.004), _run("eager", 0.011, index=1)]
    partial = _partial(spec, runs, 3, 10_000, "torchmend tune train.py", Stopped(15))
    assert partial is not None and partial.verdict.recommended == "default"
    assert partial.verdict.notes[0] == "stopped by SIGTERM after 3 runs: partial results (3 rounds were asked)"
    assert _partial(spec, runs[:1], 3, 10_000, "torchmend tune train.py", Stopped(15)) is None  # eager alone


def test_a_graph_left_without_cuda_graphs_says_why() -> None:
    reason = "skipping cudagraphs due to mutated inputs (1 instances)"
    events = [{"ev": "compile_end", "cudagraph_skip_reason": reason}, {"ev": "compile_end"}]
    runs = [_run("eager", 0.010), _run("default", 0.006), _run("reduce-overhead", 0.005, events=events)]
    v = judge(runs, repeat=1, horizon=10_000)
    assert v.recommended == "reduce-overhead"
    assert v.row("reduce-overhead").remark == f"recommended; CUDA graphs skipped: {reason}"  # type: ignore[union-attr]


def test_varying_sizes_are_reported_with_whether_dynamic_settings_ran(tmp_path: Path) -> None:
    from torchmend.tune.report import vary_line

    tune = _tune(tmp_path)
    assert vary_line(tune) is None
    tune.shapes_vary = "TM204 at train.py:9"
    assert "name dynamic=True and dynamic=False in --settings" in (vary_line(tune) or "")
    tune.runs.append(_run("dynamic=True", 0.002))
    assert vary_line(tune) == "shapes vary (TM204 at train.py:9): dynamic= settings were compared"


def test_runs_are_interleaved_each_with_empty_caches_of_its_own(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from torchmend.tune import runs as tune_runs

    specs: list[RunSpec] = []

    def fake_run(spec: RunSpec) -> RunOutcome:
        specs.append(spec)
        end = {"ev": "end", "reason": "steps", "step_times": [1.0, 1.01, 1.02]}
        return RunOutcome([], "steps", 0, 2.0, "", end)

    monkeypatch.setattr(tune_runs, "run", fake_run)
    decided: list[int] = []

    def decide(done: list[TuneRun]) -> list:
        decided.append(len(done))
        return [parse("max-autotune")]

    spec = RunSpec(script=tmp_path / "train.py", steps=3, backend="aot_eager")
    done = tune_runs.run_settings(spec, Root(tmp_path), [parse("eager"), parse("default")], 2, decide)
    assert [r.setting.name for r in done] == ["eager", "default", "max-autotune"] * 2
    assert decided == [2]  # once, after the first eager and default runs
    caches = [dict(s.env)["TORCHINDUCTOR_CACHE_DIR"] for s in specs]
    assert len(set(caches)) == 6 and all(dict(s.env)["TORCHMEND_NO_NUMERICS"] == "1" for s in specs)
    assert [s.backend for s in specs[:3]] == [None, "inductor", "inductor"]  # eager compiles nothing at all
    assert specs[0].compile == (("eager", True),) and specs[2].compile == (("mode", "max-autotune"),)


def test_the_table_fits_a_narrow_terminal(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from rich.console import Console

    from torchmend.cli import tune as cli

    for columns, left_out in ((200, False), (80, True)):
        console = Console(width=columns, record=True, color_system=None)
        monkeypatch.setattr(cli, "out", console)
        monkeypatch.setenv("COLUMNS", str(columns))
        cli._print_table(_tune(tmp_path))
        text = console.export_text()
        assert max(len(line) for line in text.splitlines()) <= columns
        assert ("left out at this width: compile s, breaks, peak GPU MiB" in text) is left_out
        assert "recommended: reduce-overhead" in text and "2.1 ms (2–2.2)" in text
