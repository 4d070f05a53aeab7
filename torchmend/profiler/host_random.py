"""Whether a graph break's line draws from Python's or NumPy's host random generator (TM110), by what the names mean.

`random.random() < p` is found by its text, but research code imports the draw itself (`from random import random`,
then `if random() < layer_dropout:`) or under another name (`import numpy as onp`, `from numpy import random as npr`).
The file's imports say what each name is, as libcst's qualified names do for TM110's codemod
(codemods/fixes/host_random.py: the same two module prefixes). Read with `ast` (the profiler does not parse with
libcst); pure apart from linecache.
"""

from __future__ import annotations

import ast
import linecache
import re
from functools import lru_cache

from torchmend import rules

# The line's own words first (also where the file cannot be parsed, or is not on this machine).
_BY_TEXT = re.compile(r"\b(?:np|numpy)\.random\.\w+\(|\brandom\.(?:random|randint|uniform|choice|sample|shuffle)\(")


def draws_host_random(path: str, line: int, source: str = "") -> bool:
    """Whether the statement at `line` of `path` calls a function of `random` or `numpy.random`. `source`: the
    line's text, where the file cannot be read."""
    if _BY_TEXT.search(source):
        return True
    text = "".join(linecache.getlines(path))
    calls = _calls_by_line(text) if "random" in text else None
    return calls is not None and any(name.startswith(rules.HOST_RANDOM_MODULES) for name in calls.get(line, ()))


@lru_cache(maxsize=64)
def _calls_by_line(text: str) -> dict[int, tuple[str, ...]] | None:
    """Line -> the qualified names of the functions called on it (every line of a call's statement)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return None
    imported = _imports(tree)
    out: dict[int, list[str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = _qualified(node.func, imported)
            if name:
                for n in range(node.lineno, (node.end_lineno or node.lineno) + 1):
                    out.setdefault(n, []).append(name)
    return {k: tuple(v) for k, v in out.items()}


def _imports(tree: ast.Module) -> dict[str, str]:
    """Local name -> the dotted name it was imported as, from every import in the file (a function's too)."""
    names: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.asname:
                    names[a.asname] = a.name
                else:
                    top = a.name.split(".")[0]
                    names[top] = top
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for a in node.names:
                names[a.asname or a.name] = f"{node.module}.{a.name}"
    return names


def _qualified(func: ast.expr, imported: dict[str, str]) -> str:
    parts: list[str] = []
    while isinstance(func, ast.Attribute):
        parts.append(func.attr)
        func = func.value
    if not isinstance(func, ast.Name) or func.id not in imported:
        return ""
    return ".".join([imported[func.id], *reversed(parts)])
