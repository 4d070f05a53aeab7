"""Which files can compile anything, told cheaply: the text must say `compile`, and Python's own parser (C, many
times faster than libcst) must find a call or decorator that may be torch.compile or nn.Module.compile. Only
those files are parsed with libcst; the files their compiled code calls are parsed later, on demand."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from torchmend.lint.deep import NESTED

_HINT = re.compile(rb"\bcompile\b")


@dataclass(frozen=True)
class Triage:
    compiles: bool  # may compile something: worth parsing with libcst
    error: tuple[int, str] | None = None  # (line, message) when Python cannot parse the file


def triage(data: bytes) -> Triage:
    """What a file's bytes show (PEP 263 coding lines and BOMs honoured, as Python reads them)."""
    if not _HINT.search(data):
        return Triage(False)
    try:
        tree = ast.parse(data)
    except SyntaxError as e:
        return Triage(False, (e.lineno or 1, e.msg))
    except ValueError as e:  # null bytes
        return Triage(False, (1, str(e)))
    except (RecursionError, MemoryError):  # nesting Python refuses too (deep.py)
        return Triage(False, (1, NESTED))
    return Triage(_compiles(tree))


def _torch_compile_names(tree: ast.Module) -> set[str]:
    """Names bound by `from torch import compile [as name]`."""
    return {
        a.asname or a.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == "torch"
        for a in node.names
        if a.name == "compile"
    }


def _compiles(tree: ast.Module) -> bool:
    names = _torch_compile_names(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr == "compile":
                if isinstance(func.value, ast.Name) and func.value.id in ("re", "regex"):
                    continue
                return True  # torch.compile(...), t.compile(...), model.compile(): libcst tells them apart
            if isinstance(func, ast.Name) and func.id in names:
                return True
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for dec in node.decorator_list:
                for part in ast.walk(dec):
                    if (isinstance(part, ast.Attribute) and part.attr == "compile") or (
                        isinstance(part, ast.Name) and part.id in names
                    ):
                        return True
    return False
