"""Which variables a forked run may differ in from its server's environment: only what torch and Python never read
at import (profiler/forkserver.py's key)."""

from __future__ import annotations

from torchmend.profiler.forkserver import key_of

BASE = {"PATH": "/usr/bin", "HOME": "/root", "OMP_NUM_THREADS": "2"}


def test_git_forge_terminal_and_torchmend_variables_are_per_run() -> None:
    per_run = {
        "GIT_CONFIG_GLOBAL": "/tmp/x/gitconfig",
        "GIT_CEILING_DIRECTORIES": "/tmp/x",
        "GITHUB_TOKEN": "ghp_x",
        "NO_PROXY": "127.0.0.1",
        "TORCHMEND_STATE_DIR": "/tmp/x/state",
        "COLUMNS": "200",
        "TORCHINDUCTOR_CACHE_DIR": "/tmp/x/inductor",
        "TM_BENCH_REGIME": "overhead",
    }
    assert key_of({**BASE, **per_run}) == key_of(BASE)


def test_what_torch_reads_at_import_keeps_its_own_server() -> None:
    for name, value in (("OMP_NUM_THREADS", "1"), ("TORCH_LOGS", "graph_breaks"), ("PYTHONHASHSEED", "0")):
        assert key_of({**BASE, name: value}) != key_of(BASE), name
