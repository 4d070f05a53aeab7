"""Ctrl-C, SIGTERM and SIGHUP handled alike: each ends torchmend through the code that is running, as an exception
(KeyboardInterrupt for SIGINT, Stopped for the others), so every phase can stop its child and remove its temporary
folders on the way out; the command exits 128 + the signal's number (130, 143, 129: docs/exit-codes.md).

SIGTERM is what `timeout`, CI runners and `docker stop` send; SIGHUP comes when the terminal closes. Python turns
only SIGINT into an exception by itself: install() does the same for the other two (not where they are ignored,
as `nohup` leaves SIGHUP: that choice is the user's).
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Stopped(BaseException):
    """SIGTERM or SIGHUP arrived. A BaseException, like KeyboardInterrupt: `except Exception` lets it through."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


STOPPING = (KeyboardInterrupt, Stopped)  # what to catch to clean up on any of the three signals


def _raise(signum: int, _frame: FrameType | None) -> None:
    raise Stopped(signum)


def install() -> None:
    """SIGTERM and SIGHUP raise Stopped (where they are not ignored); call once, in the main thread."""
    for s in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(s) == signal.SIG_DFL:
            signal.signal(s, _raise)


def exit_code(exc: BaseException) -> int:
    """The exit status for a stop: 128 + the signal's number, as a shell reports a process the signal ended."""
    return 128 + (exc.signum if isinstance(exc, Stopped) else signal.SIGINT)


def describe(exc: BaseException) -> str:
    return f"stopped by {signal.Signals(exc.signum).name}" if isinstance(exc, Stopped) else "interrupted (Ctrl-C)"


@contextlib.contextmanager
def shielded() -> Iterator[None]:
    """Ignore further stop signals while the block cleans up after the first one (a second Ctrl-C, or the
    SIGTERM of `timeout` after SIGINT, must not leave a child running)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    # None: a handler not set from Python, which cannot be put back: left alone.
    old = {s: h for s in STOP_SIGNALS if (h := signal.getsignal(s)) not in (None, signal.SIG_IGN)}
    for s in old:
        signal.signal(s, lambda _n, _f: None)
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)
