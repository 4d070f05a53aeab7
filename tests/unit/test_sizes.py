"""No function in torchmend/ over 100 lines, no file over 500 (issue 29); the two lists of exceptions are empty and
stay so. A function's lines run from its first decorator to its end."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "torchmend"
MAX_FUNCTION, MAX_FILE = 100, 500
LONG_FUNCTIONS: set[str] = set()
LONG_FILES: set[str] = set()


def _sizes() -> tuple[dict[str, int], dict[str, int]]:
    functions, files = {}, {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        text = path.read_text(encoding="utf-8")
        files[rel] = len(text.splitlines())
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                functions[f"{rel}::{node.name}"] = max(
                    functions.get(f"{rel}::{node.name}", 0), node.end_lineno - start + 1
                )
    return functions, files


def test_no_function_over_100_lines() -> None:
    functions, _ = _sizes()
    long = {name: n for name, n in functions.items() if n > MAX_FUNCTION and name not in LONG_FUNCTIONS}
    assert not long, f"split these (lines): {long}"


def test_no_file_over_500_lines() -> None:
    _, files = _sizes()
    long = {name: n for name, n in files.items() if n > MAX_FILE and name not in LONG_FILES}
    assert not long, f"split these (lines): {long}"
