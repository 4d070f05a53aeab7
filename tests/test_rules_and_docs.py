"""Rule codes are unique and stable in shape; the README documents every exit code and rule."""

import re

from conftest import ROOT
from torchmend import rules
from torchmend.cli.exitcodes import DESCRIPTIONS, ExitCode


def test_rule_codes_unique_and_in_families():
    codes = [r.code for r in rules.RULES]
    assert len(codes) == len(set(codes))
    names = [r.name for r in rules.RULES]
    assert len(names) == len(set(names))
    for r in rules.RULES:
        assert re.fullmatch(r"TM[129]\d\d", r.code)
        assert r.informational == r.code.startswith("TM9")


def test_select_by_prefix():
    assert rules.select(["TM101", "TM201", "TM901"], ["TM1", "TM2"], ["TM201"]) == ["TM101"]


def test_readme_documents_every_exit_code_and_rule():
    readme = (ROOT / "README.md").read_text()
    for code in ExitCode:
        assert f"| {int(code)} | {DESCRIPTIONS[code]} |" in readme, code
    for r in rules.RULES:
        assert f"| {r.code} |" in readme, r.code


def test_generated_rule_docs_are_current():
    """README's rule table and docs/rules.md come from the codemods' docstrings: regenerate when stale."""
    from torchmend.codemods import docs

    assert docs.readme_with_table((ROOT / "README.md").read_text()) == (ROOT / "README.md").read_text(), \
        "README rule table is stale: run python -m torchmend.codemods.docs"
    assert docs.rules_page() == (ROOT / "docs" / "rules.md").read_text(), \
        "docs/rules.md is stale: run python -m torchmend.codemods.docs"


def test_codemod_docstrings_have_the_headings_in_order():
    from torchmend.codemods.base import HEADINGS
    from torchmend.codemods.registry import codemods

    for cm in codemods():
        assert list(cm.doc_sections()) == list(HEADINGS), type(cm).__name__
        assert all(cm.doc_sections().values()), type(cm).__name__


def test_the_catalogue_names_each_rules_codemod_as_the_registry_does() -> None:
    from torchmend.codemods.registry import by_rule

    assert rules.FIXES == {code: cm.name for code, cm in by_rule().items()}
