"""Generate the documentation that must not drift from the code, or check that it has not.

    .venv/bin/python scripts/gen_docs.py           # rewrite what is stale
    .venv/bin/python scripts/gen_docs.py --check   # exit 1 and name each stale file (tests/unit/test_rules_and_docs.py)

What it writes, and from what:

- docs/rules/README.md, the rule index, and docs/rules/TMxxx.md, one page per rule in torchmend/rules/. A rule
  that a codemod fixes is documented by the codemod's class docstring (its five headings) and its tested
  INVALID/VALID examples (the Example is an INVALID source, the Fix what the codemod turns it into, followed by
  any paragraph of words in the docstring's Fix); any other rule by its `Rule.doc`, which has the same five
  headings.
- docs/exit-codes.md, from torchmend/cli/exitcodes.py.

`--root DIR` writes or checks the files under DIR instead of this checkout (the tests use a scratch copy).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # document this checkout's torchmend, whatever the interpreter has installed

from torchmend import rules  # noqa: E402
from torchmend.cli.exitcodes import DESCRIPTIONS, ExitCode  # noqa: E402
from torchmend.codemods.base import Codemod  # noqa: E402
from torchmend.codemods.registry import by_cause, by_gb_id, by_rule, last_resorts  # noqa: E402

COMMAND = "python scripts/gen_docs.py"
KIND_WORDS = {
    rules.GRAPH_BREAK: "graph break",
    rules.RECOMPILE: "recompile",
    rules.RECOMPILE_LIMIT: "recompile limit",
    rules.SCRIPT_FAILURE: "script failure",
    rules.SUPPRESSION: "suppression comment",
    rules.SOURCE: "source (lint)",
}
TESTED_BY = "tests/unit/test_codemod_examples.py"

# The comments that write findings into example sources (torchmend/codemods/examples.py). On a page a finding
# is shown as `# TM101` on its line; the call-site and compiled-function marks say nothing to a reader.
_FINDING_MARK = re.compile(r"#\s*tm:\s*(?P<rule>TM\d{3})[^#]*")
_OTHER_MARK = re.compile(r"#\s*tm-(?:call-site|compiled)\b[^#]*")


# --- text helpers -------------------------------------------------------------------------------------------------


def first_sentence(text: str) -> str:
    """Up to the first `.` or `:` that ends a clause outside parentheses ("Unsafe: ..." gives "Unsafe")."""
    flat = " ".join(text.split())
    depth = 0
    for i, ch in enumerate(flat):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if ch in ".:" and depth == 0 and (i + 1 == len(flat) or flat[i + 1] == " "):
            return flat[:i]
    return flat


def cell(text: str) -> str:
    return text.replace("|", "\\|")


def code_block(code: str) -> str:
    return f"```python\n{code.rstrip()}\n```"


def prose(text: str) -> str:
    """A section's text as Markdown: a paragraph becomes one line; a block indented four spaces is code (blank
    lines inside it included)."""
    blocks: list[tuple[bool, list[str]]] = []  # (is code, lines)
    for para in re.split(r"\n[ \t]*\n", text.strip("\n")):
        lines = para.splitlines()
        is_code = all(line.startswith("    ") for line in lines)
        if is_code and blocks and blocks[-1][0]:
            blocks[-1][1].extend(["", *lines])
        else:
            blocks.append((is_code, lines))
    return "\n\n".join(
        code_block("\n".join(line[4:] for line in lines)) if is_code else " ".join(" ".join(lines).split())
        for is_code, lines in blocks
    )


def shown(code: str, keep_findings: bool) -> str:
    """An example source as a page shows it: `# tm: TM101 ...` becomes `# TM101` (or goes), other marks go."""
    out = []
    for line in code.rstrip().splitlines():
        new = _OTHER_MARK.sub("", line)
        new = _FINDING_MARK.sub(lambda m: f"# {m['rule']}" if keep_findings else "", new).rstrip()
        if new.endswith("#"):
            new = new[:-1].rstrip()
        if new or not line.strip():
            out.append(new)
    return "\n".join(out)


# --- the rule pages -----------------------------------------------------------------------------------------------


def fix_cell(rule: rules.Rule, cm: Codemod | None) -> tuple[str, str]:
    """(fix, safety) as the index shows them."""
    if cm is not None:
        return f"`{cm.name}`", first_sentence(cm.doc_sections().get("Fix safety", ""))
    return ("none (informational)" if rule.informational else "none (reported with advice)"), ""


def _prose_paragraphs(text: str) -> list[str]:
    """The paragraphs of a codemod docstring's Fix that are words, not code (the code there is an untested sketch:
    the page shows the tested example instead)."""
    out = []
    for para in re.split(r"\n[ \t]*\n", text.strip()):
        as_body = "def _():\n" + "\n".join("    " + line for line in para.splitlines())  # `return` is code too
        try:
            compile(as_body, "<Fix>", "exec")
        except SyntaxError:
            out.append(" ".join(para.split()))
    return out


def _cause_note(rule: rules.Rule, cm: Codemod | None) -> str:
    """Which codemod takes a finding of this rule when it has a cause (registry.codemod_for_finding)."""
    notes = []
    for cause, other in sorted(by_cause().items()):
        if rule.code == "TM250" and other is not cm:
            notes.append(
                f"When the guard that kept failing is a [{cause}]({cause}.md) guard (the finding's "
                f"`cause`), `fix` proposes `{other.name}`, that rule's fix, instead."
            )
        if rule.code == cause:
            notes.append(
                f"`{other.name}` also takes a recompile-limit finding ([TM250](TM250.md)) whose failing "
                f"guard is a {cause} guard (the finding's `cause`)."
            )
    return "\n\n".join(notes)


def rule_page(rule: rules.Rule) -> str:
    cm = by_rule().get(rule.code)
    sections = cm.doc_sections() if cm is not None else rules.doc_sections(rule.doc)
    fix, safety = fix_cell(rule, cm)
    facts = [
        f"kind: {KIND_WORDS[rule.kind]}",
        f"fix: {fix}" + (f" ({safety[:1].lower()}{safety[1:]})" if safety else ""),
    ]
    source = (
        f"the docstring of codemod `{cm.name}` and its examples, tested by {TESTED_BY}"
        if cm is not None
        else "`Rule.doc` in torchmend/rules/docs.py"
    )
    edit = "those" if cm is not None else "that"
    out = [
        f"# {rule.code}: {rule.name}",
        "",
        f"**{rule.title}**" + (" (informational)" if rule.informational else ""),
        "",
        " · ".join(facts) + " · [all rules](README.md)",
        "",
        f"<!-- generated by {COMMAND} from {source}; edit {edit}, not this page -->",
        "",
        "## What it does",
        "",
        prose(sections.get("What it does", "")),
        "",
        "## Why is this bad?",
        "",
        prose(sections.get("Why is this bad", "")),
        "",
    ]
    if cm is not None and cm.INVALID:
        first = cm.INVALID[0]
        out += [
            "## Example",
            "",
            code_block(shown(first.code, keep_findings=True)),
            "",
            "## Fix",
            "",
            f"`torchmend fix` proposes (codemod `{cm.name}`):",
            "",
            code_block(shown(first.expected, keep_findings=False)),
            "",
        ]
        out += [f"{para}\n" for para in _prose_paragraphs(sections.get("Fix", ""))]
    else:
        out += [
            "## Example",
            "",
            code_block(sections.get("Example", "")),
            "",
            "## Fix",
            "",
            prose(sections.get("Fix", "")),
            "",
        ]
    note = _cause_note(rule, cm)
    if note:
        out += [note, ""]
    out += ["## Fix safety", "", prose(sections.get("Fix safety", "")), ""]
    if cm is None and rule.code == "TM199":  # the catch-all: shapes fixed by their graph-break id
        for gb, other in sorted(by_gb_id().items()):
            parts = other.doc_sections()
            out += [
                f"## {gb}: fixed by `{other.name}`",
                "",
                prose(parts.get("What it does", "")),
                "",
                prose(parts.get("Why is this bad", "")),
                "",
                code_block(parts.get("Example", "")),
                "",
                "becomes",
                "",
                code_block(parts.get("Fix", "")),
                "",
                prose(parts.get("Fix safety", "")),
                "",
            ]
    if cm is not None and (len(cm.INVALID) > 1 or cm.VALID):
        out += [
            "## More examples",
            "",
            f"Each one is checked by {TESTED_BY}; `# {rule.code}` marks the line a finding names.",
            "",
        ]
        for i, ex in enumerate(cm.INVALID[1:], 2):
            out += [
                f"### Rewritten ({i})",
                "",
                code_block(shown(ex.code, keep_findings=True)),
                "",
                "becomes",
                "",
                code_block(shown(ex.expected, keep_findings=False)),
                "",
            ]
        for i, valid in enumerate(cm.VALID, 1):
            out += [f"### Left alone ({i})", "", code_block(shown(valid.code, keep_findings=True)), ""]
    return "\n".join(out).rstrip() + "\n"


def last_resort_page(cm: Codemod) -> str:
    """The page of a fix that is no rule's own (Codemod.last_resort), from its docstring and tested examples."""
    sections = cm.doc_sections()
    safety = first_sentence(sections.get("Fix safety", ""))
    out = [
        f"# `{cm.name}`: a last resort for any rule",
        "",
        f"fix: `{cm.name}` ({safety[:1].lower()}{safety[1:]}) · asked when a finding's own rule has no fix, and tried "
        "after a source fix verification refused · [all rules](README.md)",
        "",
        f"<!-- generated by {COMMAND} from the docstring of codemod `{cm.name}` and its examples, tested by "
        f"{TESTED_BY}; edit those, not this page -->",
        "",
        "## What it does",
        "",
        prose(sections.get("What it does", "")),
        "",
        "## Why is this bad?",
        "",
        prose(sections.get("Why is this bad", "")),
        "",
        "## Example",
        "",
        code_block(shown(cm.INVALID[0].code, keep_findings=True)),
        "",
        "## Fix",
        "",
        f"`torchmend fix` proposes (codemod `{cm.name}`):",
        "",
        code_block(shown(cm.INVALID[0].expected, keep_findings=False)),
        "",
        *[f"{para}\n" for para in _prose_paragraphs(sections.get("Fix", ""))],
        "## Fix safety",
        "",
        prose(sections.get("Fix safety", "")),
        "",
    ]
    for i, valid in enumerate(cm.VALID, 1):
        out += [f"### Left alone ({i})", "", code_block(shown(valid.code, keep_findings=True)), ""]
    return "\n".join(out).rstrip() + "\n"


def rule_table(link_prefix: str) -> str:
    lines = ["| code | name | title | kind | fix | fix safety |", "|---|---|---|---|---|---|"]
    for r in rules.RULES:
        fix, safety = fix_cell(r, by_rule().get(r.code))
        lines.append(
            f"| [{r.code}]({link_prefix}{r.code}.md) | {r.name} | {cell(r.title)} | {KIND_WORDS[r.kind]} "
            f"| {fix} | {cell(safety)} |"
        )
    return "\n".join(lines) + "\n"


def rules_index() -> str:
    fixed = sum(1 for r in rules.RULES if r.code in by_rule())
    return f"""# Rules

<!-- generated by {COMMAND} from torchmend/rules/ and the codemods; edit those, not this page -->

Every finding of `torchmend scan` has one of these codes: **TM1xx** graph breaks, **TM2xx** recompilations,
**TM9xx** informational (nothing to change in your code). `fix --select` and `--ignore` take code prefixes
(`--select TM1 --ignore TM104`); `torchmend rules` lists the codes and their fixes in the terminal. {fixed} of
the {len(rules.RULES)} rules have a codemod; `torchmend fix` reports the others with advice and changes nothing.

A *safe* fix cannot change what the program prints, raises or computes (beyond the last bit of float
rounding); an *unsafe* one can (a silenced print, both branches of a `torch.where` evaluated, a tensor where
code elsewhere may expect a float) and its page says how, so `fix --yes` leaves it out unless `--unsafe-fixes` is
given. The codemods are strict: most are labelled unsafe because of a case they cannot rule out from the
source; the verifying re-run (same seed and steps, before and after) is the final gate.

Severity: graph breaks and repeated recompiles are `fix`. A recompile is labelled `once` when it happened once
(severity `note`, unless it happened on some ranks only: see [distributed.md](../distributed.md)), `storm` when
it repeated (said as a count, "repeated 2×", below 4 times, and as "a recompile storm" from 4 times on: half of
torch's default recompile limit), `limit` when it repeated until the recompile limit. Informational rules have severity `info`.
`scan --fail-on-findings` counts only severity `fix`.

{rule_table("")}
Fixes that are no rule's own, asked when a finding's rule has no fix (and tried after a source fix that
verification refused):

{last_resort_table()}"""


def last_resort_table() -> str:
    lines = ["| fix | for | fix safety |", "|---|---|---|"]
    for cm in last_resorts():
        what = first_sentence(cm.doc_sections().get("What it does", ""))
        lines.append(
            f"| [`{cm.name}`]({cm.name}.md) | {cell(what)} | {cell(first_sentence(cm.doc_sections()['Fix safety']))} |"
        )
    return "\n".join(lines) + "\n"


# --- exit codes ------------------------------------------------------------------------------


def exit_codes_page() -> str:
    lines = [
        "# Exit codes",
        "",
        f"<!-- generated by {COMMAND} from torchmend/cli/exitcodes.py; edit that, not this page -->",
        "",
        "Every `torchmend` command exits with one of these codes (`torchmend.cli.exitcodes.ExitCode`).",
        "",
        "| code | meaning | name |",
        "|---|---|---|",
    ]
    lines += [f"| {int(code)} | {cell(DESCRIPTIONS[code])} | `{code.name}` |" for code in ExitCode]
    return "\n".join(lines) + "\n"


# --- main ---------------------------------------------------------------------------------------------------------


def wanted(root: Path) -> dict[Path, str]:
    """Every generated file under root, with the text it should have."""
    want = {root / "docs" / "rules" / "README.md": rules_index(), root / "docs" / "exit-codes.md": exit_codes_page()}
    want.update({root / "docs" / "rules" / f"{r.code}.md": rule_page(r) for r in rules.RULES})
    want.update({root / "docs" / "rules" / f"{cm.name}.md": last_resort_page(cm) for cm in last_resorts()})
    return want


def leftovers(root: Path, want: dict[Path, str]) -> list[Path]:
    """Pages of rules that no longer exist."""
    return sorted(p for p in (root / "docs" / "rules").glob("TM*.md") if p not in want)


def main(argv: list[str]) -> int:
    root = Path(argv[argv.index("--root") + 1]).resolve() if "--root" in argv else ROOT
    want = wanted(root)
    stale = [p for p, text in want.items() if not p.exists() or p.read_text() != text]
    extra = leftovers(root, want)
    if "--check" in argv:
        for p in stale:
            print(f"stale: {p.relative_to(root)} (run {COMMAND})")
        for p in extra:
            print(f"stale: {p.relative_to(root)} documents no rule (run {COMMAND} to remove it)")
        return 1 if stale or extra else 0
    for p in stale:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(want[p])
        print(f"wrote {p.relative_to(root)}")
    for p in extra:
        p.unlink()
        print(f"removed {p.relative_to(root)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
