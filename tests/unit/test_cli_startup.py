"""The CLI starts fast: `torchmend --help`, `torchmend rules`, a subcommand's --help and an option error import
neither torch nor libcst (the heavy parts are imported where a command needs them), nor pydantic (which typer 0.29
imports to coerce a parameter's value, even the None of an absent --help: 0.08 s more per start on a 2-core machine;
torchmend/cli/app.py gives the help flag a False)."""

from __future__ import annotations

import subprocess
import sys

import pytest

PROBE = """
import runpy, sys
sys.argv = ["torchmend", *sys.argv[1:]]
try:
    runpy.run_module("torchmend", run_name="__main__")
except SystemExit as e:
    code = e.code
finally:
    heavy = sorted(m for m in ("torch", "libcst", "pydantic") if m in sys.modules)
    print("HEAVY=" + ",".join(heavy), file=sys.stderr)
"""


@pytest.mark.parametrize(
    "argv",
    [
        ["--help"],
        ["--version"],
        ["rules"],
        ["fix", "--help"],
        ["scan", "--help"],
        ["verify", "--help"],
        ["lint", "--help"],
        ["tune", "--help"],
        ["undo", "--help"],
        ["fix", "--no-such-option"],
    ],
)
def test_startup_imports_no_heavy_package(argv: list[str]) -> None:
    proc = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, timeout=60)
    heavy = [line for line in proc.stderr.splitlines() if line.startswith("HEAVY=")]
    assert heavy == ["HEAVY="], proc.stderr[-2000:]
    assert proc.stdout or "no-such-option" in argv[-1]
