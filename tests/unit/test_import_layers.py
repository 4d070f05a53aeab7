"""The floors of the package as docs/DESIGN.md draws them ("Packages"): each top-level unit imports only the units
listed for it, so no arrow points upward (the CLI above the pipeline above the stages above the data model). Read
from the source with `ast` (nothing imported), so an import hidden inside a function counts too."""

from __future__ import annotations

import ast
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
    # the stages
    "rules": {"model"},
    "store": {"sources"},
    "profiler": {"model", "interrupts", "rules"},
    # what codemods and lint share (value kinds, binding, calls, names, the source window, the torch op tables, the
    # optimizer locator); codemods and lint stand side by side on it, neither imports the other
    "analysis": {"model"},
    "codemods": {"analysis", "model", "rules"},
    "lint": {"analysis", "model", "rules", "sources", "versions", "profiler"},
    "verify": {"codemods", "model", "profiler"},
    "tune": {"model", "profiler"},
    "settings": {"verify"},
    "config": {"verify", "settings", "rules"},  # rules: the codes select/ignore name must exist
    # the project (root, configuration, what may be edited, the journal), then what the configuration selects
    "project": {"config", "settings", "sources", "store"},
    "suppress": {"config", "settings", "model", "sources", "rules", "store"},
    "vcs": {"codemods", "model", "sources", "store", "verify", "rules"},
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
