"""What `fix` prints for each event of the verification stages: one renderer per event type."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING

from rich.console import Group, RenderableType
from rich.text import Text

from torchmend.pipeline.events import (
    Dropped,
    FollowUp,
    FoundBy,
    Outcome,
    Probe,
    ProxyFailed,
    Retry,
    Round,
    Stage,
    StageKind,
    Verified,
)

if TYPE_CHECKING:
    from torchmend.codemods.base import Proposal

Where = Callable[["Proposal"], str]

# Why nothing is written, by outcome: the words of the outcome line.
NOTHING_WRITTEN = {
    Outcome.VERIFIED: "verified",  # verified, yet no change is left to write
    Outcome.REFUSED: "refused",
    Outcome.NONE_HELPED: "none helped",
    Outcome.STILL_UNHELPFUL: "still unhelpful: a change still removed none of its findings after a second round",
}


@functools.singledispatch
def event_view(event: object, where: Where) -> RenderableType:
    raise TypeError(f"no view for {type(event).__name__}")


@event_view.register(Stage)
def _stage(event: Stage, where: Where) -> RenderableType:
    backend = f"the {event.backend} backend" if event.backend else "the script's own backend"
    runs = f"{event.repeat} run{'s' * (event.repeat != 1)} per arm"
    if event.kind == StageKind.SCREEN:
        return Text(f"screening on {backend} ({runs}): counts, compiled coverage and numerics, not timed", style="dim")
    if not event.timed:
        timed = "not timed: a proxy backend's times are not your training's"
    elif event.repeat > 1:
        timed = "interleaved and timed"
    else:
        timed = "no noise band: speed is not measured"
    return Text(f"judging on {backend} ({runs}, {timed}): what is written is decided here", style="dim")


@event_view.register(ProxyFailed)
def _proxy(event: ProxyFailed, where: Where) -> RenderableType:
    return Text(
        f"the {event.backend} backend failed the original script where the {event.instead} backend runs it: that is "
        f"PyTorch's failure, not your script's ({event.exception}); screening on {event.instead} instead",
        style="yellow",
    )


@event_view.register(Round)
def _round(event: Round, where: Where) -> RenderableType:
    from torchmend.cli.fixview import findings_at, verification_view

    parts: list[RenderableType] = [verification_view(event.verification)]
    for e in event.effects:
        what = findings_at(e.removed or e.remaining)
        if e.reduced and not e.removed:
            fewer = ", ".join(f"{f.count} → {n}" for f, n in e.reduced)
            what = findings_at(tuple(f for f, _ in e.reduced))
            parts.append(Text(f"  ✓ {e.proposal.rule} change: {what} recorded fewer times ({fewer})", style="green"))
        elif e.helped:
            parts.append(Text(f"  ✓ {e.proposal.rule} change removed {what}", style="green"))
        else:
            parts.append(Text(f"  ✗ {e.proposal.rule} change did not remove {what}: not written", style="red"))
    return Group(*parts)


@event_view.register(FollowUp)
def _follow_up(event: FollowUp, where: Where) -> RenderableType:
    from torchmend.cli.fixview import findings_at

    lines = [
        Text(f"  + the patched run still shows {findings_at(p.findings)}: adding {p.why}", style="yellow")
        for p in event.added
    ]
    return Group(*lines, Text("Verifying again with the follow-up change.", style="dim"))


@event_view.register(Retry)
def _retry(event: Retry, where: Where) -> RenderableType:
    return Text("Verifying again without the changes that did not help.", style="dim")


@event_view.register(Probe)
def _probe(event: Probe, where: Where) -> RenderableType:
    which = ", ".join(f"{p.rule} at {where(p)}" for p in event.changes)
    return Text(f"  probe: {which} alone: {event.verification.word}", style="dim")


@event_view.register(Dropped)
def _dropped(event: Dropped, where: Where) -> RenderableType:
    lines: list[RenderableType] = []
    said: tuple[object, ...] = ()
    for r in event.refused:
        why = "the same reasons" if r.reasons == said else "; ".join(map(str, r.reasons))
        said = r.reasons
        verb = "not written" if r.found_by == FoundBy.GLOBAL_RULE else f"refused ({r.found_by})"
        lines.append(Text(f"  ✗ {r.proposal.rule} change at {where(r.proposal)} {verb}: {why}", style="red"))
        if r.fallback is not None:
            lines.append(Text(f"  ↻ trying its next candidate instead: {r.fallback.why}", style="yellow"))
    if all(r.found_by == FoundBy.FOLLOW_UP for r in event.refused):
        lines.append(Text("Keeping the verified round before it; its verdict:", style="dim"))
    elif event.again:
        again = "" if event.ahead else " again"
        lines.append(Text(f"Verifying the other changes{again} without these.", style="dim"))
    return Group(*lines)


def outcome_view(done: Verified) -> Text:
    """The one outcome of the verification stages, last: what is written and on what word, or why nothing is."""
    from torchmend.verify.compare import Verdict

    v = done.verification
    n = len(done.accepted)
    own = "the script's own backend"
    where = f"on {v.backend or own}" + (f" ({v.device})" if v.device else "")
    only = f"; verified on {v.backend} only, not on {v.unconfirmed}" if v.unconfirmed else ""
    if done.outcome == Outcome.VERIFIED and n:
        style = "bold green" if v.verdict == Verdict.IMPROVED else "green"
        return Text(f"outcome: {n} change{'s' * (n != 1)} to write, {v.word} {where}{only}", style=style)
    return Text(f"outcome: nothing to write ({NOTHING_WRITTEN[done.outcome]}){only}", style="bold yellow")
