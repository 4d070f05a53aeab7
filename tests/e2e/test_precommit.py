"""The pre-commit hooks of .pre-commit-hooks.yaml, run by the real pre-commit in a throwaway git repository whose
.pre-commit-config.yaml points at a snapshot of this checkout (its files as git sees them, uncommitted changes
included, committed to a repository of their own: what `pre-commit try-repo` does, but made once, so that the
three runs share one hook environment). pre-commit builds its own virtualenv and pip-installs torchmend into it;
PIP_CONSTRAINT pins torch to the CPU build the dev set-up uses, so the install comes from the local wheel."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PRE_COMMIT = Path(sys.executable).with_name("pre-commit")

TRAIN = """\
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        h = self.fc(x)
        if h.mean() > 1.0:
            h = h * 0.5
        return h


model = torch.compile(Net())
"""

CLEAN = """\
def add(a, b):
    return a + b
"""


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


def _snapshot(dest: Path) -> str:
    """This checkout's files as git sees them (tracked, and untracked but not ignored) committed in `dest`."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        check=True,
        capture_output=True,
    ).stdout.split(b"\0")
    for name in filter(None, (n.decode() for n in listed)):
        src = ROOT / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    _git(dest, "init", "-q")
    _git(dest, "add", "-A")
    _git(dest, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "snapshot")
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=dest, check=True, capture_output=True, text=True).stdout


def _pre_commit(repo: Path, home: Path, hook: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PRE_COMMIT_HOME": str(home),
        "PIP_CONSTRAINT": str(home / "constraints.txt"),
        "TORCHMEND_STATE_DIR": str(home / "state"),
        "XDG_STATE_HOME": str(home / "state"),
        "TORCHMEND_CACHE_DIR": str(home / "cache"),
        # No byte-compiling of the hook environment's packages (torch's 5,000 files: about 13 CPU-seconds and most
        # of this test's minute on a 2-core machine); Python compiles what it imports. "0" is pip's spelling of
        # --no-compile in the environment (a store_false flag).
        "PIP_NO_COMPILE": "0",
    }
    return subprocess.run(
        [str(PRE_COMMIT), "run", hook, "--all-files", "--color", "never"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.mark.skipif(not PRE_COMMIT.exists() or shutil.which("git") is None, reason="pre-commit and git")
def test_lint_hooks_report_and_fix_through_pre_commit(tmp_path: Path) -> None:
    home = tmp_path / "pre-commit-home"
    home.mkdir()
    (home / "constraints.txt").write_text("torch==2.13.0\n")
    torchmend_repo = tmp_path / "torchmend"
    torchmend_repo.mkdir()
    rev = _snapshot(torchmend_repo).strip()
    repo = tmp_path / "project"
    repo.mkdir()
    (repo / "train.py").write_text(TRAIN)
    (repo / "util.py").write_text(CLEAN)
    (repo / ".pre-commit-config.yaml").write_text(
        f"repos:\n  - repo: {torchmend_repo}\n    rev: {rev}\n    hooks:\n"
        "      - id: torchmend-lint\n      - id: torchmend-lint-fix\n"
    )
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init")

    lint = _pre_commit(repo, home, "torchmend-lint")
    out = lint.stdout + lint.stderr
    assert lint.returncode == 1, out
    assert "torchmend lint" in out and "Failed" in out
    assert "TM103" in out and "train.py" in out
    assert (repo / "train.py").read_text() == TRAIN  # the check hook writes nothing

    fix = _pre_commit(repo, home, "torchmend-lint-fix")  # the same virtualenv: no second install
    out = fix.stdout + fix.stderr
    assert fix.returncode == 1, out
    assert "files were modified by this hook" in out
    fixed = (repo / "train.py").read_text()
    assert fixed != TRAIN and "torch.where" in fixed  # the safe fix of TM103
    assert (repo / "util.py").read_text() == CLEAN

    again = _pre_commit(repo, home, "torchmend-lint")
    assert again.returncode == 0, again.stdout + again.stderr
    assert "Passed" in again.stdout
