"""`--format github`: one workflow command per finding, escaped as the Actions runner reads them (its escapeData and
escapeProperty: `%`, CR and LF in the message, also `:` and `,` in property values), so that a message with any of
them stays one annotation on the right line."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

from test_formats_sarif import recorded_findings

from torchmend import pipeline
from torchmend.cli.formats import report, text_fixes, to_github
from torchmend.cli.formats.github import command, escape_data, escape_property, verdict_command, verification
from torchmend.model import Finding, Kind, Location, Severity, Where
from torchmend.verify.compare import Metric, Stat, Verification

# What the runner does with a line (actions/runner, ActionCommand.TryParseV2): the command's name, then
# `key=value` pairs split at `,` and `=`, then the message after the second `::`; values and message unescaped.
_LINE = re.compile(r"^::(?P<name>[a-z]+)(?: (?P<props>[^:]*))?::(?P<message>.*)$")
_UNESCAPE = {"%25": "%", "%0D": "\r", "%0A": "\n", "%3A": ":", "%2C": ","}


def unescape(text: str) -> str:
    return re.sub("%25|%0D|%0A|%3A|%2C", lambda m: _UNESCAPE[m.group()], text)


def parse(line: str) -> tuple[str, dict[str, str], str]:
    """A workflow command as the runner reads it: (name, properties, message)."""
    m = _LINE.match(line)
    assert m, line
    props = {}
    for pair in (m["props"] or "").split(","):
        if pair:
            key, _, value = pair.partition("=")
            props[key] = unescape(value)
    return m["name"], props, unescape(m["message"])


def test_escaping_is_githubs():
    assert escape_data("50% done\r\nnext: a, b") == "50%25 done%0D%0Anext: a, b"
    assert escape_property("a:b,c%\n") == "a%3Ab%2Cc%25%0A"
    assert command("warning", "x", file="a b.py", line=3) == "::warning file=a b.py,line=3::x"
    assert command("notice", "plain") == "::notice::plain"


def test_a_message_with_every_special_character_stays_one_annotation(tmp_path: Path):
    (tmp_path / "a,b:c.py").write_text("x = 1\n\n    y = f(x)\n")
    f = Finding(
        rule="TM101",
        kind=Kind.GRAPH_BREAK,
        title="print(): 100% of steps, every one",
        file="a,b:c.py",
        line=3,
        function="f",
        path=str(tmp_path / "a,b:c.py"),
        where=Where.PROJECT,
        reason="first line\r\nsecond: 50%, then ::warning::not a command",
        count=2,
        severity=Severity.FIX,
    )
    text = to_github([f])
    assert text.count("\n") == 1 and "\r" not in text  # one line, whatever the message holds
    name, props, message = parse(text.rstrip("\n"))
    assert name == "warning"
    assert props == {"file": "a,b:c.py", "line": "3", "col": "5", "title": "TM101 print(): 100% of steps, every one"}
    assert message.startswith("print(): 100% of steps, every one: first line\r\nsecond: 50%, then ::warning::not")
    assert "Seen 2×." in message


def test_a_recorded_scan_gives_one_annotation_per_finding_with_its_fix():
    findings, root = recorded_findings("several")
    text = to_github(findings, text_fixes(pipeline.propose(findings, root)))
    parsed = [parse(line) for line in text.splitlines()]
    assert [(p["file"], p["line"], p["col"], p["title"].split()[0]) for _, p, _ in parsed] == [
        ("train.py", "19", "5", "TM250"),
        ("train.py", "20", "9", "TM201"),
        ("train.py", "22", "9", "TM103"),
        ("train.py", "24", "9", "TM101"),
        ("train.py", "25", "9", "TM202"),
    ]
    assert [name for name, _, _ in parsed] == ["warning", "warning", "warning", "warning", "notice"]
    tm103 = parsed[2][2]
    assert "`torchmend fix` proposes a change (safe): compute every branch and pick with torch.where" in tm103
    assert "PyTorch's page: https://meta-pytorch.github.io/compile-graph-break-site/gb/gb0170.html" in tm103
    assert report("github", findings, root, text_fixes(pipeline.propose(findings, root))) == text
    assert "proposes a change" not in report("github", findings, root)  # formatting runs no codemod itself


def test_library_findings_are_annotated_at_the_users_line_or_without_a_file():
    findings, _ = recorded_findings("library_after_break")
    library = next(f for f in findings if f.where == Where.LIBRARY)
    (line,) = [x for x in to_github([library]).splitlines()]
    _, props, message = parse(line)
    assert (props["file"], props["line"]) == ("model.py", str(library.user_frame.line))  # type: ignore[union-attr]
    assert f"It happens in {library.file}:{library.line}" in message
    _, props, message = parse(to_github([replace(library, user_frame=None)]).rstrip("\n"))
    assert set(props) == {"title"}  # no file the checkout has: a run-level annotation
    assert message.startswith(f"{library.path}:{library.line}: ")


def test_a_recompile_names_its_call_site_and_ranks():
    findings, _ = recorded_findings("several")
    tm202 = next(f for f in findings if f.rule == "TM202")
    ranked = replace(
        tm202, ranks={1: 1}, divergent=True, call_site=Location(file="loop.py", line=7, function="m", path="/x")
    )
    _, _, message = parse(to_github([ranked]).rstrip("\n"))
    assert "Seen 1× (one-time) on ranks 1 (1×); rank-divergent" in message
    assert "The compiled function is called from loop.py:7." in message


def test_no_findings_no_output():
    assert to_github([]) == ""


def test_verify_verdict_is_one_run_level_annotation():
    line = verdict_command("refused", ["numerics differ: loss 3, 1.5 vs 1.6", "graph breaks: 9 → 0"])
    name, props, message = parse(line.rstrip("\n"))
    assert (name, props) == ("error", {"title": "torchmend verify: refused"})
    assert message == "numerics differ: loss 3, 1.5 vs 1.6\ngraph breaks: 9 → 0"
    assert parse(verdict_command("improved", ["ok"]).rstrip("\n"))[0] == "notice"
    assert parse(verdict_command("no_change", ["same"]).rstrip("\n"))[0] == "warning"


def test_verify_format_github_says_verdict_reasons_and_counts():
    counts = [Metric("graph_breaks", Stat(9, 9, 9), Stat(0, 0, 0)), Metric("recompiles", Stat(8, 8, 8), Stat(1, 1, 1))]
    v = Verification(1, counts, [], None, "improved", reasons=["removed 9 graph breaks"], notes=["one run per arm"])
    name, props, message = parse(verification(v).rstrip("\n"))
    assert (name, props["title"]) == ("notice", "torchmend verify: improved")
    assert message.splitlines() == [
        "removed 9 graph breaks",
        "speed not judged: runs on the script's own backend screen changes, they do not time them",
        "graph breaks: 9 → 0",
        "recompiles: 8 → 1",
        "note: one run per arm",
    ]
