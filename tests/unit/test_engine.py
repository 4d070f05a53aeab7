"""The engine and the review loop on hand-made proposals: conflicts, merging, previews, the review keys.

No codemod and no torch: proposals are built directly on the parsed file's nodes, as codemods build them.
"""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest

from torchmend.analysis.source import Context
from torchmend.codemods.base import NoFix, Proposal
from torchmend.codemods.engine import Conflict, Session
from torchmend.codemods.review import ACCEPTED, CONFLICT, NOT_REVIEWED, REJECTED, accept_all, review
from torchmend.model import Finding, Kind, Location, Severity, Where

SOURCE = "a = 1\nb = 2\nprint(a, b)\n"


def finding(path: Path, line: int, rule: str = "TM101") -> Finding:
    return Finding(
        rule=rule,
        kind=Kind.GRAPH_BREAK,
        title="t",
        file=path.name,
        line=line,
        function="<module>",
        path=str(path),
        where=Where.PROJECT,
        reason="r",
        count=1,
        severity=Severity.FIX,
    )


@pytest.fixture
def project(tmp_path: Path) -> tuple[Session, Path, Path]:
    one, two = tmp_path / "one.py", tmp_path / "two.py"
    one.write_text(SOURCE)
    two.write_text(SOURCE)
    return Session(Context(str(tmp_path), lambda p: Path(p).read_text())), one, two


def stmt(session: Session, path: Path, line: int) -> cst.SimpleStatementLine:
    node = session.ctx.file(str(path)).statement_at(line)
    assert isinstance(node, cst.SimpleStatementLine)
    return node


def replace_line(session: Session, path: Path, line: int, code: str, rule: str = "TM101") -> Proposal:
    node = stmt(session, path, line)
    return Proposal(
        findings=(finding(path, line, rule),),
        rule=rule,
        path=str(path),
        why="w",
        replace={node: cst.parse_statement(code)},
    )


def insert_before(session: Session, path: Path, line: int, code: str) -> Proposal:
    node = stmt(session, path, line)
    return Proposal(
        findings=(finding(path, line),),
        rule="TM101",
        path=str(path),
        why="w",
        insert_before={node: [cst.parse_statement(code)]},
    )


def replace_value(session: Session, path: Path, line: int, code: str) -> Proposal:
    """A replacement inside the statement at `line` (its assigned value): a descendant of the statement."""
    assign = stmt(session, path, line).body[0]
    assert isinstance(assign, cst.Assign)
    return Proposal(
        findings=(finding(path, line),),
        rule="TM202",
        path=str(path),
        why="w",
        replace={assign.value: cst.parse_expression(code)},
    )


def test_preview_is_what_gets_written(project):
    session, one, _ = project
    p, q = replace_line(session, one, 1, "a = 10"), replace_line(session, one, 2, "b = 20")
    session.accept(p)
    before, after = session.preview(q)
    assert before == "a = 10\nb = 2\nprint(a, b)\n"
    assert after == "a = 10\nb = 20\nprint(a, b)\n"
    session.accept(q)
    assert session.changed() == {str(one): (SOURCE, after)}


def test_a_replacement_inside_an_accepted_one_conflicts(project):
    session, one, two = project
    session.accept(replace_line(session, one, 1, "a = 10"))
    inner = replace_value(session, one, 1, "11")
    assert "overlaps the accepted fix for TM101 at line 1" in session.conflict(inner)
    with pytest.raises(Conflict):
        session.preview(inner)
    with pytest.raises(Conflict):
        session.accept(inner)
    # the same edit in another file is no conflict
    assert session.conflict(replace_value(session, two, 1, "11")) == ""


def test_insertions_beside_one_statement_do_not_conflict_but_replacing_it_does(project):
    session, one, _ = project
    session.accept(insert_before(session, one, 3, "x = 0"))
    assert session.conflict(insert_before(session, one, 3, "y = 0")) == ""
    assert session.conflict(replace_line(session, one, 3, "pass")) != ""
    session.accept(insert_before(session, one, 3, "y = 0"))
    assert session.text(str(one)) == "a = 1\nb = 2\nx = 0\ny = 0\nprint(a, b)\n"


def test_proposals_with_the_same_text_are_merged_into_one_with_both_findings(project):
    session, one, _ = project
    p = replace_line(session, one, 1, "a = 10", rule="TM202")
    q = replace_line(session, one, 1, "a = 10", rule="TM202")
    r = replace_line(session, one, 2, "b = 20", rule="TM202")
    merged = session._merge([p, q, r])
    assert len(merged) == 2
    assert isinstance(merged[0], Proposal) and len(merged[0].findings) == 2
    assert merged[1] is r


def test_nothing_changed_when_nothing_accepted(project):
    session, one, _ = project
    assert session.changed() == {}
    assert session.text(str(one)) == SOURCE


def _drive(session: Session, proposals: list[Proposal], keys: str) -> tuple[list[int], list[str]]:
    """Run the review loop answering with `keys`; returns the indices asked about and the outcomes."""
    loop = review(session, proposals)
    asked = []
    answers = iter(keys)
    try:
        ask = next(loop)
        while True:
            asked.append(ask.index)
            ask = loop.send(next(answers))
    except StopIteration as done:
        return asked, [d.outcome for d in done.value]


def four(session: Session, one: Path, two: Path) -> list[Proposal]:
    return [
        replace_line(session, one, 1, "a = 10"),
        replace_line(session, one, 2, "b = 20"),
        replace_line(session, two, 1, "a = 30"),
        replace_line(session, two, 2, "b = 40"),
    ]


def test_review_y_and_n(project):
    session, one, two = project
    asked, outcomes = _drive(session, four(session, one, two), "ynny")
    assert asked == [1, 2, 3, 4]
    assert outcomes == [ACCEPTED, REJECTED, REJECTED, ACCEPTED]
    assert session.text(str(one)) == "a = 10\nb = 2\nprint(a, b)\n"


def test_review_a_takes_the_rest_of_the_file_and_d_skips_it(project):
    session, one, two = project
    asked, outcomes = _drive(session, four(session, one, two), "ad")
    assert asked == [1, 3]  # the second change of each file is not asked about
    assert outcomes == [ACCEPTED, ACCEPTED, REJECTED, REJECTED]


def test_review_a_still_asks_about_a_change_of_the_random_stream(project):
    from dataclasses import replace as with_

    session, one, two = project
    changes = four(session, one, two)
    changes[1] = with_(changes[1], safety="random-stream")
    asked, outcomes = _drive(session, changes, "annn")
    assert asked == [1, 2, 3, 4]  # "a" on the first change of `one` does not take the random-stream one unseen
    assert outcomes == [ACCEPTED, REJECTED, REJECTED, REJECTED]


def test_review_q_keeps_what_was_accepted(project):
    session, one, two = project
    asked, outcomes = _drive(session, four(session, one, two), "yq")
    assert asked == [1, 2]
    assert outcomes == [ACCEPTED, NOT_REVIEWED, NOT_REVIEWED, NOT_REVIEWED]
    assert list(session.changed()) == [str(one)]


def test_review_skips_a_conflicting_proposal_without_asking(project):
    session, one, _ = project
    proposals = [replace_line(session, one, 1, "a = 10"), replace_value(session, one, 1, "11")]
    asked, outcomes = _drive(session, proposals, "y")
    assert asked == [1]
    assert outcomes == [ACCEPTED, CONFLICT]


def test_review_refuses_an_unknown_key(project):
    session, one, two = project
    loop = review(session, four(session, one, two))
    next(loop)
    with pytest.raises(ValueError):
        loop.send("x")


def test_accept_all_leaves_unsafe_changes_out_unless_asked(project):
    session, one, two = project
    safe = replace_line(session, one, 1, "a = 10")
    unsafe = Proposal(
        findings=safe.findings,
        rule="TM103",
        path=str(one),
        why="w",
        safety="unsafe",
        replace={stmt(session, one, 2): cst.parse_statement("b = 20")},
    )
    outcomes = [d.outcome for d in accept_all(session, [safe, unsafe], unsafe=False)]
    assert outcomes == [ACCEPTED, REJECTED]
    session2 = Session(session.ctx)
    assert [d.outcome for d in accept_all(session2, [safe, unsafe], unsafe=True)] == [ACCEPTED, ACCEPTED]


def test_a_library_print_or_log_is_never_looked_up_in_your_file(tmp_path: Path) -> None:
    """A library finding's line is the library's: the gate fixes say where it is instead of reading that line
    in the user's file (or in the library) and reporting 'no logging call at line N'."""
    library = tmp_path / "site-packages" / "lib" / "mod.py"
    library.parent.mkdir(parents=True)
    library.write_text("import logging\n" + "\n" * 40 + "logging.warning('deprecated')\n")
    train = tmp_path / "proj" / "train.py"
    train.parent.mkdir()
    train.write_text("import lib.mod\n")
    session = Session(Context(str(train.parent), lambda p: Path(p).read_text()))
    for rule in ("TM101", "TM102"):
        f = Finding(
            rule=rule,
            kind=Kind.GRAPH_BREAK,
            title="t",
            file=str(library),
            line=42,
            function="f",
            path=str(library),
            where=Where.LIBRARY,
            reason="r",
            count=1,
            severity=Severity.FIX,
            user_frame=Location(file="train.py", line=1, function="<module>", path=str(train)),
        )
        (result,) = session.propose([f])
        assert isinstance(result, NoFix)
        assert "inside a library" in result.reason and f"{library}:42" in result.reason, result.reason
        assert "reorderable_logging_functions" in result.advice
