"""The ground-floor values: one selection and one display, as every stage uses them."""

from __future__ import annotations

import os
from pathlib import Path

from torchmend.cli.printable import printable
from torchmend.values import Root, Selection


def test_root_display_is_relative_inside_and_as_given_outside(tmp_path: Path) -> None:
    root = Root(tmp_path / "proj" / ".." / "proj")  # kept absolute, links not followed
    assert root.path == tmp_path / "proj"
    assert root.display(tmp_path / "proj" / "pkg" / "m.py") == os.path.join("pkg", "m.py")
    assert root.display(str(tmp_path / "elsewhere.py")) == str(tmp_path / "elsewhere.py")
    assert root.display(str(tmp_path / "projection.py")) == str(tmp_path / "projection.py")  # a prefix is not under
    bad = str(tmp_path / "proj" / "bad\udcff.py")  # a name that is not UTF-8, as os.fsdecode gives it
    assert root.display(bad) == "bad\udcff.py" and printable(root.display(bad)) == "bad\\xff.py"


def test_selection_is_one_decision() -> None:
    chosen = Selection.of(["TM1"], ["TM104"])
    assert [c for c in ("TM101", "TM104", "TM201") if chosen.selects(c)] == ["TM101"]
    per_file = Selection(per_file=(("tests/*.py", ("TM1",)),), base=Path("/p"))
    assert not per_file.selects("TM101", "/p/tests/a.py") and per_file.selects("TM101", "/p/src/a.py")
    assert not per_file.ignoring("TM2").selects("TM201")
