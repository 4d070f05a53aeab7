#!/usr/bin/env python3
"""One-command set-up for torchmend's two jobs, on a machine with only python3.

    python3 dev.py example   # set up .venv, then fix a scratch copy of the bundled example training script
    python3 dev.py test      # set up .venv, then run the test suite

Set-up creates .venv and installs torchmend with its dev extras and torch==2.13.0 (the pinned
CPU build for development and CI); it is skipped when pyproject.toml has not changed since.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
TORCH_PIN = "torch==2.13.0"


def setup() -> None:
    stamp = VENV / ".torchmend-setup"
    want = hashlib.sha256((ROOT / "pyproject.toml").read_bytes() + TORCH_PIN.encode()).hexdigest()
    if stamp.exists() and stamp.read_text() == want:
        return
    if not (BIN / "python").exists():
        print("creating .venv", flush=True)
        venv.create(VENV, with_pip=True)
    print(f"installing torchmend[dev] and {TORCH_PIN} into .venv", flush=True)
    subprocess.check_call(
        [
            str(BIN / "python"),
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "-e",
            f"{ROOT}[dev]",
            TORCH_PIN,
        ]
    )
    stamp.write_text(want)


def main() -> int:
    job = sys.argv[1] if len(sys.argv) > 1 else ""
    extra = sys.argv[2:]
    if job not in ("example", "test"):
        print(__doc__)
        return 2
    setup()
    if job == "example":
        # A scratch copy, so the repository stays clean: on a terminal fix asks about each change; otherwise
        # (or with no extra arguments given off a terminal) it applies them all.
        scratch = Path(tempfile.mkdtemp(prefix="torchmend-example-"))
        shutil.copy(ROOT / "fixtures/scan/several/train.py", scratch / "train.py")
        print(f"scratch copy of the bundled example: {scratch / 'train.py'}", flush=True)
        mode = [] if sys.stdin.isatty() or extra else ["--yes", "--unsafe"]
        cmd = [
            str(BIN / "torchmend"),
            "fix",
            str(scratch / "train.py"),
            "--backend",
            "aot_eager",
            *mode,
            *extra,
        ]
        code = subprocess.call(cmd, cwd=scratch)
        print(f"the example's files are in {scratch}", flush=True)
        return code
    else:
        # Three workers on this 2-core machine: most tests wait on a child process running torch, and some wait on
        # purpose (timeouts, hung ranks, signals), so a third keeps both cores busy. Files whose tests share a
        # module-scoped run are kept on one worker (xdist_group marks); cached scans are shared (conftest).
        cmd = [str(BIN / "python"), "-m", "pytest", "-q", "-n", "3", "--dist", "loadgroup", *extra]
    return subprocess.call(cmd, cwd=ROOT)


if __name__ == "__main__":
    sys.exit(main())
