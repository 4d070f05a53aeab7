"""Rule codes are unique and stable in shape; every rule is documented under the five headings; the generated
docs (docs/rules/, docs/exit-codes.md) are current; the command pages document every option."""

import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

from torchmend import rules
from torchmend.cli.exitcodes import DESCRIPTIONS, ExitCode

GEN = ROOT / "scripts" / "gen_docs.py"


def test_rule_codes_unique_and_in_families():
    codes = [r.code for r in rules.RULES]
    assert len(codes) == len(set(codes))
    names = [r.name for r in rules.RULES]
    assert len(names) == len(set(names))
    for r in rules.RULES:
        assert re.fullmatch(r"TM[129]\d\d", r.code)
        assert r.informational == r.code.startswith("TM9")


def test_select_by_prefix():
    from torchmend.values import Selection

    chosen = Selection.of(["TM1", "TM2"], ["TM201"])
    assert [c for c in ["TM101", "TM201", "TM901"] if chosen.selects(c)] == ["TM101"]
    assert Selection.of([], None).selects("TM901") and Selection().selects("TM101")  # nothing selected: every rule


def test_codemod_docstrings_have_the_headings_in_order():
    from torchmend.codemods.registry import codemods

    for cm in codemods():
        assert list(cm.doc_sections()) == list(rules.HEADINGS), type(cm).__name__
        assert all(cm.doc_sections().values()), type(cm).__name__


def test_every_rule_is_documented_once_under_the_five_headings():
    """A rule is documented by its codemod's docstring or by its own `doc`, never both (one source of truth)."""
    from torchmend.codemods.registry import by_rule

    for r in rules.RULES:
        if r.code in by_rule():
            assert not r.doc, f"{r.code} has a codemod: its docstring documents it, not Rule.doc"
            continue
        sections = rules.doc_sections(r.doc)
        assert list(sections) == list(rules.HEADINGS), r.code
        assert all(sections.values()), r.code


def test_doc_sections_reads_the_shared_shape():
    doc = """
    Summary line, dropped.

    What it does:
        Finds a thing.
        On two lines.
    Why is this bad:
        Slow.
    Example:
        if x:
            Fix: not a heading (indented)
    Fix:
        By hand.
    Fix safety:
        None.
    """
    s = rules.doc_sections(doc)
    assert list(s) == list(rules.HEADINGS)
    assert s["What it does"] == "Finds a thing.\nOn two lines."
    assert s["Example"] == "if x:\n    Fix: not a heading (indented)"


def test_the_catalogue_names_each_rules_codemod_as_the_registry_does() -> None:
    from torchmend.codemods.registry import by_rule

    assert rules.FIXES == {code: cm.name for code, cm in by_rule().items()}


def _gen(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(GEN), *args], capture_output=True, text=True, timeout=120)


def test_generated_docs_are_current():
    """docs/rules/ and docs/exit-codes.md: run scripts/gen_docs.py when this fails."""
    proc = _gen("--check")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_check_names_a_stale_or_leftover_file(tmp_path: Path):
    assert _gen("--root", str(tmp_path)).returncode == 0
    assert _gen("--check", "--root", str(tmp_path)).returncode == 0
    page = tmp_path / "docs" / "rules" / "TM101.md"
    page.write_text(page.read_text().replace("print", "p r i n t"))
    (tmp_path / "docs" / "rules" / "TM998.md").write_text("# a rule that is gone\n")
    proc = _gen("--check", "--root", str(tmp_path))
    assert proc.returncode == 1
    assert "stale: docs/rules/TM101.md" in proc.stdout and "docs/rules/TM998.md" in proc.stdout
    assert _gen("--root", str(tmp_path)).returncode == 0  # rewrites the page, removes the leftover
    assert not (tmp_path / "docs" / "rules" / "TM998.md").exists()
    assert _gen("--check", "--root", str(tmp_path)).returncode == 0


def test_every_rule_and_exit_code_has_its_line():
    index = (ROOT / "docs" / "rules" / "README.md").read_text()
    for r in rules.RULES:
        assert f"| [{r.code}]({r.code}.md) | {r.name} |" in index, r.code
        assert (ROOT / "docs" / "rules" / f"{r.code}.md").exists(), r.code
    exit_codes = (ROOT / "docs" / "exit-codes.md").read_text()
    for code in ExitCode:
        assert f"| {int(code)} | {DESCRIPTIONS[code]} |" in exit_codes, code


def test_rule_pages_show_the_tested_examples():
    """A codemod's page shows its first INVALID example before and after, without the test's marker comments."""
    from torchmend.codemods.registry import by_rule

    for code, cm in by_rule().items():
        page = (ROOT / "docs" / "rules" / f"{code}.md").read_text()
        for head in ("## What it does", "## Why is this bad?", "## Example", "## Fix", "## Fix safety"):
            assert head in page, (code, head)
        assert "# tm:" not in page and "tm-call-site" not in page and "tm-compiled" not in page, code
        example = page.split("## Example", 1)[1].split("## Fix", 1)[0]
        marked = next(line for line in cm.INVALID[0].code.splitlines() if "# tm:" in line)
        assert marked.split("#")[0].rstrip() in example and f"# {code}" in example, code


COMMANDS = ["example", "scan", "fix", "verify", "undo", "pr", "rules", "config"]


@pytest.mark.parametrize("name", COMMANDS)
def test_command_page_names_every_option(name: str):
    """docs/commands/<command>.md documents every option the command's --help shows."""
    import typer

    from torchmend.cli.main import app

    command = typer.main.get_command(app).commands[name]  # type: ignore[attr-defined]
    page = (ROOT / "docs" / "commands" / f"{name}.md").read_text()
    for param in command.params:
        for opt in param.opts:
            if opt.startswith("-") and opt not in ("--help", "-h"):
                assert f"`{opt}" in page, f"docs/commands/{name}.md does not document {opt}"


def test_readme_is_a_landing_page_whose_links_resolve():
    """The README stays short (the rest lives in docs/), and every relative link in it and in docs/ leads somewhere."""
    readme = ROOT / "README.md"
    assert len(readme.read_bytes()) <= 10 * 1024
    for page in [readme, *sorted((ROOT / "docs").glob("*.md"))]:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
            if "://" not in target:
                assert (page.parent / target).exists(), f"{page.relative_to(ROOT)} links to {target}"
