"""`--dist loadgroup` that keeps a test file's `xdist_group` on one worker on every pytest (a pytest-xdist plugin;
tests/conftest.py loads it).

pytest-xdist's own loadgroup tells the controller a test's group by appending `@group` to the test's node id on the
worker (`item._nodeid = ...`). pytest 9.2 keeps node ids structured (`Node._id`): the assignment no longer changes
the id, the controller sees no group, and the tests are spread as `--dist load` would (pytest-xdist#1386, open with
pytest-xdist 3.8.0, the newest release). The controller never sees the marks, so this scheduler reads them where
the suite puts them, a module's `pytestmark = pytest.mark.xdist_group("name")`, from the test file itself.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path
from typing import Any

import pytest


@cache
def _module_group(path: Path) -> str | None:
    """The group a test module's `pytestmark` puts all of its tests in, if any."""
    try:
        tree = ast.parse(path.read_bytes())
    except (OSError, SyntaxError, ValueError):
        return None
    for node in tree.body:
        if not (isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "pytestmark" for t in node.targets)):
            continue
        marks = node.value.elts if isinstance(node.value, (ast.List, ast.Tuple)) else [node.value]
        for mark in marks:
            if isinstance(mark, ast.Call) and isinstance(mark.func, ast.Attribute) and mark.func.attr == "xdist_group":
                args = [a.value for a in mark.args if isinstance(a, ast.Constant)]
                kwargs = [k.value.value for k in mark.keywords if k.arg == "name" and isinstance(k.value, ast.Constant)]
                return str((args or kwargs or ["default"])[0])
    return None


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling

    root = config.rootpath

    class ModuleGroupScheduling(LoadGroupScheduling):
        def _split_scope(self, nodeid: str) -> str:
            scope = super()._split_scope(nodeid)
            if scope != nodeid:  # pytest before 9.2: the worker's `@group` suffix made it through
                return scope
            group = _module_group(root / nodeid.split("::", 1)[0])
            return nodeid if group is None else group

    return ModuleGroupScheduling(config, log)
