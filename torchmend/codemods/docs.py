"""The rule documentation, generated from torchmend/rules.py and the codemods' docstrings, so it cannot drift.

    python -m torchmend.codemods.docs          # rewrite the README's rule table and docs/rules.md
    python -m torchmend.codemods.docs --check  # exit 1 when either is stale (what the tests check)
"""

from __future__ import annotations

import sys
from pathlib import Path

from torchmend import rules
from torchmend.codemods.base import HEADINGS, Codemod
from torchmend.codemods.registry import by_rule

ROOT = Path(__file__).resolve().parents[2]
START, END = "<!-- rules:start (generated: python -m torchmend.codemods.docs) -->", "<!-- rules:end -->"


def _first_sentence(text: str) -> str:
    """Up to the first `.` or `:` that ends a clause outside parentheses ("Unsafe: ..." gives "Unsafe")."""
    flat = " ".join(text.split())
    depth = 0
    for i, ch in enumerate(flat):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if ch in ".:" and depth == 0 and (i + 1 == len(flat) or flat[i + 1] == " "):
            return flat[:i]
    return flat


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def rule_table() -> str:
    fixes = by_rule()
    lines = ["| code | kind | name | title | fix | fix safety |", "|---|---|---|---|---|---|"]
    for r in rules.RULES:
        cm = fixes.get(r.code)
        if cm is not None:
            fix = f"`{cm.name}`"
            safety = _first_sentence(cm.doc_sections().get("Fix safety", ""))
        else:
            fix, safety = ("— (informational)" if r.informational else "— (reported with advice)"), ""
        lines.append(f"| {r.code} | {r.kind} | {r.name} | {_cell(r.title)} | {fix} | {_cell(safety)} |")
    return "\n".join(lines) + "\n"


def _codemod_section(cm: Codemod) -> str:
    sections = cm.doc_sections()
    out = [f"## `{cm.name}` — {', '.join(cm.rules)}", ""]
    for head in HEADINGS:
        body = sections.get(head, "").strip()
        if head in ("Example", "Fix"):
            out += [f"**{head}**", "", "```python", body, "```", ""]
        else:
            out += [f"**{head}.** {' '.join(body.split())}", ""]
    return "\n".join(out)


def rules_page() -> str:
    seen: list[Codemod] = []
    for cm in by_rule().values():
        if cm not in seen:
            seen.append(cm)
    head = ["# Rules and their fixes", "",
            "Generated from `torchmend/rules.py` and the codemods' docstrings by "
            "`python -m torchmend.codemods.docs`; a test fails when this page is stale.", "",
            rule_table()]
    return "\n".join(head) + "\n" + "\n".join(_codemod_section(cm) for cm in sorted(seen, key=lambda c: c.rules))


def readme_with_table(readme: str) -> str:
    if START not in readme or END not in readme:
        raise ValueError(f"README.md lacks the markers {START} ... {END}")
    before, rest = readme.split(START, 1)
    _, after = rest.split(END, 1)
    return f"{before}{START}\n{rule_table()}{END}{after}"


def main(argv: list[str]) -> int:
    readme_path, page_path = ROOT / "README.md", ROOT / "docs" / "rules.md"
    readme = readme_path.read_text()
    want = {readme_path: readme_with_table(readme), page_path: rules_page()}
    stale = [p for p, text in want.items() if not p.exists() or p.read_text() != text]
    if "--check" in argv:
        for p in stale:
            print(f"stale: {p.relative_to(ROOT)} (run python -m torchmend.codemods.docs)")
        return 1 if stale else 0
    for p in stale:
        p.write_text(want[p])
        print(f"wrote {p.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
