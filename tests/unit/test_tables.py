"""Tables stay readable at 60 and 80 columns and when piped with no terminal: the long text of each row (a rule's
title, a finding's reason, a why-not) keeps whole lines of words, never one word per line."""

from __future__ import annotations

import io
import math
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from rich.console import Console

from torchmend import rules
from torchmend.cli.fixview import findings_at, unfixed_view
from torchmend.cli.render import findings_view
from torchmend.cli.tables import NO_TERMINAL_WIDTH
from torchmend.codemods.base import NoFix
from torchmend.model import Finding, Kind, Location, Pattern, Severity, Where

ROOT = Path(__file__).resolve().parents[2]
BOX = "│┃║"


def text_of(line: str, cell: int) -> str:
    """A table row's cell `cell` (counted from the end: -1 is the last), or the whole line of a list layout."""
    if line.rstrip().endswith(tuple(BOX)):
        cells = line.rstrip().split("│")[1:-1]
        return cells[cell].strip() if len(cells) >= -cell else ""
    return line.strip()


def lines_spanned(rendered: str, text: str, cell: int = -1) -> int:
    """How many output lines the words of `text` occupy, read as consecutive words of its column."""
    words = text.split()
    lines = [text_of(ln, cell).split() for ln in rendered.splitlines()]
    for start in range(len(lines)):
        i, n = 0, 0
        for ln in lines[start:]:
            if i == 0 and (not ln or ln[0] != words[0]):
                break
            n += 1
            for w in ln:
                if i < len(words) and w == words[i]:
                    i += 1
                elif i < len(words):
                    break
            if i == len(words):
                return n
    raise AssertionError(f"{text!r} not found whole in:\n{rendered}")


def cli(*args: str, columns: str | None) -> str:
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    env["NO_COLOR"] = "1"
    if columns:
        env["COLUMNS"] = columns
    proc = subprocess.run(
        [sys.executable, "-m", "torchmend", *args],
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.mark.parametrize("columns", ["60", "80", None])  # None: piped, no terminal anywhere
def test_rules_table_keeps_titles_whole(columns: str | None) -> None:
    out = cli("rules", columns=columns)
    width = int(columns) if columns else NO_TERMINAL_WIDTH
    assert max(len(line) for line in out.splitlines()) <= width
    for r in rules.RULES:
        assert r.code in out
        assert lines_spanned(out, r.title, cell=-2) <= 2, (r.code, out)
        fix = rules.FIXES.get(r.code)
        if fix:
            assert fix in out  # a fix name is what a user types: never cut or broken
    if columns is None:  # 120 columns: the table layout, with the kind column left out
        assert "┃ title" in out and "┃ kind" not in out
    else:
        assert "fix: gate-print" in out  # the list layout names the fix


def test_rules_table_is_a_table_when_wide() -> None:
    out = cli("rules", columns="200")
    assert "┃ kind" in out and "┃ title" in out


def _finding(line: int, reason: str, function: str = "forward_with_checkpointing") -> Finding:
    return Finding(
        rule="TM202",
        kind=Kind.RECOMPILE,
        title=rules.BY_CODE["TM202"].title,
        file="models/very_long_package_name/modeling_something_quite_long.py",
        line=line,
        function=function,
        path="/p/models/very_long_package_name/modeling_something_quite_long.py",
        where=Where.PROJECT,
        reason=reason,
        count=6,
        severity=Severity.FIX,
        pattern=Pattern.STORM,
        variable="args[2]",
        code="if position_bias is None:",
        call_site=Location(file="models/stack.py", line=776, function="forward", path="/p/models/stack.py"),
    )


REASON = (
    "guard failed: args[2] is None, which the wrapper passes on to the wrapped forward as its third positional "
    "argument; a tensor on the next call fails it again"
)


@pytest.mark.parametrize("width", [60, 80, 120, 200])
def test_findings_view_keeps_reasons_readable(width: int) -> None:
    findings = [_finding(423, REASON), _finding(88, REASON + " (second)", function="f")]
    buf = io.StringIO()
    Console(file=buf, width=width, no_color=True, highlight=False).print(findings_view(findings, width))
    out = buf.getvalue()
    assert max(len(line) for line in out.splitlines()) <= width
    # a one-word-per-line column would take ~25 lines; 30 characters a line on average at the least
    assert lines_spanned(out, REASON) <= math.ceil(len(REASON) / 30), out
    assert "forward_with_checkpointing" in out  # the short cells are never broken either
    if width < 100:
        assert "┃" not in out  # too narrow for a table: a list


def test_findings_at_names_each_rule_and_place_once() -> None:
    """fix's "✓ TM203 change removed ..." on 2 GPUs named `TM203 at fsdp2.py:85` twice: two findings of one rule at
    one line (merged over ranks, different functions) are one place to the reader."""
    f = _finding(85, REASON)
    limit = replace(f, rule="TM250")
    text = findings_at([f, replace(f, function="opt_step"), limit])
    assert text == (
        "TM202 at models/very_long_package_name/modeling_something_quite_long.py:85, "
        "TM250 at models/very_long_package_name/modeling_something_quite_long.py:85"
    )


@pytest.mark.parametrize("width", [60, 80, 200])
def test_unfixed_view_keeps_reasons_readable(width: int) -> None:
    why = (
        "`args[2]` is `position_bias`, passed at line 776 through forward_with_checkpointing's *args; the guard "
        "checks whether it is None, which a tensor cannot change"
    )
    items = [NoFix(_finding(423, REASON), why, "pass the same kind of value on every call")]
    buf = io.StringIO()
    Console(file=buf, width=width, no_color=True, highlight=False).print(unfixed_view(items, width))
    out = buf.getvalue()
    assert lines_spanned(out, why) <= math.ceil(len(why) / 30), out
    # a path longer than the line is folded, not cut
    assert "models/very_long_package_name/modeling_something_quite_long.py:423" in out.replace("\n", "")


def test_piped_with_no_terminal_lays_out_at_120_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    from torchmend.cli.render import print_scan
    from torchmend.model import EndedBy, Summary

    def no_terminal(fd: int = 0) -> os.terminal_size:
        raise OSError("not a terminal")

    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.setattr(os, "get_terminal_size", no_terminal)
    buf = io.StringIO()
    console = Console(file=buf, no_color=True, highlight=False)
    summary = Summary(frames_compiled=3, compiles=4, graphs=4, graph_breaks=1, recompiles=2, recompile_limit_hits=0,
                      compile_seconds=4.59, steps=12, ended_by=EndedBy("finished"), wall_seconds=14.1,
                      torch_version="2.13.0")  # fmt: skip
    print_scan(console, [_finding(423, REASON)], summary)
    lines = buf.getvalue().splitlines()
    assert max(len(line) for line in lines) == NO_TERMINAL_WIDTH  # the table takes the 120 columns
    summary_start = next(line for line in lines if line.startswith("3 frames compiled"))
    assert 100 < len(summary_start) <= NO_TERMINAL_WIDTH  # the summary line too wraps at 120, not rich's 80
    assert console.width == 80  # the console itself is left as it was
