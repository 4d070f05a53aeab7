"""torchmend as a Python API: the stages behind `torchmend fix`, returning values and yielding events.

    scan()           run the script in a child process under the collector: findings and counts (a Scan)
    scan_trace()     the same from a TORCH_TRACE directory written elsewhere (nothing runs)
    scan_events()    the same from the events of a run already made (`scan --keep-events`)
    select()         the one stage that applies the selection (select, ignore, per-file ignores) and the
                     suppression comments; the scans above apply it to their findings, lint's callers call it
    propose()        a proposed change, or why there is none, for every finding (Fixes)
    review()         the accept/reject loop as a generator (send it y/n/a/d/q); accept_all() for --yes
    verify_rounds()  re-run before/after with the accepted changes served from memory; events per round
    write()          write the changed files all or nothing, and save the undo record

Every stage takes the project (torchmend.project.Project; a plain root path stands for the project there, its
[tool.torchmend] read from that folder) and the resolved settings (torchmend.settings.Settings; None: the project's
configuration alone), so that the CLI and a caller of this module get the same answers. Nothing here prints,
prompts or exits: torchmend/cli parses options, renders these values and maps them to exit codes. The parent process never imports torch (the script and torch live in the child), and importing
this module imports neither libcst nor the runner: each stage imports what it needs. docs/api.md has an
example.

The stages live in modules of one idea each and are re-exported here: inputs.py (the project and settings every
stage takes), scans.py (scan, scan_trace, scan_events, select), fixes.py (propose, review, accept_all), comparison.py
(verify), events.py (what verify_rounds yields), rounds.py (verify_rounds), writes.py (write, patch_bytes).
"""

from __future__ import annotations

from torchmend.pipeline.comparison import RunStarted, verify
from torchmend.pipeline.events import (
    MAX_PROBES,
    MAX_ROUNDS,
    NONE_HELPED,
    REFUSED,
    STILL_UNHELPFUL,
    VERIFIED,
    Dropped,
    Event,
    FollowUp,
    FoundBy,
    Outcome,
    Probe,
    ProxyFailed,
    Refusal,
    Retry,
    Round,
    Stage,
    StageKind,
    Verified,
)
from torchmend.pipeline.fixes import UNSAFE_OPTION, Fixes, accept_all, propose, review
from torchmend.pipeline.scans import Scan, scan, scan_events, scan_trace, select
from torchmend.pipeline.stages import verify_rounds
from torchmend.pipeline.writes import ProjectBusy, WriteRefused, patch_bytes, write
from torchmend.versions import installed_torch  # the API's name for it: docs/api.md

__all__ = [
    "Dropped",
    "Event",
    "FollowUp",
    "Fixes",
    "FoundBy",
    "MAX_PROBES",
    "MAX_ROUNDS",
    "NONE_HELPED",
    "Outcome",
    "Probe",
    "ProjectBusy",
    "ProxyFailed",
    "REFUSED",
    "Refusal",
    "Retry",
    "Round",
    "RunStarted",
    "STILL_UNHELPFUL",
    "Scan",
    "Stage",
    "StageKind",
    "UNSAFE_OPTION",
    "VERIFIED",
    "Verified",
    "WriteRefused",
    "accept_all",
    "installed_torch",
    "patch_bytes",
    "propose",
    "review",
    "scan",
    "scan_events",
    "scan_trace",
    "select",
    "verify",
    "verify_rounds",
    "write",
]
