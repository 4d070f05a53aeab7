"""Large files: libcst sees the part of the file the findings point at.

libcst costs about a millisecond a line to parse and resolve metadata for (positions, parents, scopes,
qualified names), and more to transform and print, so one finding in a 50,000-line module took minutes and a
gigabyte. From LARGE_LINES lines on, a SourceFile parses a window instead: the file's text with each top-level
function or class that no finding points into, and that no kept code names (followed until nothing new is
named), replaced by a string literal over as many lines (one for a run of them), so every kept line keeps its
number and column. Python's
own parser (ast, in C) finds those statements. The changed window's text gets the left-out text back
(restore()), byte for byte.

What a codemod cannot see in a large file: the body of a top-level function or class that nothing the findings
point into names (a lookup by name from another file finds no definition there, and the fix is declined).
"""

from __future__ import annotations

import ast
import io
import secrets
from collections.abc import Collection
from dataclasses import dataclass

LARGE_LINES = 2000


def is_large(text: str) -> bool:
    return text.count("\n") >= LARGE_LINES


@dataclass(frozen=True)
class Window:
    text: str  # what libcst parses: the file, the left-out statements replaced by stubs
    stubs: tuple[tuple[str, str], ...]  # (a stub's text, the text it stands for), each stub unique

    @property
    def stub_texts(self) -> set[str]:
        return {stub for stub, _ in self.stubs}

    def restore(self, text: str) -> str:
        """A (changed) window's text with the left-out statements' text back in place of their stubs."""
        for stub, original in self.stubs:
            text = text.replace(stub, original, 1)
        return text


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def window(text: str, focus: Collection[int]) -> Window | None:
    """The window for these lines of interest; None when it would leave nothing out, or Python cannot parse the
    file (libcst then says why)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return None
    candidates: dict[str, list[tuple[int, int]]] = {}
    kept: list[ast.stmt] = []
    for stmt in tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            first = min([stmt.lineno, *(d.lineno for d in stmt.decorator_list)])
            last = stmt.end_lineno or stmt.lineno
            if not any(first <= ln <= last for ln in focus):
                candidates.setdefault(stmt.name, []).append((first, last))
                continue
        kept.append(stmt)
    named: set[str] = set()
    todo = kept
    while todo:  # a kept statement's names keep the functions and classes they name, and so on
        for stmt in todo:
            named |= _names(stmt)
        keep = named & candidates.keys()
        todo = [s for s in tree.body if getattr(s, "name", None) in keep]
        for name in keep:
            del candidates[name]
    out = {span for spans in candidates.values() for span in spans}
    if not out:
        return None
    left_out: list[tuple[int, int]] = []  # a run of left-out statements is one span (the lines between too)
    previous_out = False
    for stmt in tree.body:
        span = (min([stmt.lineno, *(d.lineno for d in getattr(stmt, "decorator_list", ()))]), stmt.end_lineno or 0)
        if span in out:
            if previous_out:
                left_out[-1] = (left_out[-1][0], span[1])
            else:
                left_out.append(span)
        previous_out = span in out
    lines = io.StringIO(text, newline="").readlines()  # split as Python counts lines: \n, \r\n, \r
    token = secrets.token_hex(8)
    stubs = []
    for k, (first, last) in enumerate(left_out):
        original = "".join(lines[first - 1 : last])
        body = original.rstrip("\r\n")
        stub = f'"""torchmend {token} {k}' + "\n" * (last - first) + '"""'
        lines[first - 1 : last] = [stub + original[len(body) :]] + [""] * (last - first)
        stubs.append((stub, body))
    return Window("".join(lines), tuple(stubs))
