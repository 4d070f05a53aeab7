"""write() and patch_bytes(): the accepted changes written all or nothing, journaled (torchmend.store)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from torchmend import sources, store
from torchmend.pipeline.inputs import root_of
from torchmend.project import Project

if TYPE_CHECKING:  # heavy (libcst, the runner) or annotations only: imported by the stage that needs it
    from torchmend.pipeline.fixes import Fixes


WriteRefused = store.WriteRefused  # raised by write(): nothing was written, the message says why
ProjectBusy = store.ProjectBusy  # a WriteRefused: another torchmend held the project's lock too long


def write(fixes: Fixes, root: Project | Path, report: str | None = None) -> store.UndoRecord:
    """Write every file the accepted changes touch, all or nothing (raises WriteRefused, and then nothing was
    written), journaled: the undo record exists before the first file is replaced (store.write_fix; `torchmend
    undo` puts the files back from it; `record.patch` is the diff). `report` (Markdown, e.g. torchmend.vcs.body.fix_report) is kept in the record for `torchmend pr`."""
    summary = "; ".join(f"{p.rule} {fixes.where(p)}" for p in fixes.session.accepted)
    return store.write_fix(fixes.changes(), root_of(root), patch_bytes(fixes), summary, report=report)


def patch_bytes(fixes: Fixes) -> bytes:
    """Fixes.diff() as `git apply` and `patch -p1` need it against the files on disk: each file's part in that
    file's encoding (PEP 263 coding line, BOM), what --diff prints and the undo record keeps."""
    from torchmend.codemods.engine import unified_diff

    def diff_of(path: str) -> Callable[[str, str], str]:
        return lambda b, a: unified_diff(fixes.session.display(path), b, a)

    return b"".join(
        sources.encode_diff(diff_of(path), before, after, sources.source_encoding(path))
        for path, (before, after) in fixes.changes().items()
    )
