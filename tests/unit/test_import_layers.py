"""The floors of the package as docs/DESIGN.md draws them ("Packages"): each top-level unit imports only the units
listed for it, so no arrow points upward (the CLI above the pipeline above the stages above the data model). Read
from the source with `ast` (nothing imported), so an import hidden inside a function counts too."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "torchmend"

# unit -> the units it may import (a unit is a top-level module or subpackage of torchmend). Keep in step with the
# "Packages" table of docs/DESIGN.md; a new unit must be added here, on its floor.
MAY_IMPORT: dict[str, set[str]] = {
    # the floor of plain data: nothing of torchmend
    "model": set(),
    "sources": set(),
    "interrupts": set(),
    "versions": set(),
    # the values every stage takes (Tolerance, Selection, Budget, Root)
    "values": set(),
    # the resolved settings, made of those values
    "settings": {"values"},
    # the stages
    "rules": {"model"},
    "store": {"sources"},
    "profiler": {"model", "interrupts", "rules", "values"},
    # what codemods and lint share (value kinds, binding, calls, names, the source window, the torch op tables, the
    # optimizer locator); codemods and lint stand side by side on it, neither imports the other
    "analysis": {"model"},
    "codemods": {"analysis", "model", "rules", "values"},
    "lint": {"analysis", "model", "rules", "sources", "versions", "profiler", "values"},
    "verify": {"codemods", "model", "profiler", "values"},
    "tune": {"model", "profiler", "values"},
    "config": {"settings", "rules", "values"},  # rules: the codes select/ignore name must exist
    # the project (root, configuration, what may be edited, the journal), then what the configuration selects
    "project": {"config", "settings", "sources", "store", "values"},
    "suppress": {"model", "sources", "rules", "store", "values"},
    "vcs": {"codemods", "model", "sources", "store", "verify", "rules", "values"},
    # the Python API over the stages, then the terminal over everything
    "pipeline": {
        "analysis",
        "codemods",
        "model",
        "profiler",
        "verify",
        "sources",
        "store",
        "versions",
        "project",
        "settings",
        "suppress",
        "values",
    },
    # the terminal: every unit below it (filled in after the table)
    "cli": set(),
    "__main__": {"cli"},
    "__init__": set(),
}
MAY_IMPORT["cli"] = set(MAY_IMPORT) - {"cli", "__main__", "__init__"}
# the pytest plugin: a second front end, above the CLI (it words its failures with the CLI's formats)
MAY_IMPORT["plugin"] = MAY_IMPORT["cli"] | {"cli"}


def _unit(module: str) -> str:
    parts = module.split(".")
    if len(parts) < 2 or not ((PACKAGE / parts[1]).is_dir() or (PACKAGE / f"{parts[1]}.py").exists()):
        return "__init__"  # the package itself, or a name it defines (`from torchmend import __version__`)
    return parts[1]


def _imports(path: Path) -> set[str]:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    module = ".".join(rel.parts)
    package = module.removesuffix(".__init__") if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            # `from torchmend import store` names the unit in the alias, `from torchmend.cli import x` in the module
            found |= {f"{target}.{alias.name}" for alias in node.names}
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
    return {name for name in found if name.startswith("torchmend.")}


def test_every_unit_is_on_a_floor() -> None:
    units = {_unit(".".join(p.relative_to(PACKAGE.parent).with_suffix("").parts)) for p in PACKAGE.rglob("*.py")}
    assert units <= set(MAY_IMPORT), f"add {sorted(units - set(MAY_IMPORT))} to MAY_IMPORT and docs/DESIGN.md"


def test_no_import_points_upward() -> None:
    upward = []
    for path in sorted(PACKAGE.rglob("*.py")):
        source = _unit(".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts))
        for target in sorted(_imports(path)):
            unit = _unit(target)
            # the package itself (`__version__`) is below every floor
            if unit not in (source, "__init__") and unit not in MAY_IMPORT.get(source, set()):
                upward.append(f"{path.relative_to(PACKAGE.parent)} imports {target} ({source} -> {unit})")
    assert not upward, "\n".join(upward)


def test_the_table_has_no_cycle() -> None:
    # a floor plan: ordering the units so that each imports only units before it must be possible
    placed: list[str] = []
    left = dict(MAY_IMPORT)
    while left:
        ready = sorted(unit for unit, needs in left.items() if needs <= set(placed))
        assert ready, f"a cycle among {sorted(left)}"
        placed += ready
        for unit in ready:
            del left[unit]


def _floors() -> dict[str, int]:
    """Each unit's floor: one above the highest unit it may import (the floor of plain values is 0)."""
    floors: dict[str, int] = {}

    def floor(unit: str) -> int:
        if unit not in floors:
            floors[unit] = 1 + max((floor(u) for u in MAY_IMPORT[unit]), default=-1)
        return floors[unit]

    for unit in MAY_IMPORT:
        floor(unit)
    return floors


def test_at_most_seven_floors() -> None:
    # settings and config stand on the values (Tolerance's defaults are there, not in verify/): the stages, the
    # pipeline, the CLI and the plugin above them make 7 floors, 0 to 6
    floors = _floors()
    assert max(floors.values()) + 1 <= 7, sorted(floors.items(), key=lambda kv: kv[1])
    assert floors["values"] == 0 and floors["settings"] == 1 and floors["config"] == 2


def test_floors_md_draws_this_table() -> None:
    # docs/floors.md's table: each row's floor as computed here, and the units it names as MAY_IMPORT's row
    doc = (PACKAGE.parent / "docs" / "floors.md").read_text(encoding="utf-8")
    rows = [line.split("|")[1:4] for line in doc.splitlines() if line.startswith("| ") and line[2].isdigit()]
    floors, seen = _floors(), set()
    for floor, units, may in rows:
        named = set(re.findall(r"`(\w+)`", may))
        for unit in re.findall(r"`(\w+)`", units):
            seen.add(unit)
            assert floors[unit] == int(floor), f"floors.md puts {unit} on floor {floor}, the table on {floors[unit]}"
            if unit not in ("cli", "plugin", "__main__"):  # "every unit below it"
                assert named == MAY_IMPORT[unit], f"floors.md: {unit} may import {sorted(MAY_IMPORT[unit])}"
    assert seen == set(MAY_IMPORT) - {"__init__"}, f"floors.md lacks {sorted(set(MAY_IMPORT) - seen - {'__init__'})}"


def test_the_values_import_nothing_of_torchmend() -> None:
    # the ground floor, imported for real: nothing else of torchmend comes with it
    code = "import sys, torchmend.values; print(sorted(m for m in sys.modules if m.startswith('torchmend')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=PACKAGE.parent)
    assert out.stdout.split() == ["['torchmend',", "'torchmend.values']"]
