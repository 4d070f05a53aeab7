"""Trust under faults and bad input (issue 19): encodings, files Python rejects, signals and SIGKILL while
writing, an unusable state directory, damaged and racing undo records, owners, and --diff on odd names and
broken stdouts. Real files in scratch projects; the CLI cases run the real `torchmend fix --no-verify` on tiny
scripts (aot_eager, a few steps); the kills are real: TORCHMEND_TEST_SIGNAL_AFTER_WRITE=N:SIG makes the writing
process send itself SIG right after replacing its N-th file (torchmend/store/)."""

from __future__ import annotations

import codecs
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import torchmend

from torchmend import sources, store
from torchmend.store import journal

pytestmark = pytest.mark.faults


@pytest.fixture
def as_a_user_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fault in the runs themselves (a signal while the script runs, a locale, a full disk) is met as a user's
    runs meet it: fresh interpreters, and fix's own fork server, not the session's shared one (tests/conftest.py).
    The other faults are the writer's and the CLI's: their runs are forked from the shared server, as the rest of
    the suite's are (a fresh interpreter costs each of their scans about 5 s of this machine)."""
    from torchmend.profiler.forkserver import SHARED_ENV

    monkeypatch.delenv(SHARED_ENV, raising=False)


FIX = ("--yes", "--unsafe", "--no-verify", "--steps", "3")
# Two files, one print each (the print codemod guards each: one change per file).
TRAIN = """import torch
from model import step


def run(x):
    print("run", x.shape[0], flush=True)
    return step(x)


g = torch.compile(run, backend="aot_eager")
for _ in range(3):
    g(torch.randn(4))
"""
MODEL = """def step(x):
    print("hi", x.shape[0], flush=True)
    return x * 2
"""
GUARDED = """def step(x):
    if not torch.compiler.is_compiling():
        print("hi", x.shape[0], flush=True)
    return x * 2
"""


def _train_printing(extra: str = "") -> str:
    return f"""{extra}import torch


def step(x):
    print("na\xefve", x.shape[0], flush=True)
    return x * 2


g = torch.compile(step, backend="aot_eager")
for _ in range(3):
    g(torch.randn(4))
"""


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TORCHMEND_STATE_DIR", str(tmp_path / "state"))
    return tmp_path / "state"


@pytest.fixture
def two_files(tmp_path: Path, state: Path) -> Path:
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "train.py").write_text(TRAIN)
    (proj / "model.py").write_text(MODEL)
    return proj


def _snapshot(proj: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(proj.iterdir()) if p.is_file()}


def _leftover_temps(proj: Path) -> list[str]:
    return [p.name for p in proj.iterdir() if p.name.endswith(".torchmend")]


# ------------------------------------------------------------------------------------------------ encodings


def test_latin1_file_is_fixed_and_the_other_bytes_kept(tmp_path: Path, state: Path) -> None:
    proj = tmp_path / "proj"
    proj.mkdir()
    text = _train_printing("# -*- coding: latin-1 -*-\n# caf\xe9 au lait\n")
    (proj / "train.py").write_bytes(text.encode("latin-1"))
    check = torchmend("fix", "train.py", "--check", "--steps", "3", cwd=proj)
    assert check.returncode == 6, check.stderr  # a change to make, not "not UTF-8"
    r = torchmend("fix", "train.py", *FIX, cwd=proj)
    assert r.returncode == 0, r.stderr
    fixed = text.replace('    print("na\xefve"', '    if not torch.compiler.is_compiling():\n        print("na\xefve"')
    assert (proj / "train.py").read_bytes() == fixed.encode("latin-1")  # latin-1 still, the edit only
    # The saved patch is latin-1 too: it applies to the file as it was.
    [record] = store.undo_records(proj)
    _assert_applies(record.patch.read_bytes(), {"train.py": text.encode("latin-1")}, tmp_path / "copy")


def _assert_applies(patch: bytes, files: dict[str, bytes], where: Path) -> None:
    where.mkdir()
    for name, data in files.items():
        (where / name).write_bytes(data)
    (where.parent / "the.patch").write_bytes(patch)
    for tool in (["git", "apply", "--check"], ["patch", "-p1", "--dry-run", "-i"]):
        if shutil.which(tool[0]) is None:
            pytest.skip(f"{tool[0]} is not installed")
        done = subprocess.run([*tool, str(where.parent / "the.patch")], cwd=where, capture_output=True, text=True)
        assert done.returncode == 0, done.stdout + done.stderr


def test_bom_is_kept(tmp_path: Path, state: Path) -> None:
    proj = tmp_path / "proj"
    proj.mkdir()
    text = _train_printing().replace("\n\n\ndef", "\ndef")  # line 1 is in the hunk's context
    (proj / "train.py").write_bytes(codecs.BOM_UTF8 + text.encode())
    diff = torchmend("fix", "train.py", "--diff", "--unsafe", "--steps", "3", cwd=proj)
    assert diff.returncode == 0 and diff.stdout.count("@@ ") == 1, diff.stdout  # one hunk: no BOM hunk
    _assert_applies(diff.stdout.encode(), {"train.py": codecs.BOM_UTF8 + text.encode()}, tmp_path / "copy")
    r = torchmend("fix", "train.py", *FIX, cwd=proj)
    assert r.returncode == 0, r.stderr
    data = (proj / "train.py").read_bytes()
    assert data.startswith(codecs.BOM_UTF8) and "is_compiling" in data.decode("utf-8-sig")


def test_store_round_trips_encodings_byte_for_byte(tmp_path: Path, state: Path) -> None:
    cp = tmp_path / "cp.py"
    cp.write_bytes(b"# coding: cp1252\r\nx = '\x80'\r\n")  # CRLF and a euro sign in cp1252
    text = sources.read_source(str(cp))
    assert text == "# coding: cp1252\r\nx = '\u20ac'\r\n"
    record = store.write_fix({str(cp): (text, text.replace("x =", "y ="))}, tmp_path, "patch", "")
    assert cp.read_bytes() == b"# coding: cp1252\r\ny = '\x80'\r\n"
    store.undo(store.undo_records(tmp_path)[-1], tmp_path)
    assert cp.read_bytes() == b"# coding: cp1252\r\nx = '\x80'\r\n" and record.complete
    with pytest.raises(store.WriteRefused, match="cannot hold"):  # a character the encoding lacks: refused
        store.write_fix({str(cp): (text, text + "z = '\u4e2d'\r\n")}, tmp_path, "patch", "")
    assert cp.read_bytes() == b"# coding: cp1252\r\nx = '\x80'\r\n"


def test_a_script_python_rejects_is_refused_before_running(tmp_path: Path, state: Path) -> None:
    proj = tmp_path / "proj"
    proj.mkdir()
    # No coding line, and the byte only in a comment: compile() of the bytes lets it pass, `python train.py` not.
    (proj / "train.py").write_bytes(_train_printing("# caf\xe9\n").replace("na\xefve", "naive").encode("latin-1"))
    r = torchmend("fix", "train.py", *FIX, cwd=proj)
    assert r.returncode == 4
    assert "byte 0xe9 on line 1" in " ".join(r.stderr.split()), r.stderr
    assert "finding" not in r.stdout + r.stderr  # refused before the scan


def test_a_module_python_rejects_is_refused_before_anything_is_written(two_files: Path) -> None:
    # import accepts it (compile() of bytes skips comments), running it as a script would not.
    (two_files / "model.py").write_bytes(MODEL.replace("flush=True)", "flush=True)  # caf\xe9").encode("latin-1"))
    before = _snapshot(two_files)
    r = torchmend("fix", "train.py", *FIX, cwd=two_files)
    assert r.returncode == 4, r.stdout + r.stderr
    assert "model.py: byte 0xe9 on line 2" in " ".join(r.stderr.split()), r.stderr
    assert _snapshot(two_files) == before


# --------------------------------------------------------------------------------------- signals and kills


def test_sigkill_between_the_two_writes_is_rolled_back_by_undo(two_files: Path, state: Path) -> None:
    before = _snapshot(two_files)
    r = torchmend("fix", "train.py", *FIX, cwd=two_files, env={"TORCHMEND_TEST_SIGNAL_AFTER_WRITE": "1:KILL"})
    assert r.returncode == -signal.SIGKILL
    assert sum(_snapshot(two_files)[n] != before[n] for n in before) == 1  # killed half way: one file new
    found = store.records(two_files)
    assert len(found.incomplete) == 1 and not found.complete  # the journal was there before the first byte
    listing = torchmend("undo", "--list", cwd=two_files)
    assert "interrupted while writing" in listing.stdout
    undone = torchmend("undo", cwd=two_files)
    assert undone.returncode == 0 and "rolled back" in undone.stderr, undone.stderr
    assert _snapshot(two_files) == before and not _leftover_temps(two_files)
    assert store.records(two_files).incomplete == []


def test_sigkill_after_the_last_write_is_rolled_back_by_the_next_fix(two_files: Path) -> None:
    before = _snapshot(two_files)
    r = torchmend("fix", "train.py", *FIX, cwd=two_files, env={"TORCHMEND_TEST_SIGNAL_AFTER_WRITE": "2:KILL"})
    assert r.returncode == -signal.SIGKILL
    assert all(_snapshot(two_files)[n] != before[n] for n in before)  # both replaced, record not yet complete
    again = torchmend("fix", "train.py", "--yes", "--no-verify", "--steps", "3", cwd=two_files)
    assert "rolled back" in again.stderr, again.stderr
    assert _snapshot(two_files) == before  # rolled back first; the safe-only rerun changes nothing


@pytest.mark.parametrize("sig, code", [("TERM", 143), ("INT", 130)])
def test_a_signal_between_the_two_writes_waits_for_the_write_to_finish(two_files: Path, sig: str, code: int) -> None:
    before = _snapshot(two_files)
    r = torchmend("fix", "train.py", *FIX, cwd=two_files, env={"TORCHMEND_TEST_SIGNAL_AFTER_WRITE": f"1:{sig}"})
    assert r.returncode == code, r.stderr
    assert "every file was written" in r.stderr and "Traceback" not in r.stderr
    after = _snapshot(two_files)
    assert all(after[n] != before[n] for n in before) and b"is_compiling" in after["model.py"]  # all, not half
    found = store.records(two_files)
    assert len(found.complete) == 1 and not found.incomplete and not _leftover_temps(two_files)
    assert torchmend("undo", cwd=two_files).returncode == 0
    assert _snapshot(two_files) == before


# A training loop that runs until it is stopped once it is the HANG_FROM_RUN-th run of the script (1: the scan;
# 2: fix's first verification run, the scan being the first): it starts a subprocess, as a data loader does, and
# says where both are (pid, process group) once the compiled function ran.
SLEEPER = """import os
import subprocess
import sys
import time
from pathlib import Path

import torch

here = Path(os.environ["MARKS"])  # outside the project: every run leaves its folders as it found them
with open(here / "runs.txt", "a") as f:
    f.write("run\\n")
run = len((here / "runs.txt").read_text().splitlines())
hang = run >= int(os.environ["HANG_FROM_RUN"])
worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])


def step(x):
    print("step", x.shape[0], flush=True)
    return x * 2


g = torch.compile(step, backend="aot_eager")
for i in range(10**6 if hang else 3):
    g(torch.randn(4))
    if i == 0 and hang:
        (here / "pids.tmp").write_text(f"{os.getpid()} {os.getpgid(0)} {worker.pid}")
        os.replace(here / "pids.tmp", here / "pids")
    time.sleep(0.05)
worker.kill()
"""


def _alive(pid: int) -> bool:
    """A process that exists and is not a zombie (this container's init reaps no orphans)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def _group_members(pgid: int) -> list[int]:
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            members.append(int(stat.parent.name))
    return members


def _stop_during_run(proj: Path, tmp: Path, sig: signal.Signals, *args: str, hang_from: int) -> tuple[int, str, list]:
    """Start `torchmend ARGS` on the sleeper, wait until the run that hangs is under way, send SIG to torchmend
    only (as `kill`, `timeout` or a CI runner does; Ctrl-C at a terminal reaches torchmend alone too, the script
    running in a session of its own), and return its exit status, its stderr and the pids the script wrote."""
    marks = proj.parent / "marks"  # what the script writes for the test (the runs' count, its pids)
    marks.mkdir()
    env = dict(os.environ, NO_COLOR="1", COLUMNS="200", TMPDIR=str(tmp), HANG_FROM_RUN=str(hang_from), MARKS=str(marks))

    def default_handlers() -> None:  # a test started from a non-interactive shell inherits SIGINT ignored
        for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(s, signal.SIG_DFL)

    p = subprocess.Popen(
        [sys.executable, "-m", "torchmend", *args],
        cwd=proj,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=default_handlers,
    )
    try:
        deadline = time.monotonic() + 240
        while not (marks / "pids").exists():
            assert p.poll() is None, p.communicate()
            assert time.monotonic() < deadline, "the script never started its loop"
            time.sleep(0.1)
        pids = [int(x) for x in (marks / "pids").read_text().split()]
        assert all(_alive(pid) for pid in (pids[0], pids[2]))
        p.send_signal(sig)
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    return p.returncode, out + err, pids


def _ours(tmp: Path) -> list[str]:
    """torchmend's temporary folders (torch's own caches, torchinductor_USER, are not ours to remove)."""
    return [p.name for p in tmp.iterdir() if p.name.startswith("torchmend")]


STOPS = [
    (signal.SIGINT, 130, "interrupted (Ctrl-C)"),
    (signal.SIGTERM, 143, "stopped by SIGTERM"),
    (signal.SIGHUP, 129, "stopped by SIGHUP"),
]


@pytest.mark.usefixtures("as_a_user_runs")
@pytest.mark.parametrize("sig, code, said", STOPS, ids=["INT", "TERM", "HUP"])
def test_a_signal_during_the_scan_stops_the_script_and_cleans_up(
    tmp_path: Path, state: Path, sig: signal.Signals, code: int, said: str
) -> None:
    proj, tmp = tmp_path / "proj", tmp_path / "tmp"
    proj.mkdir()
    tmp.mkdir()
    (proj / "train.py").write_text(SLEEPER)
    returncode, output, (child, pgid, worker) = _stop_during_run(proj, tmp, sig, "scan", "train.py", hang_from=1)
    assert returncode == code, output
    assert f"torchmend: {said}: the script was stopped; nothing was written" in output
    assert "Traceback" not in output
    assert not _alive(child) and not _alive(worker) and _group_members(pgid) == []  # nothing orphaned
    assert _ours(tmp) == []  # the events folder is gone


@pytest.mark.usefixtures("as_a_user_runs")
def test_sigterm_during_the_verification_of_a_fix_stops_it_and_writes_nothing(tmp_path: Path, state: Path) -> None:
    proj, tmp = tmp_path / "proj", tmp_path / "tmp"
    proj.mkdir()
    tmp.mkdir()
    (proj / "train.py").write_text(SLEEPER)
    before = (proj / "train.py").read_bytes()
    args = ("fix", "train.py", "--yes", "--unsafe", "--verify-backend", "aot_eager")
    returncode, output, (child, pgid, worker) = _stop_during_run(proj, tmp, signal.SIGTERM, *args, hang_from=2)
    assert returncode == 143, output
    assert "stopped by SIGTERM: the verification runs were stopped; nothing was written" in output
    assert "Traceback" not in output
    assert not _alive(child) and not _alive(worker) and _group_members(pgid) == []
    assert _ours(tmp) == []  # the events folder, the scan's and the arms' cache folders are gone
    assert (proj / "train.py").read_bytes() == before and store.records(proj) == store.Records([], [], [])


# ---------------------------------------------------------------------------------------- the project boundary


def test_a_script_linked_to_a_file_outside_the_project_is_never_edited(tmp_path: Path, state: Path) -> None:
    proj, elsewhere = tmp_path / "proj", tmp_path / "elsewhere"
    proj.mkdir()
    elsewhere.mkdir()
    (elsewhere / "train.py").write_text(_train_printing())
    (proj / "train.py").symlink_to(elsewhere / "train.py")
    before = (elsewhere / "train.py").read_bytes()
    for mode in (FIX, ("--diff", "--unsafe", "--steps", "3")):
        r = torchmend("fix", "train.py", *mode, cwd=proj)
        said = " ".join(r.stderr.split())
        assert r.returncode == 9, r.stdout + r.stderr
        assert f"{proj / 'train.py'} leads through a symbolic link to {elsewhere / 'train.py'}" in said, said
        assert "outside the project" in said and "Traceback" not in said
        assert "finding" not in r.stdout + r.stderr and r.stdout == ""  # refused before anything ran
    assert (elsewhere / "train.py").read_bytes() == before and not store.records(proj).complete
    assert not store.records(elsewhere).complete


def test_a_module_linked_to_a_file_outside_the_project_is_never_edited(two_files: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (two_files / "model.py").rename(elsewhere / "model.py")
    (two_files / "model.py").symlink_to(elsewhere / "model.py")
    r = torchmend("fix", "train.py", *FIX, cwd=two_files)
    said = " ".join(r.stdout.split())
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"warning: model.py leads through a symbolic link to {elsewhere / 'model.py'}, outside the project" in said
    assert (elsewhere / "model.py").read_text() == MODEL and (two_files / "model.py").is_symlink()
    assert "is_compiling" in (two_files / "train.py").read_text()  # the project's own file is fixed
    [record] = store.undo_records(two_files)
    assert list(record.files) == [str(two_files / "train.py")]


# ----------------------------------------------------------------------------------------- the state dir


def test_an_unusable_state_dir_refuses_before_anything_runs_or_is_written(two_files: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    before = _snapshot(two_files)
    r = torchmend("fix", "train.py", *FIX, cwd=two_files, env={"TORCHMEND_STATE_DIR": str(blocker / "state")})
    assert r.returncode == 9, r.stderr
    assert "cannot keep undo records" in " ".join(r.stderr.split()) and "Traceback" not in r.stderr
    assert "finding" not in r.stdout and _snapshot(two_files) == before
    with pytest.MonkeyPatch.context() as m:  # the store itself refuses too, before the first byte
        m.setenv("TORCHMEND_STATE_DIR", str(blocker / "state"))
        with pytest.raises(store.WriteRefused):
            store.write_fix({str(two_files / "model.py"): (MODEL, GUARDED)}, two_files, "", "")
    assert _snapshot(two_files) == before


# --------------------------------------------------------------------------------------------- records


def test_a_damaged_record_is_named_and_skipped(tmp_path: Path, state: Path) -> None:
    (tmp_path / "a.py").write_text("a = 1\n")
    store.write_fix({str(tmp_path / "a.py"): ("a = 1\n", "a = 2\n")}, tmp_path, "p1", "first")
    second = store.write_fix({str(tmp_path / "a.py"): ("a = 2\n", "a = 3\n")}, tmp_path, "p2", "second")
    data = second.path.read_bytes()
    second.path.write_bytes(data[: len(data) // 2])  # truncated
    listing = torchmend("undo", "--list", "--project", str(tmp_path))
    assert listing.returncode == 0 and "Traceback" not in listing.stderr
    assert "damaged undo record" in listing.stderr and second.path.name in " ".join(listing.stderr.split())
    assert listing.stdout.count("1 file(s)") == 1
    (tmp_path / "a.py").write_text("a = 2\n")  # as the first fix left it
    undone = torchmend("undo", "--project", str(tmp_path))
    assert undone.returncode == 0, undone.stderr
    assert (tmp_path / "a.py").read_text() == "a = 1\n"


def test_records_made_in_the_same_instant_never_overwrite_each_other(
    tmp_path: Path, state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Force the race: one clock reading for all, and each random part handed out twice.
    monkeypatch.setattr(journal.time, "time_ns", lambda: 1_700_000_000_000_000_000)
    counter = iter(range(10**6))
    monkeypatch.setattr(journal.secrets, "token_hex", lambda n=None: f"{next(counter) // 2:06x}")
    threads = [
        threading.Thread(target=store.save_undo, args=({f"f{i}": ("a", "b")}, tmp_path, "", f"fix {i}"))
        for i in range(40)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    summaries = {r.summary for r in store.undo_records(tmp_path)}
    assert summaries == {f"fix {i}" for i in range(40)}


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can give a file to another user")
def test_owner_group_and_mode_are_kept(tmp_path: Path, state: Path) -> None:
    f = tmp_path / "a.py"
    f.write_text("a = 1\n")
    os.chown(f, 12345, 23456)
    f.chmod(0o640)
    store.write_fix({str(f): ("a = 1\n", "a = 2\n")}, tmp_path, "", "")
    st = f.stat()
    assert (st.st_uid, st.st_gid, st.st_mode & 0o777, f.read_text()) == (12345, 23456, 0o640, "a = 2\n")


# ------------------------------------------------------------------------------------------------- --diff


def test_diff_of_a_name_with_a_space_applies_with_git_and_patch(tmp_path: Path, state: Path) -> None:
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "my train.py").write_text(_train_printing())
    r = torchmend("fix", "my train.py", "--diff", "--unsafe", "--steps", "3", cwd=proj)
    assert r.returncode == 0 and "+++ b/my train.py" in r.stdout, r.stderr
    _assert_applies(r.stdout.encode(), {"my train.py": (proj / "my train.py").read_bytes()}, tmp_path / "copy")


def test_diff_to_a_full_or_closed_stdout(tmp_path: Path, state: Path) -> None:
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "train.py").write_text(_train_printing())
    cmd = ["fix", "train.py", "--diff", "--unsafe", "--steps", "3"]
    code, err = _to_full_stdout(proj, *cmd)  # the summary goes to stderr with --diff, then one line
    assert code == 23 and err.splitlines()[-1] == "torchmend: cannot write to stdout: No space left on device", err
    assert "Traceback" not in err
    # A reader that is gone before the patch comes: quiet, exit 141 as with SIGPIPE.
    code, err = _to_closed_pipe(proj, *cmd)
    assert code == 141 and "Traceback" not in err and "Error" not in err and "stdout" not in err, err


@pytest.mark.parametrize("args", [("rules",), ("undo", "--list"), ("scan", "--help")], ids=" ".join)
def test_any_output_to_a_full_or_closed_stdout(tmp_path: Path, state: Path, args: tuple[str, ...]) -> None:
    # print() and rich alike (these run no script: quick); the same line and codes as for --diff.
    code, err = _to_full_stdout(tmp_path, *args)
    assert code == 23 and err == "torchmend: cannot write to stdout: No space left on device", err
    code, err = _to_closed_pipe(tmp_path, *args)
    assert code == 141 and err == "", err


def _to_full_stdout(cwd: Path, *args: str) -> tuple[int, str]:
    env = dict(os.environ, NO_COLOR="1")
    with open("/dev/full", "w") as full:
        r = subprocess.run(
            [sys.executable, "-m", "torchmend", *args],
            cwd=cwd,
            env=env,
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            timeout=300,
        )
    return r.returncode, r.stderr.strip()


def _to_closed_pipe(cwd: Path, *args: str) -> tuple[int, str]:
    env = dict(os.environ, NO_COLOR="1")
    p = subprocess.Popen(
        [sys.executable, "-m", "torchmend", *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    p.stdout.close()  # type: ignore[union-attr]
    err = p.stderr.read()  # type: ignore[union-attr]
    return p.wait(timeout=300), err.strip()


def test_a_record_that_cannot_be_finished_puts_the_files_back(
    tmp_path: Path, state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "a.py").write_text("a = 1\n")
    (tmp_path / "b.py").write_text("b = 1\n")

    def disk_full(record: Path, patch: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(journal, "_write_patch", disk_full)
    with pytest.raises(store.WriteRefused, match="No space left on device.*nothing was changed"):
        store.write_fix(
            {str(tmp_path / "a.py"): ("a = 1\n", "a = 2\n"), str(tmp_path / "b.py"): ("b = 1\n", "b = 2\n")},
            tmp_path,
            "patch",
            "",
        )
    assert ((tmp_path / "a.py").read_text(), (tmp_path / "b.py").read_text()) == ("a = 1\n", "b = 1\n")
    assert store.records(tmp_path) == store.Records([], [], [])


# ------------------------------------------------------------------------------- issue 31: the second pass

# Starts a `sleep` in its process group and a grandchild in a session of its own (escaped from the group), then
# two optimizer steps of a compiled forward (no backward: torch 2.13's partitioner reads its templates in the
# locale's encoding, so a backward under LC_ALL=C fails inside torch itself, in plain python as well).
SPAWNER = """import os
import subprocess
import sys

import torch

sleeper = subprocess.Popen(["sleep", "600"])
escaped = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
with open(os.environ["MARKS"] + "/pids", "w") as f:  # outside the project, which the run leaves as it found it
    f.write(f"{os.getpid()} {sleeper.pid} {escaped.pid}")

model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)


@torch.compile(backend="aot_eager")
def step(x):
    print("step", x.shape[0])
    return model(x).sum()


with torch.no_grad():
    for _ in range(10):
        step(torch.randn(8, 4))
        opt.step()
"""
C_LOCALE = {"LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0", "PYTHONIOENCODING": ""}


@pytest.mark.usefixtures("as_a_user_runs")
def test_scan_in_the_c_locale_stops_everything_the_script_started(tmp_path: Path, state: Path) -> None:
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "train.py").write_text(SPAWNER)
    r = torchmend("scan", "train.py", "--steps", "2", cwd=proj, env={**C_LOCALE, "MARKS": str(tmp_path)})
    pids = [int(p) for p in (tmp_path / "pids").read_text().split()]
    try:
        assert r.returncode == 0, r.stdout + r.stderr
        assert "Traceback" not in r.stderr and "UnicodeEncodeError" not in r.stderr
        assert (r.stdout + r.stderr).isascii() and "TM101" in r.stdout and "->" not in r.stderr
        assert "ended by the --steps budget" in r.stdout
        # --steps ended the run: the sleep in its group and the grandchild in its own session are stopped too.
        assert [pid for pid in pids if _alive(pid)] == []
        said = " ".join(r.stderr.split())
        assert f"stopped 1 process the script left running outside its process group: pid {pids[2]}" in said
    finally:
        for pid in pids:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("args", [("rules",), ("config",), ("lint", ".")], ids=" ".join)
def test_commands_in_the_c_locale_write_ascii(tmp_path: Path, state: Path, args: tuple[str, ...]) -> None:
    (tmp_path / "train.py").write_text(_train_printing())  # a TM101 for lint: a table with its findings
    r = torchmend(*args, cwd=tmp_path, env=C_LOCALE)
    assert r.returncode in (0, 6), r.stdout + r.stderr
    assert "Traceback" not in r.stderr and r.stdout and (r.stdout + r.stderr).isascii()


@pytest.mark.parametrize(
    "args, said",
    [
        (("scan", "train.py", "--select", "TM999"), "did you mean TM299 or TM199"),
        (("fix", "train.py", "--check", "--select", "tm1"), "did you mean TM1?"),
        (("lint", ".", "--ignore", "TM1x"), "is not a rule code or a prefix of one"),
        # typer 0.29's own range check (min 0.1) refuses nan first where it is installed; older typer leaves it to us
        (("scan", "train.py", "--timeout", "nan"), "nan is not a number of seconds|Invalid value for '--timeout'"),
        (("fix", "train.py", "--check", "--timeout", "inf"), "inf is not a number of seconds"),
    ],
    ids=["TM999", "tm1", "TM1x", "nan", "inf"],
)
def test_unknown_rule_codes_and_endless_timeouts_are_usage_errors(
    tmp_path: Path, state: Path, monkeypatch: pytest.MonkeyPatch, args: tuple[str, ...], said: str
) -> None:
    # In-process (typer's runner): a usage error is found before anything runs.
    from typer.testing import CliRunner

    from torchmend.cli.main import app

    (tmp_path / "train.py").write_text(_train_printing())
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(app, list(args), env={"COLUMNS": "200", "NO_COLOR": "1"})
    output = " ".join(r.output.replace("\u2502", " ").split())
    assert r.exit_code == 2 and any(part in output for part in said.split("|")), output


def test_a_relative_xdg_state_home_never_writes_into_the_project(tmp_path: Path) -> None:
    proj = tmp_path / "proj"
    (proj / ".git").mkdir(parents=True)  # a work tree: undo from a subfolder finds its project
    (proj / "a.py").write_text("a = 1\n")
    env = {"XDG_STATE_HOME": "state", "HOME": str(tmp_path / "home"), "TORCHMEND_STATE_DIR": ""}
    with pytest.MonkeyPatch.context() as m:
        for k, v in env.items():
            m.setenv(k, v)
        m.chdir(proj)
        record = store.write_fix({str(proj / "a.py"): ("a = 1\n", "a = 2\n")}, proj, "patch", "")
    assert record.path.is_relative_to(tmp_path / "home" / ".local" / "state" / "torchmend")
    assert sorted(p.name for p in proj.iterdir()) == [".git", "a.py"]
    (proj / "sub").mkdir()
    undone = torchmend("undo", cwd=proj / "sub", env=env)  # from a subfolder: the same journal
    assert undone.returncode == 0 and (proj / "a.py").read_text() == "a = 1\n", undone.stderr


def _read_only_prefix(folder: Path) -> list[str] | None:
    """A command prefix that runs what follows with `folder` mounted read-only (a user and mount namespace, which
    root cannot write through either); None where this machine allows none."""
    if shutil.which("unshare") is None:
        return None
    script = 'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" && shift && exec "$@"'
    prefix = ["unshare", "-rm", "sh", "-c", script, "sh", str(folder)]
    probe = subprocess.run([*prefix, "sh", "-c", f"! touch {folder}/probe"], capture_output=True)
    return prefix if probe.returncode == 0 and not (folder / "probe").exists() else None


def test_undo_with_a_read_only_state_folder_restores_and_the_next_undo_behaves(tmp_path: Path, state: Path) -> None:
    (tmp_path / "a.py").write_text("a = 1\n")
    store.write_fix({str(tmp_path / "a.py"): ("a = 1\n", "a = 2\n")}, tmp_path, "p1", "first")
    store.write_fix({str(tmp_path / "a.py"): ("a = 2\n", "a = 3\n")}, tmp_path, "p2", "second")
    prefix = _read_only_prefix(state)
    if prefix is None:
        pytest.skip("no way to mount the state folder read-only here (unshare)")
    env = dict(os.environ, NO_COLOR="1", COLUMNS="200")
    undo = [sys.executable, "-m", "torchmend", "undo", "--project", str(tmp_path)]

    def run(*cmd: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)

    first = run(*prefix, *undo)
    assert first.returncode == 0 and "Traceback" not in first.stderr, first.stderr
    assert (tmp_path / "a.py").read_text() == "a = 2\n"  # the last fix is undone
    assert "Read-only file system" in first.stderr and "could not record the undo" in " ".join(first.stderr.split())
    second = run(*prefix, *undo)  # still read-only: nothing undone, said plainly, no "edited after the fix"
    said = " ".join(second.stderr.split())
    assert second.returncode == 9 and "Traceback" not in said and "edited after the fix" not in said, said
    assert "is undone already" in said and (tmp_path / "a.py").read_text() == "a = 2\n"
    third = run(*undo)  # writable again: the record is retired, then the fix before it undone
    assert third.returncode == 0 and "undone already" in third.stdout, third.stdout + third.stderr
    assert run(*undo).returncode == 0 and (tmp_path / "a.py").read_text() == "a = 1\n"
    assert store.undo_records(tmp_path) == []


def test_a_fix_or_undo_that_cannot_get_the_project_lock_exits_25(
    tmp_path: Path, state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # In-process (typer's runner): another torchmend holds the lock (a flock of our own, on another descriptor).
    from typer.testing import CliRunner

    from torchmend.cli.main import app

    (tmp_path / "a.py").write_text("a = 1\n")
    store.write_fix({str(tmp_path / "a.py"): ("a = 1\n", "a = 2\n")}, tmp_path, "patch", "")
    monkeypatch.setenv("TORCHMEND_LOCK_WAIT", "0.1")
    with store.project_lock(tmp_path):
        r = CliRunner().invoke(app, ["undo", "--project", str(tmp_path)], env={"COLUMNS": "200", "NO_COLOR": "1"})
    said = " ".join(r.output.split())
    assert r.exit_code == 25 and "nothing was undone: another torchmend is writing or undoing" in said, said
    assert (tmp_path / "a.py").read_text() == "a = 2\n" and len(store.undo_records(tmp_path)) == 1


# Fills the disk its TMPDIR is on after its first step (a cache, say), then prints: the run's output and events
# live there too, so the child can write neither its traceback nor its end record.
FILLER = """import os

import torch

model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)


@torch.compile(backend="aot_eager")
def step(x):
    return model(x).sum()


with torch.no_grad():
    for i in range(4):
        step(torch.randn(8, 4))
        opt.step()
        if i == 0:
            try:
                with open(os.path.join(os.environ["TMPDIR"], "cache.bin"), "wb") as f:
                    while True:
                        f.write(b"0" * 65536)
            except OSError:
                pass
        print("step", i, "x" * 5000)
"""


@pytest.mark.usefixtures("as_a_user_runs")
def test_a_disk_that_fills_during_the_run_is_named(tmp_path: Path, state: Path) -> None:
    proj, full = tmp_path / "proj", tmp_path / "full"
    proj.mkdir()
    full.mkdir()
    (proj / "train.py").write_text(FILLER)
    # A 2 MiB tmpfs as TMPDIR, in a user and mount namespace of its own (no root needed, nothing left mounted).
    mount = [
        "unshare",
        "-rm",
        "sh",
        "-c",
        'mount -t tmpfs -o size=2m tmpfs "$1" && shift && exec "$@"',
        "sh",
        str(full),
    ]
    if shutil.which("unshare") is None or subprocess.run([*mount, "true"], capture_output=True).returncode != 0:
        pytest.skip("no way to mount a small tmpfs here (unshare)")
    env = dict(os.environ, TMPDIR=str(full), NO_COLOR="1", COLUMNS="200")
    r = subprocess.run(
        [*mount, sys.executable, "-m", "torchmend", "scan", "train.py"],
        cwd=proj,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    said = " ".join(r.stderr.split())
    assert r.returncode == 8, r.stdout + r.stderr  # failed after compiling: the report shows what was seen
    assert "exited with status 1 before its end record could be written" in said, said
    assert "is full (No space left on device)" in said and "killed" not in said and "Traceback" not in said
