"""profiler/sandbox.py on a real folder: small files copied, large ones and a VCS's folder linked, links kept as
links, the copy removed without touching what it linked to; folders that are not copied (home, /)."""

from __future__ import annotations

import os
from pathlib import Path

from torchmend.profiler import sandbox


def test_a_copy_of_the_working_folder_that_the_run_may_write(tmp_path: Path) -> None:
    work = tmp_path / "proj"
    (work / "data").mkdir(parents=True)
    (work / ".git").mkdir()
    (work / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (work / "train.py").write_text("print('hi')\n")
    (work / "data" / "small.txt").write_text("abc")
    (work / "data" / "big.bin").write_bytes(b"x" * 2048)
    (work / "ckpt.pt").write_bytes(b"original")
    os.symlink("train.py", work / "alias.py")
    box = sandbox.make(work, sandbox.Caps(per_file=1024))
    assert box is not None and box.cwd.name == "proj" and box.copied == 3
    assert sorted(box.linked) == [".git/", "data/big.bin"]
    assert (box.cwd / "data" / "small.txt").read_text() == "abc" and not (box.cwd / "data" / "small.txt").is_symlink()
    assert (box.cwd / "data" / "big.bin").resolve() == (work / "data" / "big.bin").resolve()
    assert os.readlink(box.cwd / "alias.py") == "train.py"
    # what a run writes in its copy never reaches the folder
    (box.cwd / "ckpt.pt").write_bytes(b"patched run's")
    (box.cwd / "new.txt").write_text("made by the run")
    assert (work / "ckpt.pt").read_bytes() == b"original" and not (work / "new.txt").exists()
    box.remove()
    assert not box.root.exists()
    assert (work / ".git" / "HEAD").exists() and (work / "data" / "big.bin").stat().st_size == 2048


def test_caps_link_what_is_over_them(tmp_path: Path) -> None:
    work = tmp_path / "w"
    work.mkdir()
    for i in range(5):
        (work / f"f{i}.txt").write_text("12345")
    box = sandbox.make(work, sandbox.Caps(total=12, files=10))
    assert box is not None and box.copied == 2 and len(box.linked) == 3
    box.remove()


def test_the_home_folder_or_the_root_is_not_copied() -> None:
    assert sandbox.make(Path.home()) is None
    assert sandbox.make(Path("/")) is None
