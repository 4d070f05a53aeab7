"""Patched texts for `verify`, without touching the files: a unified diff applied in memory, or a directory
holding changed copies of the project's files."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path

from torchmend.values import Root

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


class PatchError(Exception):
    pass


def _target(header: str) -> str:
    name = header[4:].split("\t")[0].strip()
    if name == "/dev/null":
        raise PatchError("the patch creates or deletes a file; verify only handles changed files")
    return name[2:] if name.startswith(("a/", "b/")) else name


def apply_patch(patch: str, root: Root, read: Callable[[str], str]) -> dict[str, str]:
    """{absolute path: new text} for every file the unified diff changes (paths relative to `root`, with or
    without git's a/ b/ prefixes). Context must match exactly: no fuzz, so what is verified is what applies."""
    lines = patch.splitlines(keepends=True)
    out: dict[str, str] = {}
    i = 0
    while i < len(lines):
        if not lines[i].startswith("--- "):
            i += 1
            continue
        if i + 1 >= len(lines) or not lines[i + 1].startswith("+++ "):
            raise PatchError(f"line {i + 1}: '---' without '+++'")
        rel = _target(lines[i + 1])
        path = str((root.path / rel).resolve())
        if not path.startswith(str(root.path.resolve()) + os.sep):
            raise PatchError(f"{rel} is outside the project")
        try:
            old = out.get(path) or read(path)
        except OSError as e:
            raise PatchError(f"cannot read {rel}: {e}") from e
        src = old.splitlines(keepends=True)
        result: list[str] = []
        pos = 0
        i += 2
        while i < len(lines) and lines[i].startswith("@@"):
            m = _HUNK.match(lines[i])
            if not m:
                raise PatchError(f"line {i + 1}: bad hunk header")
            start = int(m.group(1)) - (0 if m.group(2) == "0" else 1)
            result.extend(src[pos:start])
            pos = start
            i += 1
            while i < len(lines) and lines[i][:1] in (" ", "-", "+", "\\"):
                tag, text = lines[i][:1], lines[i][1:]
                if tag == "\\":  # "\ No newline at end of file": the previous line had none
                    if result and result[-1].endswith("\n"):
                        result[-1] = result[-1][:-1]
                elif tag in (" ", "-"):
                    if pos >= len(src) or src[pos].rstrip("\r\n") != text.rstrip("\r\n"):
                        raise PatchError(f"{rel}: the patch does not apply at line {pos + 1} (the file changed?)")
                    if tag == " ":
                        result.append(src[pos])
                    pos += 1
                else:
                    result.append(text)
                i += 1
        result.extend(src[pos:])
        out[path] = "".join(result)
    if not out:
        raise PatchError("no file changes found in the patch (expected a unified diff)")
    return out


def from_directory(patched: Path, root: Root, read: Callable[[str], str]) -> dict[str, str]:
    """{absolute project path: text} for each .py file under `patched` whose counterpart under `root` differs."""
    out: dict[str, str] = {}
    for new in sorted(patched.rglob("*.py")):
        rel = new.relative_to(patched)
        if any(part.startswith(".") or part in ("__pycache__", "site-packages") for part in rel.parts):
            continue
        original = root.path / rel
        if not original.is_file():
            continue
        text = read(str(new))
        if text != read(str(original)):
            out[str(original.resolve())] = text
    if not out:
        raise PatchError(f"no .py file under {patched} differs from its counterpart under {root}")
    return out
