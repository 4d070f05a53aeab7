"""The accept/reject loop, as a generator the CLI drives (git add -p keys), so it stays free of I/O.

    loop = review(session, proposals)
    ask = next(loop)                 # an Ask: the proposal and its diff against what is accepted so far
    ask = loop.send("y")             # y n a d q; StopIteration carries the list of Decisions

`a` accepts this and the rest of the file without asking, `d` skips the rest of the file, `q` stops
(keeping what was accepted). A proposal that overlaps an accepted one is skipped with the reason.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from dataclasses import dataclass, replace

from torchmend.codemods.base import RANDOM_STREAM, Proposal
from torchmend.codemods.engine import Session
from torchmend.model import StrEnum

KEYS = {
    "y": "apply this change",
    "n": "skip this change",
    "a": "apply this change and every later one in this file",
    "d": "skip this change and every later one in this file",
    "q": "quit: skip this and every later change, keep what was applied",
    "?": "show this help",
}


class Outcome(StrEnum):
    """What became of a proposal in review (a member is its word)."""

    ACCEPTED = "accepted"
    REJECTED = "rejected"
    CONFLICT = "conflict"
    NOT_REVIEWED = "not reviewed"


ACCEPTED, REJECTED, CONFLICT, NOT_REVIEWED = Outcome.ACCEPTED, Outcome.REJECTED, Outcome.CONFLICT, Outcome.NOT_REVIEWED


@dataclass(frozen=True)
class Ask:
    proposal: Proposal
    before: str  # the file with what is accepted so far
    after: str  # ... and this proposal too: exactly what would be written
    index: int  # 1-based
    total: int


@dataclass(frozen=True)
class Decision:
    proposal: Proposal
    outcome: Outcome
    detail: str = ""


def review(session: Session, proposals: Sequence[Proposal]) -> Generator[Ask, str, list[Decision]]:
    decisions: list[Decision] = []
    per_file: dict[str, str] = {}  # path -> "a" or "d", once chosen
    quit_ = False
    for i, p in enumerate(proposals, 1):
        if quit_:
            decisions.append(Decision(p, NOT_REVIEWED))
            continue
        why = session.conflict(p)
        if why:
            decisions.append(Decision(p, CONFLICT, why))
            continue
        key = per_file.get(p.path)
        if key == "a" and p.safety == RANDOM_STREAM:
            key = None  # "the rest of the file" does not take a change of the random stream unseen: it is asked
        if key is None:
            before, after = session.preview(p)
            key = yield Ask(p, before, after, i, len(proposals))
            if key not in KEYS or key == "?":
                raise ValueError(f"review expects one of y/n/a/d/q, got {key!r}")
            if key in ("a", "d"):
                per_file[p.path] = key
        if key in ("y", "a"):
            session.accept(p)
            decisions.append(Decision(p, ACCEPTED))
        elif key == "q":
            decisions.append(Decision(p, NOT_REVIEWED))
            quit_ = True
        else:
            decisions.append(Decision(p, REJECTED))
    return decisions


def accept_all(
    session: Session,
    proposals: Sequence[Proposal],
    unsafe: bool,
    unsafe_flag: str = "--unsafe-fixes",
    random_stream: bool = False,
) -> list[Decision]:
    """--yes: every safe proposal (and the unsafe ones with `unsafe`; without it, an unsafe one's first safe
    fallback in its place), skipping overlaps. `unsafe_flag`: the option named in a refusal (the one spelling,
    pipeline.UNSAFE_OPTION). A change of the random stream (RANDOM_STREAM) needs its own opt-in, `random_stream`
    (--allow-random-stream): `unsafe` alone never applies it."""
    decisions = []
    for p in proposals:
        if p.safety == RANDOM_STREAM:
            if not random_stream:
                decisions.append(
                    Decision(
                        p,
                        REJECTED,
                        "changes the random stream: fix --allow-random-stream applies it (verified over seeds)",
                    )
                )
                continue
        elif p.safety != "safe" and not unsafe:
            # its first safe fallback, when it has one, takes its place (the unsafe form needs the opt-in)
            safe = next((fb for fb in p.fallbacks if fb.safety == "safe"), None)
            if safe is None:
                decisions.append(Decision(p, REJECTED, f"unsafe: add {unsafe_flag} to apply it"))
                continue
            rest = p.fallbacks[p.fallbacks.index(safe) + 1 :]
            p = replace(safe, findings=p.findings, fallbacks=tuple(fb for fb in rest if fb.safety == "safe"))
        why = session.conflict(p)
        if why:
            decisions.append(Decision(p, CONFLICT, why))
            continue
        session.accept(p)
        decisions.append(Decision(p, ACCEPTED))
    return decisions
