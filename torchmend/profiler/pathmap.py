"""Map source paths recorded on another machine onto the local checkout.

A trace from a cluster names files as they were there (/home/alice/proj/train.py). `--path-map OLD=NEW`
rewrites the prefix; without one, a guess: the longest tail of the recorded path that names a file under
the local project root (/home/alice/proj/src/m.py -> ROOT/src/m.py gives /home/alice/proj=ROOT).
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from torchmend.profiler.events import COMPILE_END, COMPILE_START
from torchmend.values import Root

_LIBRARY_RE = re.compile(r"(^<)|[/\\](site|dist)-packages[/\\]|[/\\]lib[/\\]python\d+(\.\d+)?[/\\]")


class PathMapError(ValueError):
    pass


@dataclass(frozen=True)
class Mapping:
    old: str
    new: str
    guessed: bool = False
    files: int = 0  # how many recorded files it maps (guesses only)

    def __str__(self) -> str:
        return f"{self.old}={self.new}"


def parse(items: Iterable[str]) -> list[Mapping]:
    maps = []
    for item in items:
        old, sep, new = item.partition("=")
        if not sep or not old or not new:
            raise PathMapError(
                f"--path-map wants OLD=NEW (a path prefix on the machine that ran the job, and "
                f"where that is here), not {item!r}"
            )
        maps.append(Mapping(old.rstrip("/") or "/", os.path.abspath(os.path.expanduser(new)).rstrip("/") or "/"))
    return maps


def recorded_paths(events: Iterable[dict[str, Any]]) -> set[str]:
    """The source files the events name: compiled code and the frames on each compile's stack."""
    paths: set[str] = set()
    for ev in events:
        if ev.get("ev") == COMPILE_START:
            paths.update(str(f[0]) for f in ev.get("stack", []))
        elif ev.get("ev") == COMPILE_END:
            for key in ("co_filename", "fail_user_frame_filename"):
                if ev.get(key):
                    paths.add(str(ev[key]))
    return paths


def _under(path: str, prefix: str) -> bool:
    return path == prefix or path.startswith(prefix.rstrip("/") + "/")


def guess(paths: Iterable[str], root: Root, known: Sequence[Mapping] = ()) -> list[Mapping]:
    """Mappings for recorded user files that do not exist here, from the longest tail found under root."""
    votes: Counter[str] = Counter()
    folder = root.path.resolve()
    for p in sorted(set(paths)):
        if _LIBRARY_RE.search(p) or not p.startswith("/") or os.path.exists(p):
            continue
        if any(_under(p, m.old) for m in known):
            continue
        parts = PurePosixPath(p).parts
        for i in range(1, len(parts)):
            if folder.joinpath(*parts[i:]).is_file():
                votes[str(PurePosixPath(*parts[:i]))] += 1
                break
    return [Mapping(old, str(folder), guessed=True, files=n) for old, n in votes.most_common()]


def apply(value: Any, maps: list[Mapping]) -> Any:
    """Rewrite every path prefix in strings, lists and dicts (graph-break and guard texts name files too)."""
    if not maps:
        return value
    if isinstance(value, str):
        ordered = sorted(maps, key=lambda m: -len(m.old))
        pattern = re.compile("|".join(re.escape(m.old.rstrip("/") + "/") for m in ordered))
        new = {m.old.rstrip("/") + "/": m.new.rstrip("/") + "/" for m in ordered}
        return pattern.sub(lambda hit: new[hit.group(0)], value)
    if isinstance(value, list):
        return [apply(v, maps) for v in value]
    if isinstance(value, dict):
        return {k: apply(v, maps) for k, v in value.items()}
    return value


def unmapped(paths: Iterable[str], maps: list[Mapping]) -> list[str]:
    """Recorded user files that are still not found here after mapping (findings there cannot be fixed)."""
    missing = []
    for p in sorted(set(paths)):
        if _LIBRARY_RE.search(p) or not p.startswith("/"):
            continue
        if not os.path.exists(apply(p, maps)):
            missing.append(p)
    return missing


def is_library_path(path: str) -> bool:
    return bool(_LIBRARY_RE.search(path))
