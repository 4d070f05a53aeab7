"""Findings as a SARIF 2.1.0 log (OASIS, errata01), the format GitHub code scanning and most CI dashboards read.

One run; `tool.driver` names torchmend and lists every rule of torchmend/rules/ with its documentation page. Each
result has the rule, a level, the message annotation.py writes, one physical location (a path relative to the
project root, `%SRCROOT%`, with line and column), a fingerprint that survives the code moving, the finding's own
data under `properties`, and, where a codemod proposes a change, that change as a SARIF `fix`. docs/formats.md
describes the mapping; tests/unit/test_formats_sarif.py validates the output against the published schema.
"""

from __future__ import annotations

import difflib
import hashlib
import os
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from torchmend import __version__, rules
from torchmend.cli.formats.annotation import Lines, Place, TextFix, fix_for, in_order, message, split_lines
from torchmend.cli.printable import printable_data
from torchmend.model import Finding, Kind

SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
# The project's public home and its rule pages (docs/rules/TMxxx.md). One place to change when it moves.
HOMEPAGE = "https://github.com/torchmend/torchmend"
RULE_DOCS = HOMEPAGE + "/blob/main/docs/rules/{code}.md"
SRCROOT = "%SRCROOT%"
FINGERPRINT = "torchmendFinding/v1"


def level(f: Finding) -> str:
    """fix → warning (it costs time, it is not a bug), or error when compiling broke the script itself; a one-time
    note and informational findings → note."""
    if f.severity != "fix":
        return "note"
    return "error" if f.kind == Kind.SCRIPT_FAILURE else "warning"


def _rule_level(rule: rules.Rule) -> str:
    if rule.informational:
        return "note"
    return "error" if rule.kind == Kind.SCRIPT_FAILURE else "warning"


def rule_descriptor(rule: rules.Rule) -> dict[str, Any]:
    """A SARIF reportingDescriptor for one rule: name, title, what to do, and its documentation page."""
    fix = rules.FIXES.get(rule.code)
    doing = (
        f"`torchmend fix` rewrites it with the `{fix}` codemod."
        if fix
        else ("Informational: nothing to change in your code." if rule.informational else rule.advice)
    )
    what = rules.doc_sections(rule.doc).get("What it does", "")
    url = RULE_DOCS.format(code=rule.code)
    text = "\n\n".join(p for p in (rule.title, what, doing, f"Documentation: {url}") if p)
    return {
        "id": rule.code,
        "name": rule.name,
        "shortDescription": {"text": rule.title},
        "fullDescription": {"text": " ".join(what.split()) or rule.title},
        "helpUri": url,
        "help": {"text": text, "markdown": text.replace(f"Documentation: {url}", f"[Documentation]({url})")},
        "defaultConfiguration": {"level": _rule_level(rule)},
        "properties": {"tags": ["torch.compile", "performance", str(rule.kind)]},
    }


def _uri(file: str) -> str:
    """A relative URI of the name's bytes (os.fsencode: a name that is not valid UTF-8 is percent-encoded as it is
    on disk, `bad%FF.py`)."""
    return quote(os.fsencode(file), safe="/")


def _location(where: Place) -> dict[str, Any]:
    artifact: dict[str, Any] = {"uri": _uri(where.file)}
    if where.in_project:
        artifact["uriBaseId"] = SRCROOT
    elif os.path.isabs(where.path):  # a library's file: a file URI, which code scanning cannot show (not the project's)
        artifact["uri"] = Path(where.path).as_uri()
    else:  # code with no file (`<string>`, generated at run time): its name, as a relative reference
        artifact["uri"] = _uri(where.path)
    region = {"startLine": where.line, "startColumn": where.column}
    return {"physicalLocation": {"artifactLocation": artifact, "region": region}}


def _fingerprint(f: Finding, where: Place, lines: Lines, seen: Counter[str]) -> str:
    """Stable while the code moves: the rule, the file, the function and the line's text, not its number (what
    GitHub's primaryLocationLineHash also does); the n-th same one in a file is told apart by n."""
    text = " ".join((lines.line(where.path, where.line) or f.code).split())
    key = "\0".join((f.rule, where.file, f.function, text))
    digest = hashlib.sha256(key.encode("utf-8", "surrogateescape")).hexdigest()[:32]  # a name's raw bytes too
    seen[digest] += 1
    return f"{digest}:{seen[digest]}"


def _properties(f: Finding) -> dict[str, Any]:
    props: dict[str, Any] = {"kind": str(f.kind), "severity": str(f.severity), "function": f.function}
    confidence = f.confidence  # lint's static findings
    if confidence is None:
        props["count"] = f.count
    else:
        props["confidence"] = confidence
    for key, value in (
        ("pattern", f.pattern),
        ("variable", f.variable),
        ("guard", f.guard),
        ("gbId", f.gb_id),
        ("gbType", f.gb_type),
        ("cause", f.cause),
    ):
        if value is not None:
            props[key] = str(value)
    if f.ranks is not None:
        props["ranks"] = {str(r): n for r, n in sorted(f.ranks.items())}
        props["divergent"] = f.divergent
    if f.where != "project":
        props["libraryLocation"] = f"{f.path}:{f.line}"
    return props


def replacements(before: str, after: str) -> list[dict[str, Any]]:
    """The edit from `before` to `after` as SARIF replacements of whole lines: each deletes the lines from the start
    of one to the start of another (an empty region inserts) and puts the new lines there."""
    old, new = split_lines(before), split_lines(after)
    out: list[dict[str, Any]] = []
    matcher = difflib.SequenceMatcher(a=old, b=new, autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            continue
        end_line, end_column = i2 + 1, 1
        if i2 == len(old) and old and not old[-1].endswith(("\n", "\r")):  # the last line has no newline to end at
            end_line, end_column = i2, len(old[-1]) + 1
        replacement: dict[str, Any] = {
            "deletedRegion": {"startLine": i1 + 1, "startColumn": 1, "endLine": end_line, "endColumn": end_column}
        }
        if j2 > j1:
            replacement["insertedContent"] = {"text": "".join(new[j1:j2])}
        out.append(replacement)
    return out


def _fix(fix: TextFix, root: str) -> dict[str, Any]:
    file = os.path.relpath(os.path.realpath(fix.path), root)
    return {
        "description": {"text": f"{fix.description} ({fix.safety})"},
        "artifactChanges": [
            {
                "artifactLocation": {"uri": _uri(Path(file).as_posix()), "uriBaseId": SRCROOT},
                "replacements": replacements(fix.before, fix.after),
            }
        ],
        "properties": {"safety": fix.safety},
    }


def to_sarif(
    findings: Iterable[Finding],
    root: Path | str,
    fixes: Sequence[TextFix] = (),
    *,
    tool_version: str = __version__,
    run_properties: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A SARIF 2.1.0 log (as a JSON-ready dict) of `findings` in the project at `root`, each with its fix from
    `fixes` (annotation.text_fixes() of pipeline.propose()) when one fixes it. `run_properties` go into the run's
    property bag (e.g. the scan's summary)."""
    real_root = os.path.realpath(root)
    index = {r.code: i for i, r in enumerate(rules.RULES)}
    lines = Lines()
    seen: Counter[str] = Counter()
    results = []
    for f, where in in_order(findings, lines):
        fix = fix_for(f, fixes) if where.in_project else None
        result: dict[str, Any] = {
            "ruleId": f.rule,
            "level": level(f),
            "message": {"text": message(f, where, fix)},
            "locations": [_location(where)],
            "partialFingerprints": {FINGERPRINT: _fingerprint(f, where, lines, seen)},
            "properties": _properties(f),
        }
        if f.rule in index:
            result["ruleIndex"] = index[f.rule]
        if fix is not None and fix.after != fix.before:
            result["fixes"] = [_fix(fix, real_root)]
        results.append(result)
    run: dict[str, Any] = {
        "tool": {
            "driver": {
                "name": "torchmend",
                "version": tool_version,
                "semanticVersion": tool_version,
                "informationUri": HOMEPAGE,
                "rules": [rule_descriptor(r) for r in rules.RULES],
            }
        },
        "originalUriBaseIds": {SRCROOT: {"uri": Path(real_root).as_uri() + "/"}},
        "columnKind": "unicodeCodePoints",  # columns count characters, as Python's str does
        "results": results,
    }
    if run_properties:
        run["properties"] = run_properties
    # texts that quote a file name not valid UTF-8 (`compiled at bad\xff.py:2`): printable, so the log is valid JSON
    return printable_data({"$schema": SCHEMA, "version": "2.1.0", "runs": [run]})


def error_log(
    code: int, name: str, message: str, detail: str = "", *, tool_version: str = __version__
) -> dict[str, Any]:
    """The SARIF 2.1.0 log of a command that failed (exit `code`, ExitCode `name`): no results, and one invocation
    that did not succeed, its exit code and the error as a tool execution notification (docs/formats.md)."""
    text = f"{message}\n{detail}" if detail else message
    invocation = {
        "executionSuccessful": False,
        "exitCode": code,
        "exitCodeDescription": name,
        "toolExecutionNotifications": [
            {"level": "error", "message": {"text": text}, "descriptor": {"id": name}},
        ],
    }
    driver = {
        "name": "torchmend",
        "version": tool_version,
        "semanticVersion": tool_version,
        "informationUri": HOMEPAGE,
    }
    run = {"tool": {"driver": driver}, "invocations": [invocation], "results": []}
    return printable_data({"$schema": SCHEMA, "version": "2.1.0", "runs": [run]})
