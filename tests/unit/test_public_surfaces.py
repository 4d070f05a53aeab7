"""The doors between modules (issue 29): no module of torchmend imports another module's private name (`_name`), lint
imports nothing of the codemods, and a codemod hands a finding to another only through a declared `Delegate` the
engine resolves, never by looking it up in the registry itself. Read from the source with `ast` (nothing imported but
the registry), so an import inside a function counts too."""

from __future__ import annotations

import ast
from pathlib import Path

from torchmend.codemods.registry import by_rule, codemods

PACKAGE = Path(__file__).resolve().parents[2] / "torchmend"


def _module(path: Path) -> str:
    return ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__")


def _imported(path: Path) -> list[tuple[str, str, int]]:
    """(module, name, line) for every `from M import name` of torchmend in the file, relative imports resolved."""
    module = _module(path)
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                target = ".".join(parts[: len(parts) - (node.level - 1)] + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] == "torchmend":
                found += [(target, alias.name, node.lineno) for alias in node.names]
    return found


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def test_no_module_imports_another_modules_private_name() -> None:
    found = [
        f"{path.relative_to(PACKAGE.parent)}:{line} imports {name} from {target}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for target, name, line in _imported(path)
        if _private(name) and target != _module(path)
    ]
    assert not found, "make these public (drop the underscore) or keep them in one module:\n" + "\n".join(found)


def test_no_module_reads_a_private_name_through_an_imported_module() -> None:
    # `from torchmend.x import y; y._name` where y is a module of torchmend
    modules = {_module(p) for p in PACKAGE.rglob("*.py")}
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        aliases = {
            alias: f"{target}.{name}"
            for target, name, _ in _imported(path)
            if f"{target}.{name}" in modules
            for alias in [name]
        }
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and _private(node.attr):
                if node.value.id in aliases:
                    found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno} reads {node.value.id}.{node.attr}")
    assert not found, "\n".join(found)


def test_lint_imports_nothing_of_the_codemods() -> None:
    found = [
        f"{path.relative_to(PACKAGE.parent)}:{line} imports {target}"
        for path in sorted((PACKAGE / "lint").rglob("*.py"))
        for target, _, line in _imported(path)
        if target == "torchmend.codemods" or target.startswith("torchmend.codemods.")
    ]
    assert not found, "lint and codemods share torchmend/analysis/, never each other:\n" + "\n".join(found)


def test_no_fix_looks_a_codemod_up_in_the_registry() -> None:
    found = [
        f"{path.relative_to(PACKAGE.parent)}:{line} imports {target}.{name}"
        for path in sorted((PACKAGE / "codemods" / "fixes").rglob("*.py"))
        for target, name, line in _imported(path)
        if target == "torchmend.codemods.registry" or (target == "torchmend.codemods" and name == "registry")
    ]
    assert not found, "hand the finding over with `Delegate(finding, rule)` and `delegates_to`:\n" + "\n".join(found)


def test_every_declared_delegation_reaches_a_codemod() -> None:
    table = by_rule()
    for codemod in codemods():
        for rule in codemod.delegates_to:
            assert rule in table, f"{codemod.name} delegates to {rule}, which no codemod fixes"
            assert table[rule] is not codemod, f"{codemod.name} delegates to itself"
    declared = {(cm.name, rule) for cm in codemods() for rule in cm.delegates_to}
    # TM202 and TM206 hand each other the findings dynamo names alike (an argument, a closure variable)
    assert {("scalar-argument-to-tensor", "TM206"), ("global-scalar-to-tensor", "TM202")} <= declared


def test_the_front_ends_reach_the_engine_only_through_the_fixes_facade() -> None:
    """The CLI and the pytest plugin use `Fixes.display()`, `.line_of()`, `.alone()` and `.where()`
    (pipeline/fixes.py), never the session behind them nor the engine's span/apply/preview; of the engine they take
    only its pure text function, `unified_diff`."""
    found = []
    for path in sorted([*(PACKAGE / "cli").rglob("*.py"), *(PACKAGE / "plugin").rglob("*.py")]):
        rel = path.relative_to(PACKAGE.parent)
        found += [
            f"{rel}:{line} imports {name} from the engine"
            for target, name, line in _imported(path)
            if target == "torchmend.codemods.engine" and name != "unified_diff"
        ]
        found += [
            f"{rel}:{node.lineno} reads .session"
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.Attribute) and node.attr == "session"
        ]
    assert not found, "\n".join(found)
