"""What the pytest plugin checks before any test runs, so that a mistake is one usage error (pytest's exit 4) and not
a traceback in a test or after the whole session:

    check_report_path(value, cwd)    --torchmend-report-json PATH: a file that can be written (pytest_configure)
    check_configs(paths)             [tool.torchmend] as it applies to these paths, valid (pytest_configure, then
                                     each marked test's file at collection)

Imports no torch and no libcst: loading the plugin stays cheap.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

import pytest


def check_report_path(value: str, cwd: Path) -> Path:
    """The report's path made absolute (a test that changes the working folder does not move it), or a
    UsageError saying why it cannot be written there."""
    path = Path(os.path.abspath(cwd / value))
    where = f"torchmend: --torchmend-report-json {value}"
    if path.is_dir():
        raise pytest.UsageError(f"{where}: is a folder; give the path of a file to write, e.g. {value}/report.json")
    folder = path.parent
    if not folder.is_dir():
        what = "is not a folder" if folder.exists() else "does not exist"
        raise pytest.UsageError(f"{where}: the folder {folder} {what} (create it first)")
    writable = os.access(path, os.W_OK) if path.exists() else os.access(folder, os.W_OK | os.X_OK)
    if not writable:
        raise pytest.UsageError(f"{where}: cannot write {path} (permission denied)")
    return path


def check_configs(paths: Iterable[Path], seen: set[Path]) -> None:
    """Load [tool.torchmend] for each path (a file's folder, a folder) not in `seen` (then added): an invalid one
    raises a UsageError with config.py's message, which names the file, the line, the key and what it takes."""
    from torchmend.config import ConfigError, load_config

    for path in paths:
        folder = path if path.is_dir() else path.parent
        if folder in seen:
            continue
        seen.add(folder)
        try:
            load_config(folder)
        except ConfigError as e:
            raise pytest.UsageError(f"torchmend: {e}") from None
