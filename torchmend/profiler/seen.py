"""What one group of a run's events saw (a graph break, a recompile, the recompile limit, an eager fallback), as a
typed record per kind, and how each becomes a `Finding`. findings.py folds the events into these groups."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Union

from torchmend import rules
from torchmend.model import Finding, Kind, Location, Pattern, Severity, Where
from torchmend.profiler.classify import classify_guard, reason_for_break, reason_for_guard
from torchmend.profiler.failures import EagerFallback, reason_for_eager
from torchmend.profiler.traceparse import Frame, GraphBreak, GuardFailure
from torchmend.profiler.userframe import generated_note, is_generated, project_frame, resumed_at

if TYPE_CHECKING:
    from torchmend.profiler.findings import Places

PROJECT, LIBRARY = Where.PROJECT, Where.LIBRARY


# --- what one group of events saw: a typed record per kind, read back by attribute ---------------------------


@dataclass(frozen=True)
class BreakSeen:
    """A graph break at a line."""

    gb: GraphBreak
    site: Frame
    where: str
    root: Frame | None  # the compiled frame the break is in
    generated: Frame | None  # the generated code it was moved out of
    inside: Frame | None = None  # filed at the project line that logged: the library line the break was at


@dataclass(frozen=True)
class RecompileSeen:
    """A guard that failed, so the frame compiled again."""

    guard: GuardFailure
    site: Frame
    where: str
    call_site: Location | None
    compiled: Frame | None
    generated: Frame | None
    entry: Location | None = None  # Finding.entry


@dataclass(frozen=True)
class LimitSeen:
    """A frame that reached the recompile limit (it runs eagerly from then on)."""

    guard: GuardFailure  # the last guard that failed
    site: Frame
    where: str
    call_site: Location | None
    compiled: Frame | None
    fail: str  # the compile's fail reason (it names the limit)
    entry: Location | None = None  # Finding.entry


@dataclass(frozen=True)
class EagerSeen:
    """A frame the backend failed on, so the whole function runs eagerly."""

    fallback: EagerFallback
    site: Frame
    where: str
    call_site: Location | None
    compiled: Frame | None
    check: dict[str, Any] | None  # did the script's own backend compile it (BACKEND_CHECK)?
    user: Location | None  # the innermost project frame of the failure


Seen = Union[BreakSeen, RecompileSeen, LimitSeen, EagerSeen]


@dataclass
class Group:
    first: Seen
    count: int = 0
    frames: Counter[str] = field(default_factory=Counter)  # compiled frame id -> how often
    depths: set[int] = field(default_factory=set)  # graph breaks: how many calls deep each record found it


def finding_of(
    places: Places, key: tuple[str, str, int], grp: Group, hit_limit: bool, breaks_at: dict[tuple[str, str], list[int]]
) -> Finding:
    code, path, line = key
    seen = grp.first
    loc = places.location(Frame(path, line, seen.site.function, seen.site.code))
    if isinstance(seen, BreakSeen):
        return replace(
            _break_finding(places, code, loc, seen, grp.count, breaks_at), nested=max(len(grp.depths) - 1, 0)
        )
    # A compiled frame of generated code (a dataclass's `__init__` compiled on its own) has no file to read.
    compiled = places.location(seen.compiled) if seen.compiled and not is_generated(seen.compiled.file) else None
    if isinstance(seen, EagerSeen):
        return _eager_finding(code, loc, seen, grp.count, compiled)
    return _guard_finding(places, code, loc, seen, grp, hit_limit, compiled)


def _break_finding(
    places: Places,
    code: str,
    loc: Location,
    seen: BreakSeen,
    count: int,
    breaks_at: dict[tuple[str, str], list[int]],
) -> Finding:
    rule, gb = rules.BY_CODE[code], seen.gb
    user_frame = project_frame(places, gb.user_stack, seen.root, breaks_at) if seen.where != PROJECT else None
    return Finding(
        rule=code,
        kind=Kind(rule.kind),
        title=rule.title,
        file=loc.file,
        line=loc.line,
        function=loc.function or gb.function,
        path=loc.path,
        where=Where(seen.where),
        reason=reason_for_break(gb)
        + (generated_note(seen.generated) if seen.generated else "")
        + (inside_note(places, seen.inside) if seen.inside else ""),
        count=count,
        severity=Severity.INFO if rule.informational else Severity.FIX,
        gb_id=gb.gb_id,
        gb_type=gb.gb_type,
        docs_url=gb.docs_url,
        code=seen.site.code,
        user_frame=user_frame,
    )


def _eager_finding(code: str, loc: Location, seen: EagerSeen, count: int, compiled: Location | None) -> Finding:
    rule, fb = rules.BY_CODE[code], seen.fallback
    function = compiled.function if compiled else loc.function
    return Finding(
        rule=code,
        kind=Kind(rule.kind),
        title=rule.title,
        file=loc.file,
        line=loc.line,
        function=function,
        path=loc.path,
        where=Where(seen.where),
        reason=reason_for_eager(fb, function, seen.check),
        count=count,
        severity=Severity.FIX,
        gb_id=fb.gb_id,
        docs_url=fb.docs_url,
        code=seen.site.code,
        user_frame=(seen.user or seen.call_site) if seen.where != PROJECT else None,
        call_site=seen.call_site,
        compiled_function=compiled,
    )


def _guard_finding(
    places: Places,
    code: str,
    loc: Location,
    seen: RecompileSeen | LimitSeen,
    grp: Group,
    hit_limit: bool,
    compiled: Location | None,
) -> Finding:
    rule, g, where = rules.BY_CODE[code], seen.guard, seen.where
    user_frame = (resumed_at(places, seen.compiled) or seen.call_site) if where != PROJECT else None
    common: dict[str, Any] = dict(
        file=loc.file,
        line=loc.line,
        function=loc.function,
        path=loc.path,
        where=Where(where),
        count=grp.count,
        variable=g.variable,
        guard=g.guard,
        hint=g.hint,
        code=seen.site.code,
        user_frame=user_frame,
        call_site=seen.call_site,
        compiled_function=compiled,
        entry=seen.entry,
    )
    if isinstance(seen, LimitSeen):
        limit = re.search(r"\(currently set to (\d+)\)", seen.fail)
        reason = (
            f"recompile limit ({limit.group(1) if limit else '?'}) reached; last guard failure: {g.guard or 'unknown'}"
        )
        # The limit is the symptom; the guard that kept failing is the cause, and its rule's codemod the fix.
        cause = classify_guard(g) if g.guard else None
        return Finding(
            rule=code,
            kind=Kind(rule.kind),
            title=rule.title,
            reason=reason,
            severity=Severity.FIX,
            pattern=Pattern.LIMIT,
            cause=cause,
            **common,
        )
    # A guard that failed once is a one-time recompile even in a frame that later hit the limit through
    # another guard (an optimizer's state created on its first step beside a float lr that storms). It is
    # counted per frame: one change of the value recompiles a function and each of its resume frames.
    once = max(grp.frames.values()) == 1
    pattern = Pattern.ONCE if once else (Pattern.LIMIT if hit_limit else Pattern.STORM)
    if once:
        common["count"] = 1
    if pattern == Pattern.ONCE and where == LIBRARY and code in ("TM299", "TM207"):
        code, rule = "TM902", rules.BY_CODE["TM902"]
    severity = Severity.INFO if rule.informational else (Severity.FIX if pattern != Pattern.ONCE else Severity.NOTE)
    return Finding(
        rule=code,
        kind=Kind(rule.kind),
        title=rule.title,
        reason=reason_for_guard(g) + (generated_note(seen.generated) if seen.generated else ""),
        severity=severity,
        pattern=pattern,
        **common,
    )


def inside_note(places: Places, inner: Frame) -> str:
    where = f"{places.display(inner.file)}:{inner.line}"
    return (
        f" (inside the logging library, at {where}: the break is this logging call's; move the call out of the "
        "compiled function, or into a helper decorated with @torch.compiler.disable)"
    )
