"""Two recompiles are no storm (issue 41): a repeated recompile is called a storm from STORM_FROM times on (half of
torch's default recompile limit), and said as a count below that, in the table and in the annotations alike."""

from __future__ import annotations

import io
from dataclasses import replace

from rich.console import Console
from test_formats_sarif import recorded_findings

from torchmend.cli.formats import to_github
from torchmend.cli.render import findings_view
from torchmend.model import STORM_FROM, Pattern


def _table(f: object) -> str:
    console = Console(file=io.StringIO(), width=200, color_system=None)
    console.print(findings_view([f]))  # type: ignore[list-item]
    return console.file.getvalue()  # type: ignore[attr-defined,no-any-return]


def test_a_storm_only_from_storm_from_repeats() -> None:
    findings, _ = recorded_findings("several")
    repeated = replace(next(f for f in findings if f.rule == "TM201"), pattern=Pattern.STORM)
    twice, many = replace(repeated, count=2), replace(repeated, count=STORM_FROM + 2)
    assert "storm" not in _table(twice) and "repeated 2×" in _table(twice)
    assert f"a recompile storm ({STORM_FROM + 2}×)" in _table(many)
    assert "storm" not in to_github([twice]) and "Seen 2×" in to_github([twice])
    assert f"Seen {STORM_FROM + 2}× (a recompile storm)" in to_github([many])
    assert 2 < STORM_FROM <= 8  # a storm before torch's default recompile limit (8) is reached, never of two
