"""How an arm of a verification failed or stopped early, in words a verdict can use: the exception, the user's
line it names, and how far the run got.

A run that stops early still leaves its losses behind; compared to the other arm's, they only say "3 and 0
losses". The reason is the run's end: an exception (the child's record, with the frames of "from user code:"
that dynamo appends, else its traceback), a kill without a word, a time budget the other arm did not need.
Pure: no torch.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any

from torchmend.profiler.failures import exception_summary
from torchmend.profiler.traceparse import Frame, parse_stack
from torchmend.values import Root
from torchmend.verify.runs import ArmRun

_LIBRARY = ("site-packages", "dist-packages", f"{os.sep}torch{os.sep}", "<frozen", "torchmend")
_ADDRESS = re.compile(r" at 0x[0-9a-f]+")


@dataclass(frozen=True)
class RunFailure:
    """An arm that did not run to its end: how it ended, the exception in one line, and the user's line."""

    arm: str  # before | after
    ended_by: str  # error | exit | killed | lost | timeout | no_torch | internal_error | interrupted
    exception: str  # `Type: message`, PyTorch's hints left out ("" for a timeout)
    path: str  # absolute path of the innermost user frame the failure names ("" when none)
    line: int  # its line, in the text the run executed (the patched text for the after-arm); 0 when none
    code: str  # that line's source as the traceback printed it
    losses: int  # the losses the run recorded before it stopped
    display: str = ""  # path relative to the project

    @property
    def where(self) -> str:
        if not self.path:
            return ""
        return f"{self.display or self.path}:{self.line}" + (f" (`{self.code}`)" if self.code else "")

    @property
    def same_as(self) -> tuple[str, str, str | int]:
        """What two failures are compared by: the exception without object addresses, and the site: its line's code
        when the traceback shows it (a patch moves lines: the same `loss.backward()` is at 36 after it and 37
        before), else the line number."""
        return _ADDRESS.sub("", self.exception), self.path, self.code.strip() or self.line

    def describe(self) -> str:
        """e.g. "AssertionError: Attempt to trace forbidden callable ... at train.py:11 (`...`), after 0 losses"."""
        if self.ended_by == "timeout":
            text = "it ran out of its time budget"
        elif self.exception:
            text = self.exception
        else:
            text = f"it ended by {self.ended_by}"
        if self.where:
            text += f" at {self.where}"
        return f"{text}, after {self.losses} loss{'es' * (self.losses != 1)}"

    def to_json(self) -> dict[str, Any]:
        return {
            "arm": self.arm,
            "ended_by": self.ended_by,
            "exception": self.exception,
            "path": self.path,
            "line": self.line,
            "code": self.code,
            "losses": self.losses,
        }


def _user_frames(text: str) -> list[Frame]:
    """The frames under "from user code:" (dynamo's account of where tracing failed), oldest first."""
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.strip() == "from user code:"), None)
    return parse_stack(lines[start + 1 :]) if start is not None else []


def _is_user(path: str, root: Root | None) -> bool:
    if root is not None:
        return os.path.abspath(path).startswith(str(root.path.resolve()) + os.sep)
    return not any(part in path for part in _LIBRARY)


def failure_site(error: str, traceback: str, root: Root | None = None) -> Frame | None:
    """The innermost frame in the user's code that the failure names: dynamo's "from user code:" frames first
    (where tracing failed), else the Python traceback's. Library frames (torch, site-packages) are passed over."""
    for frames in (_user_frames(error), _user_frames(traceback), parse_stack(traceback.splitlines())):
        mine = [f for f in frames if _is_user(f.file, root)]
        if mine:
            return mine[-1]
    return None


def failure_of(run: ArmRun, root: Root | None = None, stopped_early: bool = False) -> RunFailure | None:
    """How `run` failed (an exception, a non-zero exit, a kill, no torch, an internal error), or, with
    `stopped_early` (the other arm went further), how it stopped: a time budget. None when it ended normally."""
    out = run.outcome
    if not (run.failed or (stopped_early and out.ended_by == "timeout")):
        return None
    end = out.end or {}
    error, traceback = str(end.get("error") or ""), str(end.get("traceback") or "")
    tail = out.output_tail if not error else ""
    exception = "" if out.ended_by == "timeout" else exception_summary(error, tail, traceback, empty="")
    if out.detail and out.ended_by in ("killed", "lost"):  # no exception record: the signal, status, full disk
        exception = out.detail
    elif out.detail:
        exception = f"{exception} ({out.detail})" if exception else out.detail
    site = failure_site(error, traceback or out.output_tail, root)
    display = ""
    if site is not None and root is not None and _is_user(site.file, root):
        display = os.path.relpath(os.path.abspath(site.file), root.path.resolve())
    return RunFailure(
        arm=run.arm,
        ended_by=out.ended_by,
        exception=exception,
        path=os.path.abspath(site.file) if site else "",
        line=site.line if site else 0,
        code=site.code if site else "",
        losses=len(end.get("losses") or []),
        display=display,
    )


# Failures that a change of a known form can cause by design (what its codemod's "Fix safety" gives up), keyed by the
# form (`Proposal.shape`, spelled here as a string: verify does not import the codemods) and the exception's words.
_CAUSED_BY: tuple[tuple[str, re.Pattern[str], str], ...] = (
    (
        "requires-grad-off-under-compile",
        re.compile(r"does not require grad and does not have a grad_fn"),
        "the change makes a fresh tensor without requires_grad under torch.compile, and that tensor was the only "
        "path of gradients to the loss: backward had nothing to differentiate (where the leaf's gradient is wanted, "
        "make the tensor outside the compiled region and pass it in)",
    ),
)


def caused_by(failure: RunFailure, shapes: set[str]) -> str:
    """Why a change of one of these forms made the patched run fail this way, or "" when no known form explains it."""
    return next((why for shape, words, why in _CAUSED_BY if shape in shapes and words.search(failure.exception)), "")
