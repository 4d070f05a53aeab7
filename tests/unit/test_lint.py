"""ruff (lint and format) and mypy, as configured in pyproject.toml, are clean: CI keeps them so; and installing
leaves the source tree clean."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import ROOT

CHECKS = {
    "ruff-lint": [sys.executable, "-m", "ruff", "check", "--no-cache", "."],
    "ruff-format": [sys.executable, "-m", "ruff", "format", "--check", "--no-cache", "."],
    "mypy": [sys.executable, "-m", "mypy", "--no-incremental"],
}


@pytest.mark.parametrize("name", sorted(CHECKS))
def test_clean(name: str) -> None:
    proc = subprocess.run(CHECKS[name], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]


def test_installing_left_nothing_in_the_source_tree() -> None:
    """dev.py installs the package (editable, hatchling) before the tests run: no build/ or *.egg-info is left."""
    assert not (ROOT / "build").exists()
    assert not list(ROOT.glob("*.egg-info")) and not list((ROOT / "torchmend").glob("*.egg-info"))
