"""The undo folder and what undo says, through the real CLI with `lint --fix` as the writer (it writes with an undo
record, as fix does, and runs no script): a relative $TORCHMEND_STATE_DIR means the folder torchmend started in,
once for the whole run, is said to be inside the project when it is, and undo names where it looked; a read-only
file gets advice in undo's own options; a command that writes nothing leaves no undo folder behind."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest
from conftest import SCAN_FIXTURES, torchmend


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    shutil.copytree(SCAN_FIXTURES / "several", root)
    (root / "sub").mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)  # the project root, from the subfolder too
    return root


def _lint_fix(project: Path, env: dict[str, str], cwd: Path | None = None):
    return torchmend("lint", "train.py", "--fix", "--exit-zero", cwd=cwd or project, env=env)


def test_a_relative_state_dir_is_said_to_be_inside_the_project_and_undo_names_where_it_looked(project: Path):
    env = {"TORCHMEND_STATE_DIR": ".tm-state", "TORCHMEND_CACHE_DIR": str(project.parent / "cache")}
    r = _lint_fix(project, env)
    assert r.returncode == 0 and "Fixed" in r.stdout, r.stdout + r.stderr
    said = " ".join(r.stderr.split())
    assert f"the undo records go inside the project, in {project / '.tm-state'}" in said, said
    assert list((project / ".tm-state" / "undo").iterdir())  # kept where the relative path led from the root

    # From the subfolder the same relative value names another folder: undo says which, and why it sees nothing.
    r = torchmend("undo", cwd=project / "sub", env=env)
    said = " ".join(r.stderr.split())
    assert r.returncode == 11, said
    assert f"looked in {project / 'sub' / '.tm-state' / 'undo'}" in said and "$TORCHMEND_STATE_DIR" in said, said
    assert not (project / "sub" / ".tm-state").exists()  # looking makes nothing
    assert torchmend("undo", cwd=project, env=env).returncode == 0  # from where the fix was made, it is found


def test_the_script_gets_the_state_dir_made_absolute(tmp_path: Path):
    # The script runs in a copy of the folder, elsewhere: a relative value would name another folder there.
    (tmp_path / "show.py").write_text("import os\nprint('STATE=' + os.environ['TORCHMEND_STATE_DIR'])\n")
    r = torchmend("scan", "show.py", "--show-output", cwd=tmp_path, env={"TORCHMEND_STATE_DIR": "rel/state"})
    assert r.returncode == 5, r.stderr  # it compiles nothing
    assert f"STATE={tmp_path / 'rel' / 'state'}" in r.stderr, r.stderr


def test_undo_of_a_read_only_file_advises_undos_own_options(project: Path, tmp_path: Path):
    env = {"TORCHMEND_STATE_DIR": str(tmp_path / "state"), "TORCHMEND_CACHE_DIR": str(tmp_path / "cache")}
    assert "Fixed" in _lint_fix(project, env).stdout
    script = project / "train.py"
    os.chmod(script, stat.S_IRUSR | stat.S_IRGRP)
    try:
        r = torchmend("undo", cwd=project, env=env)
    finally:
        os.chmod(script, stat.S_IRUSR | stat.S_IWUSR)
    said = " ".join(r.stderr.split())
    assert r.returncode == 9, said
    assert "is read-only; make it writable (chmod u+w) and run `torchmend undo` again" in said, said
    assert "--ignore" not in said and ".patch" in said  # undo has no --ignore; the saved patch is the other way


def test_a_run_that_writes_nothing_leaves_no_undo_folder(project: Path, tmp_path: Path):
    state = tmp_path / "state"
    env = {"TORCHMEND_STATE_DIR": str(state), "TORCHMEND_CACHE_DIR": str(tmp_path / "cache")}
    r = torchmend("lint", "train.py", "--fix", "--select", "TM9", cwd=project, env=env)  # nothing of that family
    assert r.returncode == 0, r.stdout + r.stderr
    assert not state.exists() or not any(state.rglob("*")), sorted(state.rglob("*"))
    assert "Fixed" in _lint_fix(project, env).stdout  # one that writes still keeps its record
    assert any((state / "undo").iterdir())
