"""The fork server (profiler/forkserver.py): runs forked from one interpreter that imported torch behave as runs of a
fresh interpreter do, are this process's own children, and share the server while the environment stays the same.
Real runs of a real script; the fresh-interpreter arm is the same runner before any server was warmed."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from torchmend.profiler import forkserver
from torchmend.profiler.runner import RunOutcome, RunSpec, run
from torchmend.values import Root

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the fork server is Linux's (a subreaper)")

# What the script reports about the process it runs in; one line each, compared between the two ways of starting.
SCRIPT = """\
import os, sys
preloaded = "torch._inductor.compile_fx" in sys.modules  # before anything of the script's own imports
import numpy, torch
print("argv", sys.argv[1:])
print("cwd", os.path.basename(os.getcwd()))
print("path0", os.path.basename(sys.path[0]))
print("env", os.environ.get("FS_PROBE"), os.environ.get("TORCHMEND_RUN") is not None)
print("parent", os.getppid())
print("session", os.getsid(0) == os.getpid())
print("name", __name__)
print("stdin", repr(sys.stdin.read()))
print("torch_seed", torch.initial_seed())
print("numpy", numpy.random.randint(1 << 30))
print("preloaded", preloaded)
sys.exit(3)
"""


def _lines(outcome: RunOutcome) -> dict[str, str]:
    return dict(line.split(" ", 1) for line in outcome.output_tail.splitlines() if " " in line)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "probe.py").write_text(SCRIPT)
    monkeypatch.delenv(forkserver.SHARED_ENV, raising=False)  # the session's shared server (tests/conftest.py)
    forkserver.stop()
    yield tmp_path / "proj"
    forkserver.stop()  # the other tests of this worker start as a process that warmed nothing


def _spec(project: Path, *env: tuple[str, str]) -> RunSpec:
    return RunSpec(script=project / "probe.py", args=("--lr", "0.1"), cwd=project, env=(("FS_PROBE", "yes"), *env))


def test_forked_runs_match_a_fresh_interpreter_and_share_one_server(project: Path) -> None:
    fresh = run(_spec(project))
    assert forkserver._own_server is None  # nobody warmed a server: a run starts a fresh interpreter
    forkserver.warm()  # as fix, verify and the verification API do
    first = run(_spec(project))
    server = forkserver._own_server
    assert server is not None and server.hello().get("ready") is True
    second = run(_spec(project))
    assert forkserver._own_server is server  # the same environment: the same server

    seen = [_lines(o) for o in (fresh, first, second)]
    for outcome in (fresh, first, second):
        assert (outcome.ended_by, outcome.returncode) == ("exit", 3), outcome.output_tail
    for lines in seen:
        assert lines["argv"] == "['--lr', '0.1']"
        assert lines["cwd"] == "proj"  # the run's copy of the folder keeps its name
        assert lines["path0"] == "proj"  # the script's folder first on sys.path, as `python probe.py` has it
        assert lines["env"] == "yes True"  # the run's environment and its marker
        assert lines["parent"] == str(os.getpid())  # this process's own child, also when forked
        assert lines["session"] == "True"  # in a session of its own: a timeout stops its whole group
        assert lines["name"] == "__main__"
        assert lines["stdin"] == "''"  # /dev/null
    for key in ("torch_seed", "numpy"):  # the generators seeded at import are drawn afresh in each fork
        assert len({lines[key] for lines in seen}) == 3, seen
    assert [lines["preloaded"] for lines in seen] == ["False", "True", "True"]  # the forks skipped the imports
    assert server.proc is not None and first.start.get("pid") != server.proc.pid


def test_another_environment_gets_another_server(project: Path) -> None:
    forkserver.warm()
    assert _lines(run(_spec(project, (forkserver.FRESH_ENV, "1"))))["preloaded"] == "False"  # asked for: fresh
    run(_spec(project))
    before = forkserver._own_server
    assert before is not None
    # not one of the variables a run sets for itself: torch may read it at import, so it needs its own server
    changed = run(_spec(project, ("TORCH_SHOW_CPP_STACKTRACES", "1")))
    assert _lines(changed)["preloaded"] == "True"
    after = forkserver._own_server
    assert after is not before and before.proc is not None and before.proc.poll() is not None  # the old one left
    # a run's own caches are read when used: the same server serves it
    run(_spec(project, ("TORCH_SHOW_CPP_STACKTRACES", "1"), ("TORCHINDUCTOR_CACHE_DIR", str(project / "c"))))
    assert forkserver._own_server is after
    # so is the terminal's kind (a pseudo-terminal's TERM=dumb, as `fix` at a prompt under pexpect has)
    run(
        _spec(
            project,
            ("TORCH_SHOW_CPP_STACKTRACES", "1"),
            ("TERM", "dumb" if os.environ.get("TERM") != "dumb" else "xterm"),
        )
    )
    assert forkserver._own_server is after


def test_a_fresh_run_does_not_stand_in_for_forked_before_runs(project: Path) -> None:
    """A scan made before any server (a fresh interpreter: its first compile includes inductor's imports) is not
    timed among forked runs: the verification warms the server and runs its before-arm again, and says so."""
    from torchmend import pipeline
    from torchmend.verify.runs import from_outcome

    script = project / "train.py"
    script.write_text(
        "import torch\nm = torch.nn.Linear(2, 2)\nf = torch.compile(m, backend='eager')\n"
        "for _ in range(2):\n    f(torch.ones(1, 2)).sum().backward()\n"
    )
    spec = RunSpec(script=script, cwd=project)
    fresh = from_outcome("before", 0, run(spec), Root(project))
    assert not fresh.outcome.forked
    started: list[pipeline.RunStarted] = []
    _, before, after = pipeline.verify(spec, spec, project, reuse_before=(fresh,), on_run=started.append)
    assert [(s.arm, s.number, s.total) for s in started] == [("before", 1, 2), ("after", 2, 2)]
    assert before[0] is not fresh and before[0].outcome.forked and after[0].outcome.forked


def test_a_shared_server_forks_the_runs_of_every_process_that_names_it(project: Path, tmp_path: Path) -> None:
    """$TORCHMEND_FORKSERVER (as the test session has one): the server is the runs' parent and says how they ended;
    a run past its time budget is stopped, its whole group with it."""
    import subprocess
    import time

    path = tmp_path / "shared.sock"
    env = {**os.environ, "FS_PROBE": "yes"}
    server = subprocess.Popen([sys.executable, "-m", "torchmend.profiler.zygote", "--listen", str(path)], env=env)
    try:
        while not path.exists():
            time.sleep(0.05)
        shared = (forkserver.SHARED_ENV, str(path))
        runs = [run(_spec(project, shared)) for _ in range(2)]
        for outcome in runs:
            lines = _lines(outcome)
            assert (outcome.ended_by, outcome.returncode) == ("exit", 3), outcome.output_tail
            assert (lines["parent"], lines["preloaded"], lines["session"]) == (str(server.pid), "True", "True")
        assert runs[0].forked and _lines(runs[0])["numpy"] != _lines(runs[1])["numpy"]
        assert forkserver._own_server is None  # nothing of this process's own was started

        (project / "hang.py").write_text(
            "import subprocess, time\nsubprocess.Popen(['sleep', '299.25'])\ntime.sleep(300)\n"
        )
        hung = run(RunSpec(script=project / "hang.py", cwd=project, timeout=3, env=(("FS_PROBE", "yes"), shared)))
        assert hung.ended_by == "timeout" and hung.forked
        sleepers = subprocess.run(["pgrep", "-f", "sleep 299.25"], capture_output=True, text=True).stdout.split()
        assert not [p for p in sleepers if int(p) != os.getpid()]  # the script's own subprocess went with it
    finally:
        server.kill()
        server.wait()
    # a socket with no server behind it: the run starts a fresh interpreter, and nothing is said of it
    nobody = run(_spec(project, (forkserver.SHARED_ENV, str(tmp_path / "nobody.sock"))))
    assert (nobody.ended_by, nobody.forked, _lines(nobody)["preloaded"]) == ("exit", False, "False")
