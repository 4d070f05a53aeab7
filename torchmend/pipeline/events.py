"""What verify_rounds() yields: a Stage as each stage begins (screening, judging), ProxyFailed when the screening
backend fails the original, a Round per round, Probes while bisecting, Dropped after a refusal, a Retry before the
retry, and a Verified last."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Union

from torchmend.model import StrEnum

if TYPE_CHECKING:  # heavy (libcst, the runner): imported by the stage that needs it
    from torchmend.codemods.base import Proposal
    from torchmend.verify.attribution import ChangeEffect
    from torchmend.verify.compare import Verification
    from torchmend.verify.reasons import Reason


class FoundBy(StrEnum):
    """How a refused change was singled out (a member is its words)."""

    FAILING_LINE = "the failure names its line"
    ONLY_CHANGE = "the only change"
    BISECTION = "bisection"
    TOGETHER = "refused only together"
    FOLLOW_UP = "a follow-up round"
    GLOBAL_RULE = "a global compiler setting"  # withheld: not confirmed, or not measured faster


class StageKind(StrEnum):
    SCREEN = "screen"  # one run per arm on a quick backend: counts, coverage, numerics; no timing
    JUDGE = "judge"  # the runs whose verdict is written: the script's own backend (or the one named), timed


@dataclass(frozen=True)
class Stage:
    """A verification stage begins: which backend its runs use (None: the script's own) and runs per arm."""

    kind: StageKind
    backend: str | None
    repeat: int
    timed: bool = False  # whether its verdict judges speed (never on a proxy backend, never while screening)


@dataclass(frozen=True)
class ProxyFailed:
    """The screening backend failed the original script where the script's own (or eager) runs: PyTorch's failure,
    not the user's. Screening goes on with `instead`."""

    backend: str
    exception: str
    instead: str


@dataclass(frozen=True)
class Round:
    """One verification round: the verdict and, unless it refused, what each accepted change did."""

    number: int  # 1, 2, ...
    verification: Verification
    effects: tuple[ChangeEffect, ...]  # empty when the verdict is a refusal


@dataclass(frozen=True)
class Retry:
    """The changes that removed none of their findings were withdrawn; the rest is verified once more."""

    withdrawn: tuple[Proposal, ...]


@dataclass(frozen=True)
class FollowUp:
    """After a verified round, the patched run's own findings asked for a safe last resort the original's did not get
    (a break the changes left or made, recorded again in each frame it bubbled up through: the disabled helper of
    the host-random fix): these changes are added and everything is verified again. Refused, or not helping, they
    are withdrawn and the round before stands."""

    added: tuple[Proposal, ...]


@dataclass(frozen=True)
class Probe:
    """While looking for the change a refusal is due to: `changes` alone, verified (the after-arm only)."""

    changes: tuple[Proposal, ...]
    verification: Verification


@dataclass(frozen=True)
class Refusal:
    """A change verification refused, how it was singled out, and why (what its verdict said)."""

    proposal: Proposal
    found_by: FoundBy
    reasons: tuple[Reason, ...]
    fallback: Proposal | None = None  # the next candidate for its findings, tried in its place


@dataclass(frozen=True)
class Dropped:
    """The changes a refusal was due to were withdrawn (their fallbacks, if any, take their place); the rest is
    verified again."""

    refused: tuple[Refusal, ...]
    again: bool = True  # whether changes are left to verify again
    ahead: bool = False  # withdrawn before the first run: the rest is verified without them, not again


class Outcome(StrEnum):
    """How the verification stages ended (a member is its word, as --verdict-json writes it)."""

    VERIFIED = "verified"  # write the accepted changes
    REFUSED = "refused"  # the verdict refused the changes
    NONE_HELPED = "none_helped"  # every change was withdrawn
    STILL_UNHELPFUL = "still_unhelpful"  # after the second round a change still removed none of its findings


VERIFIED, REFUSED, NONE_HELPED, STILL_UNHELPFUL = (
    Outcome.VERIFIED,
    Outcome.REFUSED,
    Outcome.NONE_HELPED,
    Outcome.STILL_UNHELPFUL,
)
MAX_ROUNDS = 6  # verification rounds (refusals recovered from, and the one retry without unhelpful changes)
MAX_PROBES = 6  # runs spent singling out the changes one refusal is due to


@dataclass(frozen=True)
class Verified:
    """The last event of verify_rounds(). `outcome`: an Outcome (verified: write `accepted`). `tried`: every
    change refused on the way, and why."""

    outcome: Outcome
    accepted: tuple[Proposal, ...]  # what is left accepted in the session
    verification: Verification  # the last round's
    tried: tuple[Refusal, ...] = ()
    # the verdict is that of the round before a follow-up round that was dropped (printed again last)
    kept_earlier: bool = False

    @property
    def ok(self) -> bool:
        return self.outcome == VERIFIED


Event = Union[Stage, ProxyFailed, Round, Retry, Probe, Dropped, FollowUp, Verified]
