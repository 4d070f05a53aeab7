"""tests/cli_server.py: a call it forks gives what `python -m torchmend` in a subprocess gives (status, stdout,
stderr), and a call whose environment differs in what is read at import is not served."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import cli_server
import pytest
from conftest import CLI_ENV

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the server forks (Linux only here)")


def test_a_forked_call_ends_as_a_fresh_one_does(tmp_path: Path) -> None:
    env = {**os.environ, **CLI_ENV}
    path = tmp_path / "cli.sock"
    server = cli_server.start(path, env)
    try:
        while not path.exists():
            time.sleep(0.05)
        (tmp_path / "bad.py").write_text("def f(:\n")
        for args in (["--version"], ["scan"], ["lint", "bad.py"], ["scan", "missing.py"]):
            forked = cli_server.call(path, args, tmp_path, env, 60)
            fresh = subprocess.run(
                [sys.executable, "-m", "torchmend", *args], cwd=tmp_path, env=env, capture_output=True, text=True
            )
            assert forked is not None, args
            said = [(r.returncode, _untimed(r.stdout), _untimed(r.stderr)) for r in (forked, fresh)]
            assert said[0] == said[1], args
        assert cli_server.call(path, ["--version"], tmp_path, {**env, "COLUMNS": "80"}, 60) is None  # read at import
    finally:
        server.kill()
        server.wait()


def _untimed(text: str) -> str:
    """Without the elapsed times a command says ("0.02 s"): they differ from run to run."""
    return re.sub(r"\d+(\.\d+)? s\b", "N s", text)
