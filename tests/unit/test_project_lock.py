"""The project lock (issue 31): two writers of one project through the store's write path, raced from two
processes at one instant, never both succeed; the one that loses is refused (the file changed since it was
scanned) and undo restores after every interleaving. Undo whose state folder cannot take the record restores
and says what it could not record; the state folder is always absolute."""

from __future__ import annotations

import multiprocessing
import os
import shutil
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from torchmend import store

TRIALS = 100
BEFORE = "x = 0\n"


def _writer(n: int, target: str, project: str, start, results) -> None:  # type: ignore[no-untyped-def]
    for trial in range(TRIALS):
        try:
            start.wait()
        except threading.BrokenBarrierError:
            return
        try:
            store.write_fix({target: (BEFORE, f"x = {n}{trial}\n")}, Path(project), "patch", f"writer {n}")
            results.put((trial, n, "wrote"))
        except store.WriteRefused as e:
            results.put((trial, n, type(e).__name__))
        try:
            start.wait()  # the parent checks, undoes and resets before the next trial
        except threading.BrokenBarrierError:
            return


@pytest.fixture
def fast_disk(tmp_path: Path) -> Iterator[Path]:
    """A folder in memory where there is one (/dev/shm): each write fsyncs six times, 80 ms a trial on a disk."""
    if not os.access("/dev/shm", os.W_OK):
        yield tmp_path
        return
    folder = Path(tempfile.mkdtemp(prefix="torchmend-test-lock-", dir="/dev/shm"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_two_writers_raced_never_lose_an_update_and_undo_restores(
    fast_disk: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tmp_path = fast_disk
    monkeypatch.setenv("TORCHMEND_STATE_DIR", str(tmp_path / "state"))
    project = tmp_path / "proj"
    project.mkdir()
    target = project / "a.py"
    target.write_text(BEFORE)
    ctx = multiprocessing.get_context("fork")
    start, results = ctx.Barrier(3), ctx.Queue()
    workers = [ctx.Process(target=_writer, args=(n, str(target), str(project), start, results)) for n in (1, 2)]
    for w in workers:
        w.start()
    outcomes = []
    try:
        for trial in range(TRIALS):
            start.wait(timeout=60)  # both writers go at once
            got = sorted(results.get(timeout=60)[1:] for _ in range(2))
            winners = [n for n, what in got if what == "wrote"]
            outcomes.append(tuple(what for _, what in got))
            # Exactly one wrote, and what it wrote is what is on disk; the other was refused, never "wrote".
            assert len(winners) == 1, (trial, got)
            assert target.read_text() == f"x = {winners[0]}{trial}\n"
            [record] = store.undo_records(project)
            assert store.undo(record, project) == ""
            assert target.read_text() == BEFORE and store.undo_records(project) == []
            start.wait(timeout=60)
    finally:
        start.abort()  # a failed trial releases the writers at once
        for w in workers:
            w.join(timeout=30)
            if w.is_alive():
                w.kill()
    assert set(outcomes) <= {("WriteRefused", "wrote"), ("wrote", "WriteRefused")}


def test_a_writer_that_cannot_get_the_lock_is_refused_as_busy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TORCHMEND_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("TORCHMEND_LOCK_WAIT", "0.2")
    (tmp_path / "a.py").write_text(BEFORE)
    caught: list[BaseException] = []

    def write() -> None:
        try:
            store.write_fix({str(tmp_path / "a.py"): (BEFORE, "x = 1\n")}, tmp_path, "", "")
        except store.WriteRefused as e:
            caught.append(e)

    with store.project_lock(tmp_path):  # another torchmend in the middle of its write
        t = threading.Thread(target=write)
        t.start()
        t.join()
    assert len(caught) == 1 and isinstance(caught[0], store.ProjectBusy), caught
    assert "another torchmend is writing or undoing" in str(caught[0])
    assert (tmp_path / "a.py").read_text() == BEFORE and store.undo_records(tmp_path) == []


def test_undo_that_cannot_retire_its_record_restores_and_the_next_one_behaves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TORCHMEND_STATE_DIR", str(tmp_path / "state"))
    (tmp_path / "a.py").write_text("a = 1\n")
    store.write_fix({str(tmp_path / "a.py"): ("a = 1\n", "a = 2\n")}, tmp_path, "p1", "first")
    store.write_fix({str(tmp_path / "a.py"): ("a = 2\n", "a = 3\n")}, tmp_path, "p2", "second")
    real_rename = Path.rename

    def read_only(self: Path, target: object) -> Path:
        if store.state_dir() in self.parents:
            raise OSError(30, "Read-only file system")
        return real_rename(self, target)  # type: ignore[arg-type]

    with monkeypatch.context() as m:
        m.setattr(Path, "rename", read_only)
        last = store.undo_records(tmp_path)[-1]
        why = store.undo(last, tmp_path)
        assert "Read-only file system" in why and (tmp_path / "a.py").read_text() == "a = 2\n"
        [first, second] = store.undo_records(tmp_path)  # the record stays, whole, and is known to be undone
        assert second.summary == "second" and store.undone_already(second) and not store.undone_already(first)
        assert "Read-only file system" in store.retire(second)
    assert store.retire(second) == ""  # writable again: retired; the fix before it is next
    [first] = store.undo_records(tmp_path)
    assert store.undo(first, tmp_path) == "" and (tmp_path / "a.py").read_text() == "a = 1\n"


def test_the_state_folder_is_always_absolute(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("TORCHMEND_STATE_DIR", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_STATE_HOME", "relative/state")  # ignored, as the XDG spec says
    assert store.state_dir() == tmp_path / ".local" / "state" / "torchmend"
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    assert store.state_dir() == tmp_path / "xdg" / "torchmend"
    monkeypatch.setenv("TORCHMEND_STATE_DIR", "here")
    assert store.state_dir() == Path(os.getcwd()) / "here"
