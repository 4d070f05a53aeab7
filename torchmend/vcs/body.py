"""What a shipped fix says: the report (findings, changes, verification) that `fix` saves with its undo
record, the pull request's title and body, the commit message and the branch name.

Everything that comes from the user's code or from PyTorch's messages (file names, guard strings, reasons,
variable names) is escaped before it goes into Markdown: inline code spans for names and code, escaped
text (no HTML, no links, no @mentions) for prose, fences longer than any backtick run for diffs.
"""

from __future__ import annotations

import difflib
import hashlib
import html
import re
import shlex
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from torchmend import rules
from torchmend.values import Budget

if TYPE_CHECKING:
    from torchmend.codemods.base import Proposal
    from torchmend.model import Finding
    from torchmend.verify.compare import Verification

DIFF_MARKER = "<!-- torchmend:diff -->"  # where the per-file diffs go in a report's Changes section
BODY_LIMIT = 60000  # GitHub refuses bodies over 65536 characters; leave room
GRAPH_BREAK_DOCS = "https://docs.pytorch.org/docs/stable/compile/programming_model.dynamo_core_concepts.html"
RECOMPILE_DOCS = "https://docs.pytorch.org/docs/stable/torch.compiler_troubleshooting.html"

# -- Markdown escaping ---------------------------------------------------------------------------------------

_INLINE = re.compile(r"([\\`*_{}\[\]()#+!|~>-])")
_SAFE_URL = re.compile(r"^https://[A-Za-z0-9.-]+(/[A-Za-z0-9._~/%+-]*)?(#[A-Za-z0-9._-]*)?$")


def one_line(s: str, limit: int = 0) -> str:
    s = " ".join(str(s).split())
    if limit and len(s) > limit:
        s = s[: limit - 1] + "…"
    return s


def md_text(s: str, limit: int = 0) -> str:
    """Plain text, shown as written: no Markdown, no HTML, no autolinked @mentions."""
    s = html.escape(one_line(s, limit), quote=False)  # & < > become entities: no HTML gets through
    s = _INLINE.sub(r"\\\1", s)
    return s.replace("@", "@\u200b")  # a zero-width space after @ stops GitHub from mentioning anyone


def md_code(s: str, table: bool = False, limit: int = 0) -> str:
    """An inline code span holding `s` verbatim (one line); `table`: it sits in a table cell."""
    s = one_line(s, limit)
    if table:
        s = s.replace("|", "\\|")  # GFM splits cells on | even inside code spans; \| shows a |
    longest = max((len(m) for m in re.findall(r"`+", s)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if s.startswith(("`", " ")) or s.endswith(("`", " ")) or not s else ""
    return f"{fence}{pad}{s}{pad}{fence}"


def md_fence(content: str, lang: str = "") -> str:
    longest = max((len(m) for m in re.findall(r"^\s*(`{3,}|~{3,})", content, re.M)), default=0)
    fence = "`" * max(3, longest + 1)
    if not content.endswith("\n"):
        content += "\n"
    return f"{fence}{lang}\n{content}{fence}"


def md_link(label: str, url: str | None) -> str:
    """[label](url) for a plain https URL; else just the escaped label."""
    if url and _SAFE_URL.match(url):
        return f"[{md_text(label)}]({url})"
    return md_text(label)


# -- the report fix saves --------------------------------------------------------------------------------------


def _finding_where(f: Finding) -> str:
    if f.where != "project" and f.user_frame is not None:
        return f"{f.user_frame.file}:{f.user_frame.line}"
    return f"{f.file}:{f.line}"


def _docs(f: Finding) -> str:
    if f.docs_url:
        return md_link(f.gb_id or "PyTorch docs", f.docs_url)
    if f.kind == rules.GRAPH_BREAK:
        return md_link("graph breaks", GRAPH_BREAK_DOCS)
    return md_link("recompilation", RECOMPILE_DOCS)


def fix_report(
    proposals: Sequence[Proposal],
    verification: Verification | None = None,
    command: str = "",
    where: Callable[[Proposal], str] | None = None,
    refused: Sequence[tuple[Proposal, str, str]] = (),
) -> str:
    """The Markdown that `fix` saves with its undo record (field "report") and `pr` puts in the body.

    `refused`: (change, how it was singled out, why) for every change verification refused on the way (its
    next candidate, if any, is among `proposals`).

    `proposals`: the changes written; `verification`: what verified them (None with --no-verify);
    `command`: the command that reproduces the verification; `where(p)`: "file:line" of a change (default:
    its first finding's). The per-file diffs are not in it: `pr` renders them from the record's texts at
    DIFF_MARKER.
    """
    where = where or (lambda p: f"{p.finding.file}:{p.finding.line}")
    lines = [
        "### Findings fixed",
        "",
        "| rule | where | what PyTorch reported | count | docs |",
        "|---|---|---|---|---|",
    ]
    seen: set[tuple[str, str, int]] = set()
    for p in proposals:
        for f in p.findings:
            if (f.rule, f.file, f.line) in seen:
                continue
            seen.add((f.rule, f.file, f.line))
            reason = f.reason + (f" (variable {f.variable})" if f.variable and f.variable not in f.reason else "")
            kind = f"{f.pattern} " if f.pattern else ""
            lines.append(
                f"| **{f.rule}** {md_text(f.title)} | {md_code(_finding_where(f), table=True)} | "
                f"{md_code(reason, table=True, limit=400)} | {kind}{f.count}× | {_docs(f)} |"
            )
    lines += ["", "### Changes", ""]
    for p in proposals:
        label = {"unsafe": "**unsafe**", "random-stream": "**random stream changed**"}.get(p.safety, "safe")
        lines.append(f"- **{p.rule}** at {md_code(where(p))} ({label}): {md_text(p.why)}")
        if p.note:
            lines.append(f"  - {md_text(p.note)}")
    lines += ["", DIFF_MARKER, ""]
    stream = [p for p in proposals if p.safety == "random-stream"]
    if stream:
        lines += [
            "### Changes of the random stream",
            "",
            "> [!WARNING]",
            f"> {len(stream)} change{'s' * (len(stream) != 1)} keep the distribution of the outputs but change the "
            "random stream (applied with --allow-random-stream): losses are equal in distribution over seeds, not "
            "bit for bit; the verification below compares several seeds per arm.",
            ">",
        ]
        lines += [f"> - **{p.rule}** at {md_code(where(p))}: {md_text(p.note or p.why)}" for p in stream]
        lines.append("")
    unsafe = [p for p in proposals if p.safety == "unsafe"]
    lines += ["### Unsafe changes", ""]
    if unsafe:
        lines += [
            "> [!WARNING]",
            f"> {len(unsafe)} of {len(proposals)} change{'s' * (len(proposals) != 1)} "
            "can change what the program prints or computes (the verification below checks losses and "
            "final weights, not printed output). Review each:",
            ">",
        ]
        lines += [f"> - **{p.rule}** at {md_code(where(p))}: {md_text(p.note or p.why)}" for p in unsafe]
    else:
        lines.append(
            "None: every change is labelled safe (it cannot change what the program prints, raises or "
            "computes beyond float rounding)."
        )
    lines += ["", "### Verification", ""]
    if verification is not None:
        from torchmend.verify.report import markdown

        lines.append(markdown(verification, command).rstrip("\n"))
        if refused:
            lines += ["", "Tried and refused (not written):", ""]
            lines += [
                f"- **{p.rule}** at {md_code(where(p))} ({md_text(how)}): {md_text(why)}" for p, how, why in refused
            ]
    else:
        lines.append("Not verified before writing (`torchmend fix --no-verify`).")
        if command:
            lines += ["", "Verify with:", "", md_fence(command)]
    return "\n".join(lines) + "\n"


def verify_command(
    script: str,
    args: Sequence[str] = (),
    *,
    patch: str = "torchmend.patch",
    budget: Budget = Budget(),
    backend: str | None = None,
    seed: int = 0,
    repeat: int | None = None,
    launcher: Sequence[str] = (),
) -> str:
    """The `torchmend verify` command line that reproduces a verification (for fix_report's `command`);
    `launcher`: the torchrun options of a multi-rank run."""
    cmd = ["torchmend", "verify", "--patch", patch] if launcher else ["torchmend", "verify", script, "--patch", patch]
    flags = (("--steps", budget.steps), ("--timeout", budget.timeout), ("--backend", backend), ("--repeat", repeat))
    for flag, value in flags:
        if value is not None:
            cmd += [flag, str(value)]
    if seed:
        cmd += ["--seed", str(seed)]
    if launcher:
        cmd += ["--", "torchrun", *launcher, script, *args]
    elif args:
        cmd += ["--", *args]
    return shlex.join(cmd)


# -- the commit, the branch, the pull request ------------------------------------------------------------------


def fixes_of(summary: str) -> list[tuple[str, str]]:
    """(rule, where) for each fix in an undo record's summary ("TM101 train.py:14; TM201 model.py:30")."""
    out = []
    for item in (s.strip() for s in summary.split("; ")):
        rule, _, place = item.partition(" ")
        if rule:
            out.append((rule, place.strip()))
    return out


def _rule_title(code: str) -> str:
    rule = rules.BY_CODE.get(code)
    return rule.title if rule else ""


def _files_phrase(paths: Sequence[str]) -> str:
    return paths[0] if len(paths) == 1 else f"{len(paths)} files"


def title(summary: str, paths: Sequence[str]) -> str:
    codes = sorted({r for r, _ in fixes_of(summary)})
    what = ", ".join(codes[:4]) + (f" and {len(codes) - 4} more" if len(codes) > 4 else "")
    text = f"torchmend: fix {what or 'torch.compile problems'} in {_files_phrase(paths)}"
    return one_line(text, 200)


def commit_message(summary: str, paths: Sequence[str]) -> str:
    fixes = fixes_of(summary)
    lines = [
        title(summary, paths),
        "",
        "Rewritten by `torchmend fix` to remove what stops torch.compile from paying off",
        "(graph breaks, recompilations):",
        "",
    ]
    if fixes:
        lines += [f"- {rule} {place}: {_rule_title(rule)}".rstrip(": ") for rule, place in fixes]
    else:
        lines += [f"- {p}" for p in paths]
    return "\n".join(lines) + "\n"


def branch_name(summary: str, files: Mapping[str, str | bytes]) -> str:
    """torchmend/<rules>-<first file's stem>-<hash of the changed texts>: the same fix gets the same branch."""
    codes = sorted({r.lower() for r, _ in fixes_of(summary) if re.fullmatch(r"TM\d{3}", r)})
    parts = codes[:3] + (["more"] if len(codes) > 3 else [])
    first = sorted(files)[0] if files else "fix"
    stem = re.sub(r"[^a-z0-9]+", "-", first.rsplit("/", 1)[-1].rsplit(".", 1)[0].lower()).strip("-")[:24]
    digest = hashlib.sha256()
    for path in sorted(files):
        data = files[path]
        digest.update(path.encode() + b"\0" + (data if isinstance(data, bytes) else data.encode()) + b"\0")
    slug = "-".join([*parts, stem or "fix", digest.hexdigest()[:7]])
    return f"torchmend/{slug}"


def unified_diff(path: str, before: str, after: str) -> str:
    a, b = before.splitlines(keepends=True), after.splitlines(keepends=True)
    out = []
    for line in difflib.unified_diff(a, b, f"a/{path}", f"b/{path}", n=3):
        out.append(line)
        if not line.endswith("\n"):
            out.append("\n\\ No newline at end of file\n")
    return "".join(out)


def diff_section(diffs: Mapping[str, str], limit: int = BODY_LIMIT) -> str:
    """Each changed file with its diff; a file whose diff would not fit is named and left out."""
    parts, used = [], 0
    for path, diff in diffs.items():
        block = f"#### {md_code(path)}\n\n{md_fence(diff, 'diff')}\n"
        if used + len(block) > limit:
            block = (
                f"#### {md_code(path)}\n\nThe diff ({diff.count(chr(10))} lines) is left out: the body would be "
                "longer than GitHub accepts. See the Files changed tab.\n"
            )
        parts.append(block)
        used += len(block)
    return "\n".join(parts)


def pr_body(
    *, report: str | None, summary: str, diffs: Mapping[str, str], branch: str, base: str, base_commit: str
) -> str:
    """The pull request's Markdown: what torchmend found and changed, the diffs, the verification."""
    n = len(fixes_of(summary))
    head = [
        "<!-- torchmend pr: this description is rewritten when `torchmend pr` runs again -->",
        "## torch.compile fixes from torchmend",
        "",
        f"`torchmend fix` found what stops `torch.compile` from paying off in this code and rewrote the "
        f"source behind it: {n or 'the'} change{'s' * (n != 1)} in {len(diffs)} file{'s' * (len(diffs) != 1)}. "
        f"Branch {md_code(branch)} is {md_code(base)} at {md_code(base_commit[:12])} plus one commit "
        "with these changes only.",
        "",
    ]
    foot = [
        "",
        "---",
        "",
        "To check it yourself: fetch this branch, save its diff as a patch ("
        + md_code(f"git diff {base}...{branch} > torchmend.patch")
        + ") and run `torchmend verify SCRIPT --patch torchmend.patch` on the base branch. Made with torchmend.",
    ]
    room = BODY_LIMIT - sum(len(x) + 1 for x in head + foot) - len(report or "") - 2000
    diff_md = "### Diff\n\n" + diff_section(diffs, max(room, 0))
    if report:
        body = report.replace(DIFF_MARKER, diff_md) if DIFF_MARKER in report else report.rstrip("\n") + "\n\n" + diff_md
    else:
        fixes = fixes_of(summary)
        listed = [f"- **{md_text(r)}** at {md_code(w)}: {md_text(_rule_title(r))}" for r, w in fixes]
        body = "\n".join(
            [
                "### Fixes",
                "",
                *listed,
                "",
                "> [!NOTE]",
                "> This fix was saved without a report (by an older torchmend): the findings behind it, "
                "which changes are unsafe and the verification are not known here. Review every change, "
                "and verify the patch with `torchmend verify SCRIPT --patch PATCH`.",
                "",
                diff_md,
            ]
        )
    text = "\n".join(head) + "\n" + body.rstrip("\n") + "\n" + "\n".join(foot) + "\n"
    if len(text) > BODY_LIMIT + 5000:
        text = text[:BODY_LIMIT] + "\n\n… (cut: the description would be longer than GitHub accepts)\n"
    return text
