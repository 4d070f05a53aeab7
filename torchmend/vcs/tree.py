"""The files the fix wrote, as the pull request will commit them: read in their own encoding, each checked inside
the repository, still as the fix left it and committed as the fix found it, and nothing else changed."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from torchmend.sources import Encoding, decode
from torchmend.vcs import body as md
from torchmend.vcs.errors import DIRTY, NOT_A_REPO, NOTHING, PrError
from torchmend.vcs.git import Git

if TYPE_CHECKING:
    from torchmend.store import UndoRecord


def read_file(path: str) -> tuple[bytes, str, Encoding] | None:
    """A source's bytes, its text and its encoding, read as Python reads it (PEP 263 coding line, BOM)."""
    try:
        data = Path(path).read_bytes()
        return (data, *decode(data, path))
    except OSError:  # sources.NotSource too
        return None


def files_to_commit(
    git: Git, top: Path, current: str | None, record: UndoRecord
) -> tuple[dict[str, bytes], dict[str, str]]:
    """The fix's files (path relative to the repository -> bytes to commit, and -> diff), each checked: inside the
    repository, still as the fix left it, committed as the fix found it, and nothing else changed in the tree."""
    top_real = os.path.realpath(top)
    files: dict[str, bytes] = {}
    diffs: dict[str, str] = {}
    already: list[str] = []
    for path, (before, after) in sorted(record.files.items()):
        real = os.path.realpath(path)
        rel = os.path.relpath(real, top_real)
        if rel == os.curdir or rel.startswith(os.pardir + os.sep) or rel == os.pardir:
            raise PrError(NOT_A_REPO, f"{path} (changed by the fix) is outside the git repository at {top}.")
        rel = rel.replace(os.sep, "/")
        # Compared as text, committed as bytes: in the file's own encoding (a coding line, a BOM), as on disk.
        read = read_file(path)
        if read is None or read[1] != after:
            raise PrError(
                DIRTY,
                f"{rel} was edited after the fix (or the fix was undone): the pull request would "
                "not hold what torchmend wrote and verified. Run `torchmend fix` again on the current "
                "version, then `torchmend pr`.",
            )
        after_bytes, before_bytes = read[0], read[2].encode(before)
        in_head = git.blob_of("HEAD", rel)
        if in_head is None:
            raise PrError(
                DIRTY,
                f"{rel} is not in the last commit (HEAD): commit it as it was before the fix "
                "first, so the pull request holds torchmend's change alone.",
            )
        if in_head == git.hash_text(rel, after_bytes):
            already.append(rel)
            continue
        if in_head != git.hash_text(rel, before_bytes):
            raise PrError(
                DIRTY,
                f"{rel} had changes of yours that were not committed when the fix ran: the "
                "commit would carry them too. Commit your own changes to it first (`git add -p`, "
                "leaving torchmend's out), then run `torchmend pr` again.",
            )
        files[rel] = after_bytes
        diffs[rel] = md.unified_diff(rel, before, after)
    if already and not files:
        raise PrError(
            NOTHING,
            f"the fix is already committed on {current or 'HEAD'} "
            f"({', '.join(already)}): there is nothing left for torchmend to commit. Push that branch "
            "and open the pull request yourself.",
        )
    if already:
        raise PrError(
            DIRTY,
            f"{', '.join(already)} already committed with the fix while "
            f"{', '.join(files)} is not: commit or reset them together, then run `torchmend pr` again.",
        )
    others = [s for s in git.status() if s.path not in files]
    if others:
        shown = ", ".join(f"{s.path} ({s.code.strip()})" for s in others[:20])
        more = f" and {len(others) - 20} more" if len(others) > 20 else ""
        raise PrError(
            DIRTY,
            f"the working tree has changes torchmend did not make: {shown}{more}. Commit or "
            "stash them first (`git stash`); only the files the fix wrote may differ from HEAD.",
        )
    return files, diffs
