"""Run patched sources without writing them: the child serves these texts in place of the files on disk.

`fix` verifies a change before anything is written, so the patched script and the patched modules it
imports come from memory: the main script through runpy, imported modules through a meta-path finder
whose loader compiles the overlay text (never a stale .pyc of the original). linecache gets the new lines,
so tracebacks and PyTorch's graph-break messages quote the code that actually ran.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import linecache
import os
import runpy
import sys
from collections.abc import Sequence
from types import CodeType
from typing import Any


def _real(path: str) -> str:
    return os.path.realpath(path)


class _OverlayLoader(importlib.machinery.SourceFileLoader):
    def __init__(self, fullname: str, path: str, text: str) -> None:
        super().__init__(fullname, path)
        self._text = text

    def get_source(self, fullname: str) -> str:
        return self._text

    def get_code(self, fullname: str) -> CodeType:
        return compile(self._text, self.path, "exec", dont_inherit=True)


class _OverlayFinder(importlib.abc.MetaPathFinder):
    def __init__(self, texts: dict[str, str]) -> None:
        self.texts = texts

    def find_spec(self, fullname: str, path: Sequence[str] | None, target: Any = None) -> Any:
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or not spec.origin or _real(spec.origin) not in self.texts:
            return None
        text = self.texts[_real(spec.origin)]
        spec.loader = _OverlayLoader(fullname, spec.origin, text)
        return spec


def install(texts: dict[str, str]) -> None:
    """Serve `texts` (absolute path -> source) instead of the files, for imports and tracebacks."""
    texts = {_real(p): t for p, t in texts.items()}
    for path, text in texts.items():
        linecache.cache[path] = (len(text), None, text.splitlines(keepends=True), path)  # mtime None: never stale
    sys.meta_path.insert(0, _OverlayFinder(texts))


def run_main(script: str, texts: dict[str, str]) -> None:
    """runpy.run_path(script, run_name="__main__"), with the script's text taken from `texts` if there."""
    text = texts.get(_real(script))
    if text is None:
        runpy.run_path(script, run_name="__main__")
        return
    code = compile(text, script, "exec", dont_inherit=True)
    # runpy's own helper for run_path: swaps in a fresh __main__ module and sets __file__ and friends.
    runpy._run_module_code(code, None, "__main__", script_name=script)  # type: ignore[attr-defined]
