"""fixtures/codemods/<rule>/<case>.in.py → <case>.out.py: one parametrised test finds every pair.

Findings are marked in the sources with `# tm:` comments (torchmend/codemods/examples.py). A no-op case
has an .out.py equal to its .in.py. Every .out.py, fixed again, stays as it is (idempotent).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from torchmend.codemods.examples import fix_text, proposals

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "codemods"
CASES = sorted(FIXTURES.glob("*/*.in.py"))


@pytest.mark.parametrize("case", CASES, ids=[f"{c.parent.name}/{c.name[:-6]}" for c in CASES])
def test_fixture_pair(case: Path) -> None:
    expected_path = case.with_name(case.name[:-6] + ".out.py")
    assert expected_path.exists(), f"missing {expected_path.name}"
    source, expected = case.read_text(), expected_path.read_text()
    text, results = fix_text(source, name=case.name)
    assert text == expected
    if source == expected:
        assert not proposals(results), "a no-op case must propose nothing"
    again, results = fix_text(expected, name=expected_path.name)
    assert not proposals(results) and again == expected, "fixing the output again must change nothing"


def test_every_rule_folder_is_a_rule() -> None:
    from torchmend import rules

    for folder in FIXTURES.iterdir():
        assert folder.name in rules.BY_CODE, folder
