"""Why a verification refused a change, or what it notes, as typed values: the rounds and the CLI act on a reason's
kind, never on its words (the words are for people)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from torchmend.model import StrEnum


class ReasonKind(StrEnum):
    """What kind of reason a verdict has (a member is its word, as the JSON report writes it)."""

    CRASH = "crash"  # the patched script failed where the original did not, or failed differently
    TIMEOUT = "timeout"  # it ran out of its time budget where the original did not
    ORIGINAL_FAILED = "original_failed"  # the original failed: the patched run cannot be judged against it
    NUMERICS = "numerics"  # the numbers differ (losses, parameters, outputs)
    DISTRIBUTION = "distribution"  # a change of the random stream trains to other numbers in distribution
    COVERAGE = "coverage"  # the patched run compiles less (ops in compiled graphs), or nothing
    SLOWER = "slower"  # the patched run is slower beyond the measured noise band
    MORE_FINDINGS = "more_findings"  # more breaks, recompiles, limit hits or findings than before
    FIXES_NOTHING = "fixes_nothing"  # no problem fewer and no measured gain
    MATH_CHANGED = "math_changed"  # measured: run eagerly, the patched script differs from the original
    MISCOMPILE = "miscompile"  # measured: the patched script compiled differs from its own eager run
    UNEXPLAINED = "unexplained"  # the eager reference could not tell whose difference it is
    NO_GAIN = "no_gain"  # a global compiler setting whose run was not measured faster
    NOT_CONFIRMED = "not_confirmed"  # a global compiler setting not run on the script's own backend
    NOT_HELPING = "not_helping"  # a follow-up change that did not make its findings fewer
    # multi-rank runs: the patched ranks compile different graphs (counts differ between ranks) where the original's
    # agreed (verify/ranks.py)
    RANKS_DIFFER = "ranks_differ"


@dataclass(frozen=True)
class Reason:
    kind: ReasonKind
    text: str
    rank: int | None = None  # multi-rank runs: the rank whose own runs gave it (None: the job's, or one process's)

    def __str__(self) -> str:
        return self.text

    def with_cause(self, cause: str) -> Reason:
        """The same reason, its words followed by what explains it ("; " joined)."""
        return replace(self, text=f"{self.text}; {cause}") if cause else self

    def on_rank(self, rank: int) -> Reason:
        """The same reason, given by one rank's runs of a multi-rank job: its words after "rank N: "."""
        return Reason(self.kind, f"rank {rank}: {self.text}", rank)


def texts(reasons: tuple[Reason, ...] | list[Reason]) -> str:
    """The reasons' words, "; " joined."""
    return "; ".join(r.text for r in reasons)
