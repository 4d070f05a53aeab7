#!/usr/bin/env python3
"""One-command set-up for torchmend's two jobs, on a machine with only python3.

    python3 dev.py example        # set up .venv, then fix a scratch copy of the bundled example training script
    python3 dev.py test           # set up .venv, then run the test suite
    python3 dev.py compat 2.15    # the version matrix: a venv for that torch (2.11, 2.13, 2.14, 2.15), then the
                                  # scan fixtures and the codemod end-to-end tests on it (docs/compat.md)

Set-up creates .venv and installs torchmend with its dev extras and torch==2.13.0 (the pinned
CPU build for development and CI); it is skipped when pyproject.toml has not changed since.
`compat` does the same in .venv-compat-<version> with that release's torch (`--python PY` runs on an interpreter
that has torch already, where pip cannot reach an index; `--record` first records every scan fixture's events
into fixtures/recorded/torch-<version>/), writes benchmarks/results/compat/torch-<version>.json and regenerates
docs/compat.md from those files.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
TORCH_PIN = "torch==2.13.0"
# The version matrix: one release per minor (the newest patch), the pin pip installs for it. 2.13.0 resolves to the
# CPU build where one lies in a find-links folder (as CI's does); the others are PyPI's default (CUDA) builds, which
# run on a CPU too.
COMPAT_PINS = {"2.11": "torch==2.11.0", "2.13": "torch==2.13.0", "2.14": "torch==2.14.1", "2.15": "torch==2.15.0"}
# What the matrix runs: every scan fixture's scan, and every codemod family end to end (fix + verify).
COMPAT_TESTS = ["tests/e2e/test_scan_fixtures.py", "tests/e2e/test_codemods_e2e.py"]
COMPAT_RESULTS = ROOT / "benchmarks" / "results" / "compat"


def setup(venv_dir: Path = VENV, torch_pin: str = TORCH_PIN) -> None:
    """venv_dir with torchmend[dev] (editable) and torch_pin, unless its stamp says so already."""
    bindir = venv_dir / ("Scripts" if os.name == "nt" else "bin")
    stamp = venv_dir / ".torchmend-setup"
    want = hashlib.sha256((ROOT / "pyproject.toml").read_bytes() + torch_pin.encode()).hexdigest()
    if stamp.exists() and stamp.read_text() == want:
        return
    if not (bindir / "python").exists():
        print(f"creating {venv_dir.name}", flush=True)
        venv.create(venv_dir, with_pip=True)
    print(f"installing torchmend[dev] and {torch_pin} into {venv_dir.name}", flush=True)
    subprocess.check_call(
        [
            str(bindir / "python"),
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            # pip compiles the installed files to bytecode one by one; compileall below does it on every core
            # (torch and the dev tools here: 84 s -> 42 + 24 s on 2 cores). Without the bytecode, every process of the
            # suite would compile torch again where PYTHONDONTWRITEBYTECODE is set, as on this machine and CI.
            "--no-compile",
            "-e",
            f"{ROOT}[dev]",
            torch_pin,
        ]
    )
    paths = "import sysconfig; p = sysconfig.get_paths(); print(*sorted({p['purelib'], p['platlib']}), sep='\\n')"
    sites = subprocess.check_output([str(bindir / "python"), "-c", paths], text=True).split()
    # Its exit status is not ours: torch ships test helpers in newer syntax than this Python's, which pip skips too.
    # Not compiled: what no process of the jobs imports (pip, setuptools, fontTools, torch's test helpers) and mypy,
    # whose modules are compiled extensions: 58 -> 48 CPU-seconds.
    skip = "/site-packages/(pip|setuptools|mypy|mypyc|fontTools)/|/torch/testing/_internal/"
    compileall = [str(bindir / "python"), "-m", "compileall", "-q", "-j", "0", "-x", skip, *sites]
    subprocess.call(compileall, stdout=subprocess.DEVNULL)
    stamp.write_text(want)


def compat(args: list[str]) -> int:
    """`dev.py compat VERSION [--python PY] [--record] [pytest arguments]`: the matrix row for one torch release."""
    usage = f"usage: python3 dev.py compat {{{','.join(COMPAT_PINS)}}} [--python PY] [--record] [pytest arguments]"
    if not args or args[0] not in COMPAT_PINS:
        print(usage, file=sys.stderr)
        return 2
    version, rest = args[0], args[1:]
    python, record = None, False
    while rest and rest[0] in ("--python", "--record"):
        if rest[0] == "--record":
            record, rest = True, rest[1:]
        elif len(rest) < 2:
            print(usage, file=sys.stderr)
            return 2
        else:
            python, rest = rest[1], rest[2:]
    own_venv = python is None
    if own_venv:
        venv_dir = ROOT / f".venv-compat-{version}"
        started = time.monotonic()
        setup(venv_dir, COMPAT_PINS[version])
        print(f"{venv_dir.name} ready in {time.monotonic() - started:.0f} s", flush=True)
        python = str(venv_dir / ("Scripts" if os.name == "nt" else "bin") / "python")
    env = dict(os.environ)
    if not own_venv:
        # An interpreter of the user's (--python): torchmend from this checkout, ahead of any installed one.
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    got = subprocess.run(
        [python, "-c", "import torch; print(torch.__version__)"], env=env, capture_output=True, text=True
    )
    installed = got.stdout.strip()
    if got.returncode != 0 or not installed.startswith(version + "."):
        print(f"{python} has torch {installed or '(none)'}, not {version}: {got.stderr[-500:]}", file=sys.stderr)
        return 2
    COMPAT_RESULTS.mkdir(parents=True, exist_ok=True)
    if record:
        # The fixtures' events on this release, and expectations from them where expected.json has none yet
        code = subprocess.call([python, str(ROOT / "scripts" / "compat.py"), "record", version], cwd=ROOT, env=env)
        if code:
            return code
        subprocess.check_call([python, str(ROOT / "scripts" / "compat.py"), "expect", version], cwd=ROOT, env=env)
    junit = COMPAT_RESULTS / f".junit-{version}.xml"
    workers = os.environ.get("TORCHMEND_COMPAT_WORKERS", "3")
    cmd = [python, "-m", "pytest", "-q", "-n", workers, "--dist", "loadgroup", f"--junitxml={junit}", *COMPAT_TESTS]
    started = time.monotonic()
    code = subprocess.call([*cmd, *rest], cwd=ROOT, env=env)
    seconds = time.monotonic() - started
    shown = " ".join(["python3", "dev.py", "compat", *args])
    subprocess.check_call(
        [
            python,
            str(ROOT / "scripts" / "compat.py"),
            "result",
            version,
            str(junit),
            "--seconds",
            f"{seconds:.0f}",
            "--command",
            shown,
            "--workers",
            workers,
        ],
        cwd=ROOT,
        env=env,
    )
    junit.unlink()
    return code


def main() -> int:
    job = sys.argv[1] if len(sys.argv) > 1 else ""
    extra = sys.argv[2:]
    if job == "compat":
        return compat(extra)
    if job not in ("example", "test"):
        print(__doc__)
        return 2
    setup()
    if job == "example":
        # `torchmend example`: a scratch copy of the bundled example, fixed there (the repository stays clean); on a
        # terminal fix asks about each change, otherwise (with no extra arguments) it applies them all. Extra
        # arguments go to fix.
        cmd = [str(BIN / "torchmend"), "example", *(["--", *extra] if extra else [])]
    else:
        # Three workers on this 2-core machine: most tests wait on a child process running torch, and some wait on
        # purpose (timeouts, hung ranks, signals), so a third keeps both cores busy. Files whose tests share a
        # module-scoped run are kept on one worker (xdist_group marks); cached scans are shared (conftest).
        cmd = [str(BIN / "python"), "-m", "pytest", "-q", "-n", "3", "--dist", "loadgroup", *extra]
        # One thread per torch process: three workers' children share two cores, and torch's OpenMP threads spin
        # while they wait for each other (the tests' tensors are tiny). Measured on the codemods and verify e2e
        # files: 86 s -> 75 s wall. Set it yourself to test with more.
        env = {**os.environ}
        env.setdefault("OMP_NUM_THREADS", "1")
        return subprocess.call(cmd, cwd=ROOT, env=env)
    return subprocess.call(cmd, cwd=ROOT)


if __name__ == "__main__":
    sys.exit(main())
