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
        ["example", "--help"],
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


def test_help_lists_the_commands_in_the_order_a_user_meets_them() -> None:
    from torchmend.cli.app import COMMAND_ORDER

    proc = subprocess.run(
        [sys.executable, "-m", "torchmend", "--help"],
        capture_output=True,
        text=True,
        env={"COLUMNS": "100", "NO_COLOR": "1", "PATH": "/usr/bin:/bin"},
    )
    commands = proc.stdout.split("Commands:\n", 1)[1].splitlines()
    listed = [line.split()[0] for line in commands if line.startswith("  ") and line[2:3].isalpha()]
    assert listed == list(COMMAND_ORDER), proc.stdout
