"""What an earlier lint of the same project found, kept between runs (as ruff keeps .ruff_cache): per file, what
the quick triage said; per compiling file, its findings and the files its compiled code reached, each with the
size and modification time it had. A file whose stamps all match is not parsed again. Kept in the user's cache
folder, never in the project; any change to torchmend's own lint or analysis code, or to the project's list of
files, starts afresh. `--no-cache` skips it."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from torchmend import __version__
from torchmend.lint.triage import Triage, triage
from torchmend.model import Finding
from torchmend.values import Root

_SCHEMA = 1


def cache_dir() -> Path:
    """$TORCHMEND_CACHE_DIR, else $XDG_CACHE_HOME/torchmend, else ~/.cache/torchmend."""
    if os.environ.get("TORCHMEND_CACHE_DIR"):
        return Path(os.environ["TORCHMEND_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "torchmend"


def _stamp(path: str) -> list[int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_mtime_ns, st.st_size]


def _code_key() -> str:
    """torchmend's version and the stamps of the code lint's answers depend on."""
    here = Path(__file__).resolve().parent.parent
    from torchmend.versions import installed_torch

    parts = [__version__, str(_SCHEMA), f"torch {installed_torch()}"]  # what lint says depends on the release
    # Every module of the package, not only lint's and the codemods': lint's answers also come from the analysis
    # floor, the rules and the model (a checkout's edit there left a warm cache answering as before). Stat-ing
    # them costs milliseconds.
    for path in sorted(here.rglob("*.py")):
        parts.append(f"{path}:{_stamp(str(path))}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


class LintCache:
    def __init__(self, root: Root, project_files: Iterable[Path], enabled: bool = True) -> None:
        self.enabled = enabled
        # os.fsencode: a name that is not valid UTF-8 holds surrogates, which str.encode() refuses
        self.path = cache_dir() / "lint" / (hashlib.sha256(os.fsencode(root.path)).hexdigest()[:20] + ".json")
        listing = hashlib.sha256(b"\n".join(map(os.fsencode, project_files))).hexdigest()
        key = {"code": _code_key() if enabled else "", "files": listing}
        self._data: dict[str, Any] = {"key": key, "triage": {}, "entries": {}}
        self.hits = 0
        if not enabled:
            return
        try:
            with open(self.path, encoding="utf-8") as f:
                old = json.load(f)
        except (OSError, ValueError):
            return
        if isinstance(old, dict) and old.get("key", {}).get("code") == key["code"]:
            self._data["triage"] = old.get("triage", {})
            if old["key"].get("files") == listing:  # a file added or removed may change what an import names
                self._data["entries"] = old.get("entries", {})

    def triage(self, path: Path) -> Triage:
        """The triage of a file (text hint, Python's parser), from the cache when the file is unchanged."""
        name = str(path)
        stamp = _stamp(name)
        kept = self._data["triage"].get(name)
        if self.enabled and kept is not None and kept[0] == stamp:
            return Triage(kept[1], (kept[2][0], kept[2][1]) if kept[2] else None)
        try:
            data = path.read_bytes()
        except OSError as e:
            found = Triage(False, (1, f"cannot read it: {e.strerror or e}"))
        else:
            found = triage(data)
        self._data["triage"][name] = [stamp, found.compiles, list(found.error) if found.error else None]
        return found

    def entry(self, path: Path) -> list[Finding] | None:
        """The findings an earlier run made from this compiling file, when it and every file it reached are
        unchanged."""
        if not self.enabled:
            return None
        kept = self._data["entries"].get(str(path))
        if kept is None or any(_stamp(p) != s for p, s in kept["deps"].items()):
            return None
        self.hits += 1
        return [Finding.from_json(f) for f in kept["findings"]]

    def store(self, path: Path, deps: Iterable[str], findings: list[Finding]) -> None:
        self._data["entries"][str(path)] = {
            "deps": {p: _stamp(p) for p in {str(path), *deps}},
            "findings": [f.to_json() for f in findings],
        }

    def save(self) -> None:
        """Write the cache (atomically; a cache that cannot be written is only a slower next run)."""
        if not self.enabled:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".lint-", suffix=".json")
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(self._data, f)
            os.replace(tmp, self.path)
        except OSError:
            return
