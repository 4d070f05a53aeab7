"""Why shipping stopped (`PrError` and its kinds); the CLI maps each kind to an exit code."""

from __future__ import annotations

from torchmend.vcs.forge import AUTH, INVALID, NOT_FOUND, UNREACHABLE

# What went wrong (PrError.kind); the CLI maps each to an exit code.
NOTHING, NOT_A_REPO, DIRTY, NO_REMOTE, PUSH, USAGE = "nothing", "not_a_repo", "dirty", "no_remote", "push", "usage"
KINDS = (NOTHING, NOT_A_REPO, DIRTY, NO_REMOTE, PUSH, USAGE, AUTH, NOT_FOUND, INVALID, UNREACHABLE)


class PrError(Exception):
    """Shipping stopped. `message` says what and what to do; `left` says what was left behind (if anything)."""

    def __init__(self, kind: str, message: str, left: str = "") -> None:
        assert kind in KINDS, kind
        self.kind = kind
        self.message = message
        self.left = left
        super().__init__(message + (f" {left}" if left else ""))
