"""Every command's `--help`, read as a newcomer meets it (issue 41): run for real at 80 and 200 columns, no type
beside a flag, no option named that the command lacks, and descriptions that are not squeezed into a narrow column."""

from __future__ import annotations

import re

import pytest
import typer
from conftest import torchmend

from torchmend.cli.main import app

GROUP = typer.main.get_command(app)
COMMANDS = [""] + sorted(GROUP.commands)  # type: ignore[attr-defined]
_NAME_ROW = re.compile(r"^  (\S.*?)(?:  +(\S.*))?$")  # an entry of a section: its name, then its description
MIN_DESCRIPTION = 30  # a description line (not a paragraph's last) shorter than this is a squeezed column


def _command(name: str) -> typer.core.TyperCommand:
    return GROUP if not name else GROUP.commands[name]  # type: ignore[attr-defined,no-any-return]


def _own_options(name: str) -> set[str]:
    return (
        {"--version"}
        if not name
        else {opt for p in _command(name).params for opt in (*p.opts, *p.secondary_opts) if opt.startswith("--")}
    )


def _help(name: str, columns: int) -> str:
    r = torchmend(*([name] if name else []), "--help", env={"COLUMNS": str(columns)})
    assert r.returncode == 0, r.stderr
    return r.stdout


def _named(page: str, name: str) -> list[tuple[str, str]]:
    """Each option the page names, with the command it belongs to: the page's own; the one a `torchmend X` or a
    code span opening with `X` names (`lint --exit-zero`); none after a bare `--` or `torchrun` (the options of the
    script or of torchrun, to the end of the code span or line)."""
    named, owner, outer, in_code = [], name, name, False
    words = re.findall(r"`|\n|[^\s`]+", page)
    for i, word in enumerate(words):
        if word == "`":
            in_code = not in_code
            outer, owner = (owner, owner) if in_code else (outer, outer)
        elif word == "\n":
            if not in_code:
                owner = name
        elif word.strip("(),.;:") in COMMANDS[1:] and (words[i - 1] in ("`", "torchmend")):
            owner = word.strip("(),.;:")
        elif word == "--" or word.lstrip("(").startswith("torchrun"):
            owner = None
        elif owner is not None and re.fullmatch(r"\(?--[a-z][a-z0-9-]*[),.;:]*", word):
            named.append((word.strip("(),.;:"), owner))
    return named


def _entries(page: str) -> list[list[str]]:
    """Each entry of the Arguments, Options and Commands sections: its description's lines."""
    entries: list[list[str]] = []
    section = False
    for line in page.splitlines():
        if re.match(r"^(Arguments|Options|Commands):$", line):
            section = True
            continue
        if not line.strip() or not line.startswith(" "):
            section = False
            continue
        if not section:
            continue
        m = _NAME_ROW.match(line)
        if m and not line.startswith("   "):
            entries.append([m.group(2)] if m.group(2) else [])
        elif entries:
            entries[-1].append(line.strip())
    return entries


@pytest.mark.parametrize("columns", [80, 200])
@pytest.mark.parametrize("name", COMMANDS)
def test_help_reads_cleanly(name: str, columns: int) -> None:
    page = _help(name, columns)
    assert "<bool>" not in page and not re.search(r"<(int|float|str|path|list)[^>]*>", page), page
    assert all(len(line) <= columns for line in page.splitlines()), page
    lacking = {(opt, cmd) for opt, cmd in _named(page, name) if opt not in _own_options(cmd) | {"--help"}}
    assert lacking == set(), f"`torchmend {name} --help` names options that (command) does not have"
    entries = _entries(page)
    assert entries or not _command(name).params
    for lines in entries:
        for line in lines[:-1]:  # a paragraph's last line may be short
            assert len(line) >= MIN_DESCRIPTION, f"squeezed description in `{name} --help`: {lines}"
