"""Writing fixed sources safely, and undoing it (the ground floor: the CLI, the pipeline, vcs and the
benchmarks all read and write sources through here; it imports nothing of torchmend).

All or nothing: every file is checked first (unchanged since it was scanned, writable, in the project),
then each is written to a temporary file beside it and renamed over it (its mode kept). A failure half
way puts back the files already replaced. Each write leaves an undo record (a JSON file with the texts
before and after, and the same change as a patch) under the state directory, never in the project. A record
may also hold a "report" (Markdown: findings, changes, verification) that `torchmend pr` puts in the pull
request; it is optional, so records written before it existed still work.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path


class WriteRefused(Exception):
    """Nothing was written: the message says which file and why."""


def read_source(path: str) -> str:
    """A source file's text exactly as on disk (newlines untranslated), as UTF-8."""
    data = Path(path).read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise OSError(f"{path} is not UTF-8 ({e.reason} at byte {e.start})") from e


def state_dir() -> Path:
    """Where undo records live: $TORCHMEND_STATE_DIR, else $XDG_STATE_HOME/torchmend, else ~/.local/state/torchmend."""
    if os.environ.get("TORCHMEND_STATE_DIR"):
        return Path(os.environ["TORCHMEND_STATE_DIR"])
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "torchmend"


def undo_dir(project: Path) -> Path:
    key = hashlib.sha256(str(project.resolve()).encode()).hexdigest()[:16]
    return state_dir() / "undo" / f"{project.resolve().name}-{key}"


_STALE = "changed since it was scanned; run torchmend again on the new version"


def _check(path: str, expected: str, project: Path, stale: str) -> None:
    real = os.path.realpath(path)
    if not real.startswith(str(project.resolve()) + os.sep):
        raise WriteRefused(f"{path} is outside the project ({project}); torchmend never edits files there")
    try:
        current = read_source(path)
    except OSError as e:
        raise WriteRefused(f"cannot read {path}: {e}") from e
    if current != expected:
        raise WriteRefused(f"{path} {stale}")
    # The owner's write bit too: root may write anywhere, but a file marked read-only was marked so on purpose.
    if not os.access(path, os.W_OK) or not os.stat(real).st_mode & stat.S_IWUSR:
        raise WriteRefused(f"{path} is read-only; make it writable (chmod u+w) or leave it out with --ignore")
    if not os.access(os.path.dirname(real), os.W_OK | os.X_OK):
        raise WriteRefused(f"cannot create a file in {os.path.dirname(real)} (needed to replace {path} atomically)")


def _replace(path: str, text: str) -> None:
    real = os.path.realpath(path)
    mode = stat.S_IMODE(os.stat(real).st_mode)
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(real)}.", suffix=".torchmend", dir=os.path.dirname(real))
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, real)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_all(changes: dict[str, tuple[str, str]], project: Path, stale: str = _STALE) -> None:
    """Write every (before, after) change, or none. Raises WriteRefused (`stale`: what to say of a file
    whose text is not the expected `before`)."""
    for path, (before, _) in changes.items():
        _check(path, before, project, stale)
    done: list[str] = []
    try:
        for path, (_, after) in changes.items():
            _replace(path, after)
            done.append(path)
    except OSError as e:
        for put_back in done:  # put back what was already replaced
            _replace(put_back, changes[put_back][0])
        raise WriteRefused(f"writing {path} failed ({e.strerror or e}); nothing was changed") from e


@dataclass(frozen=True)
class UndoRecord:
    path: Path  # the JSON record
    project: str
    created: str
    files: dict[str, tuple[str, str]]  # path -> (before, after)
    summary: str = ""  # the fixes, "TM101 train.py:14; TM201 model.py:30"
    report: str | None = None  # Markdown: findings, changes, verification (torchmend.vcs.body.fix_report); optional

    @property
    def patch(self) -> Path:
        return self.path.with_suffix(".patch")


def save_undo(changes: dict[str, tuple[str, str]], project: Path, patch: str, summary: str,
              report: str | None = None) -> UndoRecord:
    """Save the undo record of a write. `report` (optional, Markdown from torchmend.vcs.body.fix_report) is what
    `torchmend pr` puts in the pull request; records without one still work."""
    folder = undo_dir(project)
    folder.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path = folder / f"{stamp}-{len(list(folder.glob('*.json'))):03d}.json"
    created = time.strftime("%Y-%m-%d %H:%M:%S")
    record = {"project": str(project.resolve()), "created": created, "summary": summary,
              "files": {p: {"before": b, "after": a} for p, (b, a) in changes.items()}}
    if report is not None:
        record["report"] = report
    path.write_text(json.dumps(record, indent=1), encoding="utf-8")
    path.with_suffix(".patch").write_text(patch, encoding="utf-8")
    return UndoRecord(path, str(project.resolve()), created, dict(changes), summary, report)


def undo_records(project: Path) -> list[UndoRecord]:
    """The project's undo records, newest last."""
    out = []
    for path in sorted(undo_dir(project).glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        files = {p: (f["before"], f["after"]) for p, f in data["files"].items()}
        out.append(UndoRecord(path, data["project"], data["created"], files, data.get("summary", ""),
                              data.get("report")))
    return out


def undo(record: UndoRecord, project: Path) -> None:
    """Put back the texts from before the fix, if every file is still as the fix left it."""
    reverse = {p: (after, before) for p, (before, after) in record.files.items()}
    write_all(reverse, project, stale=f"was edited after the fix; undo it by hand with the saved patch: "
                                      f"{record.patch}")
    done = record.path.parent / "undone"
    done.mkdir(exist_ok=True)
    record.path.rename(done / record.path.name)
    if record.patch.exists():
        record.patch.rename(done / record.patch.name)
