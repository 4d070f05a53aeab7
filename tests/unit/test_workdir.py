"""profiler/workdir.py: the folders a run may write to, snapshotted and put back (issue 39, item 3), on a real
folder; the "run" is a real child process that changes it."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from torchmend.profiler.workdir import Caps, Change, Why, run_folders, snapshot


def _run(folder: Path, code: str) -> None:
    """What a training script would do to its working folder, in a child process of its own."""
    subprocess.run([sys.executable, "-c", code], cwd=folder, check=True)


def _state(folder: Path) -> dict[str, tuple[str, bytes | str, int, int]]:
    """Every entry under the folder: kind, content (a link's target), mode, mtime_ns."""
    out: dict[str, tuple[str, bytes | str, int, int]] = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in dirnames + filenames:
            p = Path(dirpath, name)
            st = p.lstat()
            rel = str(p.relative_to(folder))
            if p.is_symlink():
                out[rel] = ("link", os.readlink(p), st.st_mode, st.st_mtime_ns)
            elif p.is_dir():
                out[rel] = ("dir", b"", st.st_mode, st.st_mtime_ns)
            else:
                out[rel] = ("file", p.read_bytes(), st.st_mode, st.st_mtime_ns)
    return out


def _project(tmp_path: Path) -> Path:
    proj = tmp_path / "proj"
    (proj / "data").mkdir(parents=True)
    (proj / "train.py").write_text("print('hi')\n")
    (proj / "ckpt.pt").write_bytes(b"\x00weights" * 100)
    (proj / "data" / "train.csv").write_text("a,b\n1,2\n")
    (proj / "big.bin").write_bytes(b"x" * 5000)
    (proj / "gone").mkdir()
    (proj / "gone" / "inside.txt").write_text("in a folder the run removes\n")
    os.symlink("data/train.csv", proj / "latest")
    os.chmod(proj / "train.py", 0o750)
    for i, p in enumerate(sorted(proj.rglob("*"))):  # times in the past, so a rewrite within the second shows
        os.utime(p, ns=(1_000_000_000 * (1000 + i), 1_000_000_000 * (2000 + i)), follow_symlinks=False)
    os.utime(proj, ns=(1_000_000_000, 2_000_000_000))
    return proj


RUN = """
import os, shutil
open("ckpt.pt", "wb").write(b"trained")                 # changed in place (same inode)
with open("data/train.csv.tmp", "w") as f: f.write("x")  # changed by an atomic rename (another inode)
os.replace("data/train.csv.tmp", "data/train.csv")
os.remove("train.py")                                    # deleted
os.chmod("big.bin", 0o600)                               # too large to copy: only said
open("big.bin", "ab").write(b"more")
os.makedirs("runs/2024/logs")                            # a nested folder, created
open("runs/2024/logs/events.out", "w").write("log")
open("new.txt", "w").write("created")
shutil.rmtree("gone")                                    # a folder removed with its file
os.remove("latest"); os.symlink("elsewhere", "latest")   # a link pointed elsewhere
os.makedirs("__pycache__"); open("__pycache__/m.pyc", "w").write("")  # not looked at
os.makedirs(".cache"); open(".cache/x", "w").write("")                 # nor is a folder named with a dot
"""


def test_a_run_is_undone_but_for_what_is_over_the_caps(tmp_path: Path) -> None:
    proj = _project(tmp_path)
    before = _state(proj)
    snap = snapshot([proj], caps=Caps(per_file=4096))
    assert [(u.path.name, u.why, u.limit) for u in snap.unprotected] == [("big.bin", Why.TOO_LARGE, 4096)]
    _run(proj, RUN)
    left = snap.restore()
    after = _state(proj)
    assert [(u.path, u.change, u.why) for u in left] == [(proj / "big.bin", Change.CHANGED, Why.TOO_LARGE)]
    assert left[0].describe() == (
        f"the run changed {proj / 'big.bin'}, which was too large to restore (5000 bytes; copies are kept up to "
        "4096 bytes)"
    )
    assert after.pop("big.bin")[1] == b"x" * 5000 + b"more"
    before.pop("big.bin")
    assert after.pop("__pycache__")[0] == "dir" and after.pop("__pycache__/m.pyc")
    assert after.pop(".cache")[0] == "dir" and after.pop(".cache/x")
    assert after == before  # contents, links, modes, mtimes of files and folders (the top one too: below)
    assert proj.stat().st_mtime_ns == 2_000_000_000
    assert snap.restore() == left  # once; the copies are gone
    assert snap.copies is None


def test_copies_on_disk_and_the_caps_on_total_and_count(tmp_path: Path) -> None:
    proj = tmp_path / "proj"
    proj.mkdir()
    for name, size in (("a", 3 << 20), ("b", 10), ("c", 100), ("d", 10)):  # a: over the in-memory size: on disk
        (proj / name).write_bytes(name.encode() * size)
    snap = snapshot([proj], caps=Caps(total=(3 << 20) + 50, files=2))
    assert snap.copies is not None and snap.copies.is_dir()
    assert {(u.path.name, u.why) for u in snap.unprotected} == {("c", Why.OVER_TOTAL), ("d", Why.TOO_MANY)}
    _run(proj, "import os\nfor n in 'abcd': os.remove(n)")
    left = snap.restore()
    assert {(u.path.name, u.change, u.why) for u in left} == {
        ("c", Change.DELETED, Why.OVER_TOTAL),
        ("d", Change.DELETED, Why.TOO_MANY),
    }
    assert (proj / "a").read_bytes() == b"a" * (3 << 20) and (proj / "b").read_bytes() == b"b" * 10
    assert not (proj / "c").exists() and snap.copies is None


def test_a_link_put_in_a_folders_place_is_not_written_through(tmp_path: Path) -> None:
    proj, outside = tmp_path / "proj", tmp_path / "outside"
    (proj / "sub").mkdir(parents=True)
    outside.mkdir()
    (proj / "sub" / "f.txt").write_text("mine")
    snap = snapshot([proj])
    _run(proj, f"import shutil, os\nshutil.rmtree('sub')\nos.symlink({str(outside)!r}, 'sub')")
    assert snap.restore() == ()
    assert not (proj / "sub").is_symlink() and (proj / "sub" / "f.txt").read_text() == "mine"
    assert list(outside.iterdir()) == []


def test_a_folder_too_big_to_list_is_said_and_nothing_in_it_removed(tmp_path: Path) -> None:
    proj = tmp_path / "proj"
    (proj / "many").mkdir(parents=True)
    for i in range(5):
        (proj / "many" / str(i)).write_text("")
    snap = snapshot([proj], caps=Caps(entries=4))
    assert [(u.path.name, u.why) for u in snap.unprotected] == [("many", Why.NOT_LISTED)]
    _run(proj, "open('many/new', 'w').write('')")
    left = snap.restore()
    assert [(u.path.name, u.change, u.why) for u in left] == [("many", Change.UNKNOWN, Why.NOT_LISTED)]
    assert (proj / "many" / "new").exists()  # not known to be the run's: left
    assert "more than 4 entries" in left[0].describe()


def test_a_created_folder_holding_what_is_not_looked_at_stays(tmp_path: Path) -> None:
    proj = tmp_path / "proj"
    proj.mkdir()
    snap = snapshot([proj])
    _run(proj, "import os\nos.makedirs('pkg/__pycache__')\nopen('pkg/m.py', 'w').write('')")
    left = snap.restore()
    assert [(u.path.name, u.change, u.why, u.detail) for u in left] == [
        ("pkg", Change.CREATED, Why.NOT_EMPTY, "__pycache__")
    ]
    assert sorted(p.name for p in (proj / "pkg").iterdir()) == ["__pycache__"]


def test_the_folders_of_a_run(tmp_path: Path) -> None:
    proj = tmp_path / "proj"
    (proj / "src").mkdir(parents=True)
    script = proj / "src" / "train.py"
    assert run_folders(proj, script) == (proj.resolve(),)  # the script's folder is inside the working folder
    # A script's folder in the temp directory is not the run's unless it is the working folder (or inside it),
    # even when it holds the working folder.
    assert str(proj.resolve()).startswith(os.path.realpath(tempfile.gettempdir()))
    assert run_folders(proj / "src", proj / "train.py") == ((proj / "src").resolve(),)
    here = Path(__file__).resolve().parent
    assert run_folders(here, script) == (here,)
    assert run_folders(here, here.parent / "conftest.py") == (here.parent,)  # outside it: the folder holding both
    docs = Path(__file__).parents[2] / "docs"
    assert run_folders(here, docs / "DESIGN.md") == (here, docs)  # neither inside the other: both


def test_excluded_folders_are_not_looked_at(tmp_path: Path) -> None:
    proj = tmp_path / "proj"
    (proj / "events").mkdir(parents=True)
    snap = snapshot([proj], exclude=[proj / "events"])
    _run(proj, "open('events/e.jsonl', 'w').write('{}')")
    assert snap.restore() == ()
    assert (proj / "events" / "e.jsonl").exists()


def test_a_file_this_process_writes_and_the_temp_directory_itself_are_left_alone(tmp_path: Path) -> None:
    proj = tmp_path / "proj"
    proj.mkdir()
    with open(proj / "fix.log", "a") as log:  # `torchmend fix train.py > fix.log`: torchmend's own output
        log.write("scan\n")
        log.flush()
        snap = snapshot([proj])
        log.write("verify\n")
        log.flush()
        assert snap.restore() == ()
    assert (proj / "fix.log").read_text() == "scan\nverify\n"
    tmp = Path(tempfile.gettempdir()).resolve()
    shared = snapshot([tmp])  # other processes' files: not walked, not put back
    assert [(u.path, u.why) for u in shared.unprotected] == [(tmp, Why.SHARED)]
    left = shared.restore()
    assert [(u.path, u.change, u.why) for u in left] == [(tmp, Change.UNKNOWN, Why.SHARED)]
    assert "shared with other processes" in left[0].describe()
