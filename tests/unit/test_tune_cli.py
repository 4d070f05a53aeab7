"""`torchmend tune` without a training run: it starts without torch or libcst (the GPU machine it is meant for has
no libcst), refuses bad settings before running anything, and the child's hook gives every torch.compile call the
setting (checked in-process on a recording stand-in for torch.compile)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, torchmend
from test_cli_startup import PROBE


@pytest.mark.parametrize("argv", [["tune", "--help"], ["tune", "no_such_script.py"]])
def test_tune_imports_neither_torch_nor_libcst_to_start(argv: list[str]) -> None:
    proc = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, timeout=60)
    heavy = [line.removeprefix("HEAVY=").split(",") for line in proc.stderr.splitlines() if line.startswith("HEAVY=")]
    assert len(heavy) == 1, proc.stderr[-2000:]
    # pydantic is typer 0.29's own dependency, imported to coerce the script argument of a command that runs: only
    # the start-up paths (test_cli_startup) keep it out
    assert not {"torch", "libcst"} & set(heavy[0]), proc.stderr[-2000:]


def test_tune_refuses_unknown_settings_and_torchrun_before_running(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text("raise SystemExit('must not run')\n")
    r = torchmend("tune", str(script), "--settings", "default,fastest", cwd=tmp_path)
    assert r.returncode == 2 and "unknown setting 'fastest'" in r.stderr
    r = torchmend("tune", str(script), "--backend", "aot_eager", "--settings", "max-autotune", cwd=tmp_path)
    assert r.returncode == 2 and "modes are inductor's" in r.stderr
    r = torchmend("tune", "--", "torchrun", "--nproc-per-node", "2", str(script), cwd=tmp_path)
    assert r.returncode == 2 and "one process" in r.stderr


def test_tune_refuses_a_report_path_it_cannot_write_before_running(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text("raise SystemExit('must not run')\n")
    (tmp_path / "a_file").write_text("")
    (tmp_path / "a_folder").mkdir()
    for report, said in [
        ("a_file/COMPILE_LOG.md", "is not a folder"),  # a folder above it is a file
        ("a_folder", "is a folder"),
        ("a_file/deeper/COMPILE_LOG.md", "is not a folder"),
    ]:
        r = torchmend("tune", str(script), "--report", report, cwd=tmp_path)
        said_all = " ".join(r.stderr.split())
        assert r.returncode == 2, r.stderr
        assert f"--report {report}" in said_all and said in said_all and "nothing was run" in said_all, said_all
        assert "must not run" not in r.stderr and "tune: eager" not in r.stderr  # no setting ran
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a_file", "a_folder", "train.py"]  # nothing left behind


@pytest.fixture
def recorded_compile(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    torch = pytest.importorskip("torch")
    calls: list[dict[str, Any]] = []

    def record(model: Any = None, **kwargs: Any) -> Any:
        calls.append({"model": model, **kwargs})
        return ("compiled", model)

    monkeypatch.setattr(torch, "compile", record)
    return calls


def test_the_child_hook_sets_mode_and_dynamic_and_drops_options(recorded_compile: list[dict[str, Any]]) -> None:
    import torch

    from torchmend.profiler.collector import override_compile

    override_compile("inductor", None, mode="max-autotune", dynamic=False)
    torch.compile(len, mode="reduce-overhead", options={"x": 1}, fullgraph=True)
    call = recorded_compile[-1]
    assert call["mode"] == "max-autotune" and call["dynamic"] is False and call["backend"] == "inductor"
    assert "options" not in call and call["fullgraph"] is True


def test_the_child_hook_for_eager_compiles_nothing(recorded_compile: list[dict[str, Any]]) -> None:
    import torch

    from torchmend.profiler.collector import override_compile

    override_compile(None, None, eager=True)
    assert torch.compile(len) is len
    assert torch.compile(mode="max-autotune")(len) is len  # the decorator form
    assert recorded_compile == []


def test_the_child_hook_keeps_no_mode_for_another_backend(recorded_compile: list[dict[str, Any]]) -> None:
    import torch

    from torchmend.profiler.collector import override_compile

    override_compile("aot_eager", None, dynamic=True)
    torch.compile(len, mode="max-autotune")
    call = recorded_compile[-1]
    assert call["backend"] == "aot_eager" and call["dynamic"] is True and "mode" not in call


def test_the_detection_backend_is_one_callable_for_every_call(
    recorded_compile: list[dict[str, Any]], tmp_path: Path
) -> None:
    """scan's checking backend is shared: dynamo guards on the backend's identity (BACKEND_MATCH), and a new one per
    call recompiled each FSDP2 block compiled one by one (`block.compile()`, same code) on 2 x H100 (issue 32)."""
    import torch

    from torchmend.profiler.collector import override_compile
    from torchmend.profiler.events import EventSink

    override_compile("aot_eager", EventSink(str(tmp_path / "events.jsonl")))
    for _ in range(3):
        torch.compile(len)
    backends = [call["backend"] for call in recorded_compile]
    assert len(backends) == 3 and type(backends[0]).__name__ == "_CheckedBackend"
    assert backends[0] is backends[1] is backends[2]


def test_every_tune_option_is_documented() -> None:
    from typer.main import get_command

    import torchmend.cli.tune  # noqa: F401  (registers the command)
    from torchmend.cli.app import app

    command = get_command(app).commands["tune"]  # type: ignore[attr-defined]
    page = (ROOT / "docs" / "commands" / "tune.md").read_text()
    options = [o for p in command.params for o in p.opts if o.startswith("--")]
    assert "--horizon" in options and "--report" in options
    for option in options:
        assert f"`{option}" in page, option


def test_the_tune_machinery_imports_no_libcst() -> None:
    """What a tune imports once it runs (the GPU machine has torch, typer and rich, and no libcst)."""
    code = (
        "import sys, torchmend.cli.main, torchmend.cli.tune, torchmend.cli.tables, torchmend.cli.running\n"
        "from torchmend.tune import plot, report, runs, settings, verdict\n"
        "print(sorted(m for m in ('libcst', 'torch') if m in sys.modules))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert proc.stdout.strip() == "[]", proc.stderr[-2000:]
