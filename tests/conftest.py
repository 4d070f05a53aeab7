"""Shared helpers: run the real `torchmend` CLI in a process of its own (forked from one import of it where that
cannot differ: tests/cli_server.py); cache expensive scans for the session."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cli_server
import pytest
from xdist_groups import pytest_xdist_make_scheduler  # noqa: F401  (--dist loadgroup keeps groups on any pytest)

ROOT = Path(__file__).resolve().parent.parent
SCAN_FIXTURES = ROOT / "fixtures" / "scan"
CLI_ENV = {"COLUMNS": "200", "NO_COLOR": "1"}  # what the tests' CLI processes see unless a test says otherwise


@dataclass
class CliResult:
    returncode: int
    stdout: str
    stderr: str

    @property
    def json(self) -> dict[str, Any]:
        return json.loads(self.stdout)


def judged_where_screened(args: tuple[str, ...]) -> tuple[str, ...]:
    """`fix ... --backend B` judges on the script's own backend (inductor: a minute a run on this 2-core CPU) after
    screening on B. The tests judge on B too (`--verify-backend B`, said as "verified on B only" in the verdict)
    unless they name a judging backend themselves: test_two_stages_e2e.py runs the two stages on inductor."""
    if not args or args[0] != "fix" or "--verify-backend" in args or "--backend" not in args:
        return args
    backend = args[args.index("--backend") + 1]
    return (*args, "--verify-backend", backend) if "--" not in args else _before_dashes(args, backend)


def _before_dashes(args: tuple[str, ...], backend: str) -> tuple[str, ...]:
    i = args.index("--")
    return (*args[:i], "--verify-backend", backend, *args[i:])


def torchmend(
    *args: str,
    cwd: Path | None = None,
    timeout: float = 600,
    env: dict[str, str] | None = None,
    own_backend_judges: bool = False,
) -> CliResult:
    """The CLI in a process of its own (forked by this test process's CLI server where that cannot differ from a
    fresh `python -m torchmend`, else a subprocess). `own_backend_judges`: fix's judging stage runs on the script's own backend, as for a
    user (else judged_where_screened)."""
    args = args if own_backend_judges else judged_where_screened(args)
    env = {**os.environ, **CLI_ENV, **(env or {})}  # env may set COLUMNS itself
    proc = _served(list(args), cwd or _empty_cwd(), env, timeout) or subprocess.run(
        [sys.executable, "-m", "torchmend", *args],
        cwd=cwd or _empty_cwd(),
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return CliResult(proc.returncode, proc.stdout, proc.stderr)


_CLI_SERVER: list[subprocess.Popen[bytes]] = []  # this process's (tests/cli_server.py), from its first call on


def _served(args: list[str], cwd: Path, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess[str] | None:
    """The call forked by this process's CLI server, or None: not served (then it is a subprocess).
    TORCHMEND_TEST_FRESH=1 or TORCHMEND_TEST_CLI=0: none, every CLI a fresh interpreter."""
    fresh = os.environ.get("TORCHMEND_TEST_FRESH", "") not in ("", "0") or os.environ.get("TORCHMEND_TEST_CLI") == "0"
    if fresh or sys.platform != "linux":
        return None
    path = Path(os.environ.get(_EVENTS_ENV) or tempfile.gettempdir()) / f"cli-{os.getpid()}.sock"
    if not _CLI_SERVER:
        _CLI_SERVER.append(cli_server.start(path, {**os.environ, **CLI_ENV}))
        return None  # it imports for a second or two: this call is a subprocess
    return cli_server.call(path, args, cwd, env, timeout)


def _empty_cwd() -> Path:
    """The CLI's working folder when a test names none: an empty one, not the checkout, because every run works in
    a copy of its working folder (profiler/sandbox.py) and a copy of the checkout costs each run half a second."""
    where = Path(os.environ.get(_EVENTS_ENV) or tempfile.gettempdir()) / "cwd"
    where.mkdir(exist_ok=True)
    return where


_SCANS: dict[tuple[str, ...], CliResult] = {}

# What a leak leaves in the temp directory (torchrun's rendezvous directories): checked at the end of the session.
# The events directories of other test sessions running at the same time are alive, not leaked: only this
# session's own is checked, after its removal.
_LEFTOVERS = ("torchelastic_",)
# The cached scans' directory, shared by every pytest-xdist worker: the controller (or a plain pytest run)
# makes it and hands it on through the environment, which the workers inherit.
_EVENTS_ENV = "TORCHMEND_TEST_EVENTS"


def _leftovers() -> set[str]:
    return {p.name for p in Path(tempfile.gettempdir()).iterdir() if p.name.startswith(_LEFTOVERS)}


def pytest_configure(config: pytest.Config) -> None:
    if _EVENTS_ENV not in os.environ:  # the controller, or a plain run; xdist workers inherit its directory
        config._torchmend_tmp_before = _leftovers()  # type: ignore[attr-defined]
        config._torchmend_events = tempfile.mkdtemp(prefix="torchmend-test-events-")  # type: ignore[attr-defined]
        os.environ[_EVENTS_ENV] = config._torchmend_events  # type: ignore[attr-defined]
        config._torchmend_forkserver = _shared_forkserver(Path(config._torchmend_events))  # type: ignore[attr-defined]


def _shared_forkserver(folder: Path) -> subprocess.Popen[bytes] | None:
    """One fork server for the session's runs (profiler/forkserver.py), named to every worker and every CLI the
    tests start by $TORCHMEND_FORKSERVER: a run skips torch's imports wherever its environment is the session's
    (a test that sets one of torch's variables gets a fresh interpreter). TORCHMEND_TEST_FRESH=1: none, every run
    as a user's scan runs. tests/e2e/test_faults.py and test_forkserver.py run without it."""
    from torchmend.profiler.forkserver import SHARED_ENV

    if os.environ.get("TORCHMEND_TEST_FRESH", "") not in ("", "0") or sys.platform != "linux":
        return None
    path = folder / "forkserver.sock"
    proc = subprocess.Popen(
        [sys.executable, "-m", "torchmend.profiler.zygote", "--listen", str(path)],
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        cwd="/",
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    os.environ[SHARED_ENV] = str(path)
    return proc


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    import shutil

    for server in _CLI_SERVER:
        server.kill()
        server.wait()
    owned = getattr(session.config, "_torchmend_events", None)
    if owned is None:  # an xdist worker: the controller cleans up once every worker is done
        return
    server = getattr(session.config, "_torchmend_forkserver", None)
    if server is not None:
        server.kill()
        server.wait()
    shutil.rmtree(owned, ignore_errors=True)
    os.environ.pop(_EVENTS_ENV, None)
    before = session.config._torchmend_tmp_before  # type: ignore[attr-defined]
    new = sorted(_leftovers() - before) + ([os.path.basename(owned)] if os.path.exists(owned) else [])
    if new and exitstatus == 0:
        session.exitstatus = 1
        print(f"\ntests left these behind in {tempfile.gettempdir()}: {', '.join(new[:10])}", file=sys.stderr)


def _events_dir(key: tuple[str, ...]) -> Path:
    return Path(os.environ[_EVENTS_ENV]) / hashlib.sha256("\0".join(key).encode()).hexdigest()[:16]


def scan_json(script: Path, *extra: str) -> CliResult:
    """`torchmend scan SCRIPT --backend aot_eager --format json`, run once per test session per argument list,
    whichever worker asks first (the others wait on its lock and read its result); its raw events are kept too:
    see scan_events."""
    import fcntl

    key = (str(script), *extra)
    if key not in _SCANS:
        folder = _events_dir(key)
        saved = folder.with_suffix(".result.json")
        with open(folder.with_suffix(".lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if saved.exists():
                _SCANS[key] = CliResult(**json.loads(saved.read_text()))
            else:
                result = torchmend(
                    "scan",
                    str(script),
                    "--backend",
                    "aot_eager",
                    "--format",
                    "json",
                    "--timeout",
                    "300",
                    "--keep-events",
                    str(folder),
                    *extra,
                )
                saved.write_text(json.dumps(result.__dict__))
                _SCANS[key] = result
    return _SCANS[key]


def scan_events(script: Path, *extra: str) -> list[dict[str, Any]]:
    """The event stream of that same cached scan (what the child wrote, END event with losses included)."""
    from torchmend.profiler.events import read_events

    scan_json(script, *extra)
    return read_events(_events_dir((str(script), *extra)) / "events.jsonl")


def observed(findings: list[dict[str, Any]], fixture_dir: Path) -> list[dict[str, Any]]:
    """Findings (scan JSON) in the shape fixtures/scan/*/expected.json records them: rule, file, line, count,
    and for a library finding the project frame that reached it."""
    out = []
    for f in findings:
        item = {"rule": f["rule"], "line": f["line"], "count": f["count"]}
        if f["where"] == "project":
            item["file"] = os.path.relpath(f["path"], fixture_dir)
        else:
            item["file"] = "<library>/" + f["path"].split("site-packages/")[-1]
            uf = f["user_frame"]
            item["from"] = f"{os.path.relpath(uf['path'], fixture_dir)}:{uf['line']}"
        out.append(item)
    return sorted(out, key=lambda d: json.dumps(d, sort_keys=True))


def fix_a_copy(fixture: Path, where: Path) -> tuple[Path, str]:
    """`fix --yes --unsafe-fixes` (aot_eager, 3 steps) on a copy of a fixture script in `where`: the copy, and fix's
    output with its line wrapping undone. Asserts that fix exited 0."""
    import shutil

    script = where / fixture.name
    shutil.copy(fixture, script)
    fixed = torchmend(
        "fix", "--yes", "--unsafe-fixes", "--backend", "aot_eager", "--steps", "3", str(script), cwd=where
    )
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    return script, " ".join(fixed.stdout.split())


def fix_safe_copy(fixture: Path, where: Path, beside: tuple[str, ...] = ()) -> tuple[Path, str, dict[str, Any]]:
    """`fix --yes` (safe fixes only, aot_eager) on a copy of a fixture script in `where` (and of the files of its
    folder named `beside`, which it imports): the copy, fix's output with its line wrapping undone, and the verdict
    document (`--verdict-json`). Asserts that fix exited 0."""
    import shutil

    script = where / fixture.name
    shutil.copy(fixture, script)
    for name in beside:
        shutil.copy(fixture.parent / name, where / name)
    verdict = where / "verdict.json"
    fixed = torchmend("fix", "--yes", "--backend", "aot_eager", "--verdict-json", str(verdict), str(script), cwd=where)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    return script, " ".join(fixed.stdout.split()), json.loads(verdict.read_text())


def torch_minor() -> str:
    import torch

    return ".".join(torch.__version__.split("+")[0].split(".")[:2])


@pytest.fixture
def write_script(tmp_path: Path):
    def write(name: str, source: str) -> Path:
        p = tmp_path / name
        p.write_text(source)
        return p

    return write
