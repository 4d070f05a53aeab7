"""store: write_all is all or nothing (a failure while replacing the second file puts the first one back); undo
records round-trip, old ones still load, and a live write is never taken for an interrupted one. The faults
(signals, SIGKILL, encodings, damaged records) are in tests/e2e/test_faults.py."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from torchmend import sources, store
from torchmend.store import journal


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "a.py").write_text("a = 1\n")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "b.py").write_text("b = 1\n")
    return tmp_path


def _changes(project: Path) -> dict[str, tuple[str, str]]:
    return {str(project / "a.py"): ("a = 1\n", "a = 2\n"), str(project / "pkg" / "b.py"): ("b = 1\n", "b = 2\n")}


def test_writes_every_file(project: Path) -> None:
    store.write_all(_changes(project), project)
    assert (project / "a.py").read_text() == "a = 2\n"
    assert (project / "pkg" / "b.py").read_text() == "b = 2\n"


def test_failure_on_the_second_file_puts_the_first_back(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_replace = os.replace
    target = os.path.realpath(project / "pkg" / "b.py")

    def failing_replace(src: str, dst: str) -> None:
        if dst == target:
            raise OSError(28, "No space left on device")
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(store.WriteRefused, match=r"b\.py failed \(No space left on device\); nothing was changed"):
        store.write_all(_changes(project), project)
    assert (project / "a.py").read_text() == "a = 1\n"  # written, then put back
    assert (project / "pkg" / "b.py").read_text() == "b = 1\n"
    assert not [p for p in project.rglob("*") if p.name.endswith(".torchmend")]  # no temporary file left


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_a_directory_made_read_only_after_the_check_rolls_back(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The checks pass; then (as if another process did it) pkg/ becomes read-only before b.py is replaced.
    real_replace = os.replace
    pkg = project / "pkg"

    def replace_then_lock(src: str, dst: str) -> None:
        real_replace(src, dst)
        pkg.chmod(stat.S_IRUSR | stat.S_IXUSR)

    monkeypatch.setattr(os, "replace", replace_then_lock)
    try:
        with pytest.raises(store.WriteRefused, match="nothing was changed"):
            store.write_all(_changes(project), project)
    finally:
        pkg.chmod(0o755)
    assert (project / "a.py").read_text() == "a = 1\n"
    assert (pkg / "b.py").read_text() == "b = 1\n"


def test_a_stale_file_refuses_before_anything_is_written(project: Path) -> None:
    (project / "pkg" / "b.py").write_text("b = 3\n")  # edited after the scan
    with pytest.raises(store.WriteRefused, match="changed since it was scanned"):
        store.write_all(_changes(project), project)
    assert (project / "a.py").read_text() == "a = 1\n"


def test_undo_record_round_trip(project: Path, monkeypatch: pytest.MonkeyPatch, tmp_path_factory) -> None:
    monkeypatch.setenv("TORCHMEND_STATE_DIR", str(tmp_path_factory.mktemp("state")))
    changes = _changes(project)
    store.write_all(changes, project)
    record = store.save_undo(changes, project, "the patch", "TM101 a.py:1", report="# report")
    [loaded] = store.undo_records(project)
    assert (loaded.files, loaded.summary, loaded.report) == (changes, "TM101 a.py:1", "# report")
    assert record.patch.read_text() == "the patch"
    store.undo(loaded, project)
    assert (project / "a.py").read_text() == "a = 1\n"
    assert store.undo_records(project) == []


def test_a_record_from_before_the_journal_still_loads_and_undoes(
    project: Path, monkeypatch: pytest.MonkeyPatch, tmp_path_factory
) -> None:
    # Records written by earlier versions have no "state", "encoding" or "bom": complete, UTF-8, no BOM.
    monkeypatch.setenv("TORCHMEND_STATE_DIR", str(tmp_path_factory.mktemp("state")))
    folder = store.undo_dir(project)
    folder.mkdir(parents=True)
    (project / "a.py").write_text("a = 2\n")
    old = {
        "project": str(project.resolve()),
        "created": "2026-01-01 00:00:00",
        "summary": "TM101 a.py:1",
        "files": {str(project / "a.py"): {"before": "a = 1\n", "after": "a = 2\n"}},
    }
    (folder / "20260101-000000-000.json").write_text(json.dumps(old))
    [record] = store.undo_records(project)
    assert record.complete and record.encoding(str(project / "a.py")) == sources.Encoding("utf-8", False)
    store.undo(record, project)
    assert (project / "a.py").read_text() == "a = 1\n"


def test_a_pending_record_held_by_a_live_writer_is_not_taken_for_an_interrupted_one(
    project: Path, monkeypatch: pytest.MonkeyPatch, tmp_path_factory
) -> None:
    monkeypatch.setenv("TORCHMEND_STATE_DIR", str(tmp_path_factory.mktemp("state")))
    seen: list[store.Records] = []
    real = journal.replace_all

    def look_while_writing(data):  # another process running `undo` now must not roll this write back
        seen.append(store.records(project))
        real(data)

    monkeypatch.setattr(journal, "replace_all", look_while_writing)
    store.write_fix(_changes(project), project, "patch", "")
    assert seen[0].incomplete == [] and seen[0].complete == []
    assert [r.complete for r in store.undo_records(project)] == [True]
