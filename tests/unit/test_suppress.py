"""Suppression comments (torchmend/suppress.py): read with tokenize, the lines they cover, what they suppress
with per-file-ignores and select/ignore, unused ones as TM903, and add_ignores()/write_ignores() on real files."""

from __future__ import annotations

from pathlib import Path

import pytest

from torchmend.config import load_config
from torchmend.model import Finding, Kind, Location, Severity, Where
from torchmend.suppress import SCAN_HINT, add_ignores, apply_suppressions, read_comments, write_ignores
from torchmend.values import Root, Selection

SOURCE = """\
import torch


@torch.compile
def step(x):
    print("hi")  # torchmend: ignore[TM101]
    s = "# torchmend: ignore"
    y = torch.stack(
        [x.item()],
    )  # torchmend: ignore[TM104, TM2]
    z = torch.stack(  # torchmend: ignore
        [x.item()],
        [x.item()],
    )
    w = torch.stack(
        [x.item()],  # torchmend: ignore[TM104]
        [x.item()],
    )
    if x.sum() > 0:  # noqa: E501
        y = y + 1
    return y  # torchmend: ignore[TM999]
"""


def finding(path: Path, line: int, rule: str = "TM104", **kw: object) -> Finding:
    fields: dict = dict(
        rule=rule,
        kind=Kind.GRAPH_BREAK,
        title="t",
        file=path.name,
        line=line,
        function="step",
        path=str(path),
        where=Where.PROJECT,
        reason="r",
        count=1,
        severity=Severity.FIX,
    )
    fields.update(kw)
    return Finding(**fields)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / ".git").mkdir()
    (tmp_path / "train.py").write_text(SOURCE)
    return tmp_path


def test_comments_come_from_tokens_and_cover_a_statements_first_and_last_line():
    found = {s.line: s for s in read_comments("x.py", SOURCE).suppressions}
    assert sorted(found) == [6, 10, 11, 16, 21]  # line 7's is inside a string
    assert found[6].codes == ("TM101",) and found[6].covers == {6}
    assert found[10].codes == ("TM104", "TM2") and found[10].covers == {8, 9, 10}  # last line of the statement
    assert found[11].codes is None and found[11].covers == {11, 12, 13, 14}  # first line, bare: every rule
    assert found[16].covers == {16}  # a middle line covers itself only


def test_what_is_suppressed_and_what_is_kept(project: Path):
    path = project / "train.py"
    findings = [
        finding(path, 6, "TM101"),
        finding(path, 7, "TM101"),  # the `#` in the string is no comment
        finding(path, 9),
        finding(path, 12),
        finding(path, 13, "TM103"),
        finding(path, 16),
        finding(path, 17),  # the comment on line 16 is on a middle line: not this one
        finding(path, 19, "TM103"),
    ]
    kept, suppressed, unused = apply_suppressions(findings, Root(project))
    assert [(f.line, f.rule) for f in suppressed] == [
        (6, "TM101"),
        (9, "TM104"),
        (12, "TM104"),
        (13, "TM103"),
        (16, "TM104"),
    ]
    assert [(f.line, f.rule) for f in kept] == [(7, "TM101"), (17, "TM104"), (19, "TM103")]
    # line 10: TM2 suppressed nothing; line 21: TM999 is no rule
    assert [(u.rule, u.line, u.severity, u.kind) for u in unused] == [
        ("TM903", 10, "info", "suppression"),
        ("TM903", 21, "info", "suppression"),
    ]
    assert "(TM2)" in unused[0].reason and "TM999 is no rule code" in unused[1].reason
    assert unused[0].file == "train.py" and "# torchmend: ignore[TM104, TM2]" in unused[0].code


def test_unused_only_for_rules_the_run_could_report(project: Path):
    path = project / "train.py"
    # --select TM1: the TM2 on line 10 could not have been seen; --ignore TM101: line 6's neither
    selected = ["TM1", "TM903"]  # TM903 is a rule too: --select TM1 alone turns it off (below)
    _, _, unused = apply_suppressions(
        [finding(path, 9)], Root(project), Selection.of(selected, ["TM101"]), hint=SCAN_HINT
    )
    assert [u.line for u in unused] == [11, 16, 21]  # the bare one, line 16's TM104, the unknown code
    assert unused[0].reason.endswith(SCAN_HINT + ".") or SCAN_HINT in unused[0].reason
    assert SCAN_HINT not in unused[2].reason  # an unknown code is no hint: it is wrong whatever ran
    assert apply_suppressions([finding(path, 9)], Root(project), Selection.of(["TM1"])).unused == []
    (project / "pyproject.toml").write_text('[tool.torchmend.per-file-ignores]\n"*.py" = ["TM903"]\n')
    assert apply_suppressions([finding(path, 9)], Root(project), load_config(project).resolve().selection).unused == []


def test_select_ignore_and_per_file_ignores(project: Path):
    (project / "pyproject.toml").write_text('[tool.torchmend.per-file-ignores]\n"train.py" = ["TM103"]\n')
    per_file = load_config(project).resolve().selection
    path = project / "train.py"
    findings = [finding(path, 19, "TM103"), finding(path, 17), finding(path, 7, "TM101")]
    kept, suppressed, _ = apply_suppressions(findings, Root(project), per_file.ignoring("TM10"))
    assert kept == [] and len(suppressed) == 3
    kept, suppressed, _ = apply_suppressions(findings, Root(project), per_file)
    assert [f.line for f in kept] == [17, 7] and [f.line for f in suppressed] == [19]


def test_a_library_finding_is_matched_at_the_frame_that_reached_it(project: Path):
    def library(line: int) -> Finding:
        frame = Location(file="train.py", line=line, function="step", path=str(project / "train.py"))
        site = Path("/usr/lib/python3/site-packages/torch/optim/optimizer.py")
        return finding(site, 80, "TM901", where=Where.LIBRARY, user_frame=frame)

    kept, suppressed, _ = apply_suppressions([library(12), library(6)], Root(project))
    assert [f.user_frame.line for f in suppressed] == [12]  # the bare comment of lines 11-14
    assert [f.user_frame.line for f in kept] == [6]  # ignore[TM101] is not TM901


EDITED = {
    # finding line -> (rule, the line as add_ignores leaves it)
    7: ("TM101", '    s = "# torchmend: ignore"  # torchmend: ignore[TM101]'),
    17: ("TM104", "        [x.item()],  # torchmend: ignore[TM104]"),
    19: ("TM103", "    if x.sum() > 0:  # noqa: E501  # torchmend: ignore[TM103]"),
}


def test_add_ignores_writes_what_suppresses_the_rest_and_a_second_run_adds_nothing(project: Path):
    path = project / "train.py"
    findings = [finding(path, line, rule) for line, (rule, _) in EDITED.items()]
    findings += [finding(path, 10, "TM101"), finding(path, 6, "TM101"), finding(path, 12)]  # merged; already; already
    new = add_ignores(findings, Root(project))
    assert list(new) == [str(path)]
    lines = new[str(path)].splitlines()
    for line, (_, text) in EDITED.items():
        assert lines[line - 1] == text
    assert lines[9] == "    )  # torchmend: ignore[TM101, TM104, TM2]"  # merged into the comment there
    assert [n for n, (a, b) in enumerate(zip(SOURCE.splitlines(), lines), 1) if a != b] == [7, 10, 17, 19]
    compile(new[str(path)], str(path), "exec")
    assert write_ignores(findings, Root(project)) == [str(path)]
    assert path.read_text() == new[str(path)]
    assert add_ignores(findings, Root(project)) == {} and write_ignores(findings, Root(project)) == []  # idempotent
    kept, suppressed, _ = apply_suppressions(findings, Root(project))
    assert kept == [] and len(suppressed) == len(findings)


def test_add_ignores_where_a_comment_cannot_end_the_line(tmp_path: Path):
    source = "".join(
        [
            "def f(x):\n",
            '    doc = """text\n',
            '    more""" + str(x.item())\n',
            "    y = x + \\\n",
            "        x.item()\n",
            "    return y\r\n",
        ]
    )
    path = tmp_path / "m.py"
    path.write_bytes(source.encode())
    new = add_ignores([finding(path, 2), finding(path, 4), finding(path, 6, "TM103")], Root(tmp_path))[str(path)]
    assert new.splitlines()[2].endswith('more""" + str(x.item())  # torchmend: ignore[TM104]')  # the string's end
    assert new.splitlines()[4].endswith("x.item()  # torchmend: ignore[TM104]")  # after the backslash's line
    assert "return y  # torchmend: ignore[TM103]\r\n" in new  # the line ending kept
    compile(new, str(path), "exec")
    kept, _, _ = apply_suppressions(
        [finding(path, 2), finding(path, 4), finding(path, 6, "TM103")], Root(tmp_path), texts={str(path): new}
    )
    assert kept == []


def test_add_ignores_never_outside_the_project(tmp_path: Path, project: Path):
    outside = tmp_path.parent / "elsewhere.py"
    assert add_ignores([finding(outside, 1)], Root(project)) == {}
