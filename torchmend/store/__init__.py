"""Reading and writing sources byte for byte, a write-ahead undo journal, and undo (the ground floor: the CLI,
the pipeline, vcs and the benchmarks all write sources through here; it imports only torchmend.sources).

Bytes: sources are read and written in their own encoding (torchmend/sources.py), so the bytes outside the
edits do not change.

All or nothing: every file is checked first (unchanged since it was scanned, writable, in the project, its new
text encodable), then the undo record is written as a journal *before* the first file is replaced: a unique
name created exclusively (a hard link of a fsynced temporary file), state "pending". Each file is written to a
temporary file beside it (mode, owner and group kept) and renamed over it, with SIGINT/SIGTERM/SIGHUP deferred
until every file is replaced or rolled back; then the record is marked "complete". A failure half way puts back
the files already replaced. A pending record whose writer is gone (killed) is an incomplete write: rollback()
puts back the files it had replaced (`torchmend undo` and the next `torchmend fix` do it). Damaged records are
reported and skipped. A record may also hold a "report" (Markdown) that `torchmend pr` puts in the pull request.

One writer at a time: write_fix(), write_all(), undo() and rollback() hold the project's lock (an exclusive flock on
its undo folder in the state folder) from the check "unchanged since the scan" to the last rename, so two fixes
of one project can never both pass the check; the second waits up to $TORCHMEND_LOCK_WAIT seconds (10) and then
finds the file changed (WriteRefused), or gives up with ProjectBusy.

TORCHMEND_TEST_SIGNAL_AFTER_WRITE=N:SIG (e.g. 1:KILL, 1:TERM) exists for the fault tests only
(tests/e2e/test_faults.py): the process sends itself SIG right after replacing its N-th file.

The pieces, re-exported here: state.py (the state folder, the project's lock, WriteRefused and ProjectBusy),
atomic.py (files replaced all or nothing, signals deferred), journal.py (undo records written ahead and read back),
restore.py (undo, rollback, retire).
"""

from __future__ import annotations

from torchmend.store.atomic import deferred_signals, write_all
from torchmend.store.journal import Records, UndoRecord, records, save_undo, undo_records, write_fix
from torchmend.store.restore import retire, rollback, undo, undone_already
from torchmend.store.state import ProjectBusy, WriteRefused, check_state_dir, project_lock, state_dir, undo_dir

__all__ = [
    "ProjectBusy",
    "Records",
    "UndoRecord",
    "WriteRefused",
    "check_state_dir",
    "deferred_signals",
    "project_lock",
    "records",
    "retire",
    "rollback",
    "save_undo",
    "state_dir",
    "undo",
    "undo_dir",
    "undo_records",
    "undone_already",
    "write_all",
    "write_fix",
]
