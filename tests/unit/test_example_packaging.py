"""`torchmend example` works from an installed wheel: the wheel hatchling builds carries the bundled example inside
the package, byte for byte the scan fixture (one file in the source tree, force-included: no copy to drift), and
the command finds it there. The command's run itself: tests/e2e/test_example_cli.py."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "fixtures" / "scan" / "several" / "train.py"
IN_WHEEL = "torchmend/example/train.py"

BUILD = """
import os, sys
from hatchling.build import build_wheel
os.chdir(sys.argv[1])
print(build_wheel(sys.argv[2]))
"""


def test_the_wheel_carries_the_example_byte_for_byte(tmp_path: Path) -> None:
    pytest.importorskip("hatchling", reason="the build backend (torchmend[dev] installs it)")
    proc = subprocess.run(
        [sys.executable, "-c", BUILD, str(ROOT), str(tmp_path)], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    wheel = tmp_path / proc.stdout.strip().splitlines()[-1]
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        assert IN_WHEEL in names, [n for n in names if "example" in n]
        assert z.read(IN_WHEEL) == FIXTURE.read_bytes()
        assert "torchmend/cli/example.py" in names
        # typed for the callers of torchmend.pipeline (PEP 561), and the licence travels with the code
        assert "torchmend/py.typed" in names
        assert any(n.endswith(".dist-info/licenses/LICENSE") or n.endswith(".dist-info/LICENSE") for n in names), names
        # the fixture's other files (its expectations) stay out of the package
        assert not [n for n in names if n.startswith("fixtures/") or n.endswith("expected.json")]


def test_the_command_looks_in_the_package_first_then_the_checkout() -> None:
    from torchmend.cli import example

    package = Path(example.__file__).resolve().parent.parent
    assert example.CANDIDATES == (package / "example" / "train.py", FIXTURE)
    # run from this checkout, where the package holds no copy: the fixture itself
    assert not example.CANDIDATES[0].exists()
    assert example.bundled_example() == FIXTURE
