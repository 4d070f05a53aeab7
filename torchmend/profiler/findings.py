"""From raw events to deduplicated findings at the user's source lines, and the run summary.

Pure: takes the event list of a run, returns frozen, JSON-serialisable records.
"""

from __future__ import annotations

import linecache
import os
import re
from collections import Counter, OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from torchmend import rules
from torchmend.model import EndedBy, Finding, Kind, Location, Pattern, Severity, Summary, Where
from torchmend.profiler.classify import (
    classify_break,
    classify_guard,
    logging_line,
    reason_for_break,
    reason_for_guard,
)
from torchmend.profiler.events import (
    BACKEND_CHECK,
    COMPILE_END,
    COMPILE_START,
    END,
    GRAPH_BREAK,
    OWN_MARKER,
    START,
    STEP,
)
from torchmend.profiler.failures import (
    EagerFallback,
    compiled_save_finding,
    dynamo_crash_finding,
    eager_fallback,
    is_backend_failure_break,
    reason_for_eager,
)
from torchmend.profiler.hotspots import parse_version, with_library_advice
from torchmend.profiler.parallel import mark_wrapper_breaks
from torchmend.profiler.pathmap import is_library_path
from torchmend.profiler.ranks import merge_ranks
from torchmend.profiler.traceparse import (
    Frame,
    GraphBreak,
    GuardFailure,
    parse_graph_break,
    parse_recompile_reason,
    resolve_short_path,
    user_function_name,
)
from torchmend.profiler.userframe import (
    break_lines,
    generated_note,
    is_generated,
    out_of_generated_break,
    out_of_generated_guard,
    project_frame,
    resumed_at,
)

PROJECT, LIBRARY, OUTSIDE = Where.PROJECT, Where.LIBRARY, Where.OUTSIDE


class Places:
    """Decides whether a file is the user's, a library's, or elsewhere, and names it for humans."""

    def __init__(self, project_root: Path, library_roots: Iterable[str]) -> None:
        self.root = project_root.resolve()
        self.library_roots = [os.path.realpath(r) for r in library_roots]

    def where(self, path: str) -> str:
        if path.startswith("<"):
            return LIBRARY  # <frozen runpy>, <string>, ...
        real = os.path.realpath(path)
        if any(real == r or real.startswith(r + os.sep) for r in self.library_roots):
            return LIBRARY
        if is_library_path(real) or is_library_path(path):  # also a library path from another machine
            return LIBRARY
        if real.startswith(str(self.root) + os.sep):
            return PROJECT
        return OUTSIDE

    def absolute(self, path: str) -> str:
        if path.startswith("<") or os.path.isabs(path):
            return path
        return str((self.root / path).resolve()) if (self.root / path).exists() else path

    def display(self, path: str) -> str:
        real = os.path.realpath(path)
        if self.where(path) == PROJECT:
            return os.path.relpath(real, self.root)
        return path

    def location(self, frame: Frame) -> Location:
        path = self.absolute(frame.file)
        code = frame.code or (linecache.getline(path, frame.line).strip() if os.path.isabs(path) else "")
        return Location(
            file=self.display(path), line=frame.line, function=user_function_name(frame.function), path=path, code=code
        )

    def innermost_user(self, frames: Iterable[Frame]) -> Location | None:
        for f in reversed(list(frames)):
            if self.where(self.absolute(f.file)) == PROJECT:
                return self.location(f)
        return None


@dataclass
class _Group:
    first: dict[str, Any]
    count: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


def analyse(
    events: list[dict[str, Any]], project_root: Path, ended_by: str = "finished", wall_seconds: float = 0.0
) -> tuple[list[Finding], Summary]:
    """Findings and summary of one run. Events tagged with a rank (torchrun, or a trace with ranks) are
    analysed rank by rank and merged: see merge_ranks."""
    ranks = sorted({e["rank"] for e in events if e.get("rank") is not None})
    if ranks:
        per_rank = {
            r: _analyse_one([e for e in events if e.get("rank") == r], project_root, ended_by, wall_seconds)
            for r in ranks
        }
        return merge_ranks(per_rank)
    return _analyse_one(events, project_root, ended_by, wall_seconds)


def separate_resets(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """torch._dynamo.reset() starts compile ids again at 0/0: give the compiles after each reset ids of their
    own (`1.0/0`), so a function compiled after a reset is never taken for the one compiled before it."""
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    epoch = 0
    for ev in events:
        cid = ev.get("compile_id")
        if ev.get("ev") == COMPILE_START and cid is not None:
            if cid in seen:
                epoch, seen = epoch + 1, set()
            seen.add(cid)
        out.append({**ev, "compile_id": f"{epoch}.{cid}"} if epoch and cid is not None else ev)
    return out


def _known_files(events: list[dict[str, Any]]) -> list[str]:
    """Every absolute source path the run named (stacks, compiled code): what a shortened guard path is matched to."""
    files: dict[str, None] = {}
    for ev in events:
        for f in (*ev.get("stack", ()), *ev.get("callers", ())):
            files[f[0]] = None
        if ev.get("co_filename"):
            files[ev["co_filename"]] = None
    return [f for f in files if f.startswith("/")]


def _analyse_one(
    events: list[dict[str, Any]], project_root: Path, ended_by: str = "finished", wall_seconds: float = 0.0
) -> tuple[list[Finding], Summary]:
    events = separate_resets(events)
    start = next((e for e in events if e.get("ev") == START), {})
    places = Places(project_root, start.get("library_roots", []))
    torch_version = parse_version(start.get("torch"))  # what the break ids mean (gbids.py); None: not said
    known_files = _known_files(events)
    starts: dict[str, list[Frame]] = {}  # compile id -> the Python stack when it began compiling
    callers: dict[str, list[Frame]] = {}  # compile id -> the live stack of callers (no torch frames)
    traced_callers: dict[str, set[tuple[str, int]]] = {}  # compile id -> callers' lines that ran inside compiled code
    code_of_frame: dict[str, Frame] = {}  # frame id -> the compiled code object's location
    groups: OrderedDict[tuple[str, str, int], _Group] = OrderedDict()
    compiles = graphs = breaks = recompiles = limit_hits = 0
    compile_s = 0.0
    frames: set[str] = set()
    steps = 0

    limited_frames: set[str] = set()
    failure: Finding | None = None  # TM107: compiling broke the script itself; TM112: dynamo crashed in it
    cached_sites: dict[str, Frame] = {}  # TM208: cached tensor attribute -> the line its `is None` guard names
    step_times: list[float] = []

    def add(key: tuple[str, str, int], payload: dict[str, Any], frame_id: str = "") -> None:
        grp = groups.setdefault(key, _Group(payload))
        grp.count += 1
        per_frame = grp.extra.setdefault("frames", Counter())
        per_frame[frame_id] += 1

    def add_break(gb: GraphBreak, cid: str) -> int:
        gb, generated = out_of_generated_break(gb)  # `<string>` (exec-made code) has no line to show or edit
        path = places.absolute(gb.file)
        where = places.where(path)
        site = gb.user_stack[-1] if gb.user_stack and gb.user_stack[-1].line == gb.line else Frame(gb.file, gb.line, "")
        code = classify_break(gb, where, site.code or linecache.getline(path, gb.line), torch_version)
        root = starts[cid][-1] if starts.get(cid) else None  # the compiled frame
        logged = _logging_caller(places, gb) if where != PROJECT and code != "TM901" else None
        if logged is not None:  # inside a logger or a framework's `self.log`: the project line that logged
            inner = Frame(path, gb.line, gb.function, site.code)
            add(
                ("TM102", logged.file, logged.line),
                {"type": "break", "gb": gb, "site": logged, "where": PROJECT, "root": root, "inside": inner},
            )
            return 1
        add(
            (code, path, gb.line),
            {"type": "break", "gb": gb, "site": site, "where": where, "root": root, "generated": generated},
        )
        return 1

    backend_breaks: dict[str, list[GraphBreak]] = {}  # compile id -> breaks that only say the backend failed
    backend_checks: dict[str, dict[str, Any]] = {}  # compile id -> did the script's own backend compile it?

    for ev in events:
        kind = ev.get("ev")
        if kind == COMPILE_START:
            starts[ev.get("compile_id") or ""] = [Frame(f[0], f[1], f[2]) for f in ev.get("stack", [])]
            if ev.get("callers"):
                callers[ev.get("compile_id") or ""] = [Frame(f[0], f[1], f[2]) for f in ev["callers"]]
                traced_callers[ev.get("compile_id") or ""] = {(f[0], f[1]) for f in ev["callers"] if f[3:4] == [1]}
        elif kind == GRAPH_BREAK:
            if OWN_MARKER in ev.get("text", ""):
                continue
            gb = parse_graph_break(ev.get("text", ""))
            if gb is None:
                continue
            if is_backend_failure_break(ev.get("text", "")):  # its frame's COMPILE_END decides what it was
                backend_breaks.setdefault(ev.get("compile_id") or "", []).append(gb)
                continue
            breaks += add_break(gb, ev.get("compile_id") or "")
        elif kind == BACKEND_CHECK:
            backend_checks[ev.get("compile_id") or ""] = ev
        elif kind == COMPILE_END:
            cid = ev.get("compile_id") or ""
            frame_id = cid.split("/")[0]
            fail = ev.get("fail_reason") or ""
            if OWN_MARKER in fail:
                continue
            if ev.get("co_name") and ev.get("co_filename"):
                code_of_frame.setdefault(
                    frame_id, Frame(ev["co_filename"], ev.get("co_firstlineno") or 0, ev["co_name"])
                )
            fallback = eager_fallback(ev)
            if fallback is not None:  # the whole function runs eagerly: one TM106, not its `def`-line breaks
                backend_breaks.pop(cid, None)
                compiles += 1
                compile_s += ev.get("entire_frame_compile_time_s") or 0.0
                _add_eager(
                    add,
                    places,
                    fallback,
                    code_of_frame.get(frame_id),
                    backend_checks.get(cid),
                    _call_site(places, starts, callers, traced_callers, cid),
                    frame_id,
                )
                continue
            breaks += sum(add_break(gb, cid) for gb in backend_breaks.pop(cid, []))
            is_limit = (
                "recompile limit" in fail.lower() or "cache_size_limit" in fail or "cache size limit" in fail.lower()
            )
            if is_limit:
                limit_hits += 1
                limited_frames.add(frame_id)
                _add_limit(
                    add,
                    places,
                    ev,
                    code_of_frame.get(frame_id),
                    _call_site(places, starts, callers, traced_callers, frame_id),
                )
                continue
            compiles += 1
            frames.add(frame_id)
            compile_s += ev.get("entire_frame_compile_time_s") or 0.0
            if (ev.get("graph_op_count") or 0) > 0:
                graphs += 1
            if ev.get("recompile_reason"):
                recompiles += 1
                g, generated = out_of_generated_guard(parse_recompile_reason(ev["recompile_reason"]))
                if g.site is not None:
                    g = replace(
                        g,
                        site=replace(
                            g.site, file=resolve_short_path(g.site.file, known_files, start.get("torch_root"))
                        ),
                    )
                compiled = code_of_frame.get(frame_id)
                call_site = _call_site(places, starts, callers, traced_callers, cid)
                site_frame = g.site
                if site_frame is None:  # guards without a user line (tensor size, ...): act at the call site
                    site_frame = Frame(call_site.path, call_site.line, call_site.function) if call_site else compiled
                if site_frame is None:
                    continue
                code = classify_guard(g)
                if code == "TM208":  # a cached tensor's size guards name no line: file them with its `is None` guard
                    attr = re.sub(r"\.(?:size\(\)|shape)\[\d+\]$", "", g.variable or "")
                    site_frame = (
                        cached_sites.setdefault(attr, site_frame) if g.site else cached_sites.get(attr, site_frame)
                    )
                path = places.absolute(site_frame.file)
                add(
                    (code, path, site_frame.line),
                    {
                        "type": "recompile",
                        "g": g,
                        "site": site_frame,
                        "where": places.where(path),
                        "call_site": call_site,
                        "compiled": compiled,
                        "generated": generated,
                    },
                    frame_id,
                )
        elif kind in (END, STEP):
            steps = max(steps, ev.get("steps") or 0)
            if kind == END and ev.get("step_times"):
                step_times = ev["step_times"]
            if kind == END and ev.get("reason") == "error":
                failure = compiled_save_finding(places, ev) or dynamo_crash_finding(places, ev)

    breaks += sum(add_break(gb, c) for c, pending in backend_breaks.items() for gb in pending)  # no COMPILE_END
    breaks_at = break_lines(e for e in events if e.get("ev") == COMPILE_START)
    findings = [
        _finding(places, key, grp, bool(grp.extra["frames"].keys() & limited_frames), breaks_at)
        for key, grp in groups.items()
    ]
    versions = {"torch": start.get("torch") or "", **start.get("libraries", {})}
    findings = [with_library_advice(f, versions) for f in findings]
    findings = mark_wrapper_breaks(findings, start.get("torch"), torch_version)
    findings += [failure] if failure else []
    first_step, steady_step = step_stats(step_times)
    summary = Summary(
        frames_compiled=len(frames),
        compiles=compiles,
        graphs=graphs,
        graph_breaks=breaks,
        recompiles=recompiles,
        recompile_limit_hits=limit_hits,
        compile_seconds=round(compile_s, 3),
        steps=steps,
        ended_by=EndedBy(ended_by),
        wall_seconds=round(wall_seconds, 2),
        torch_version=start.get("torch"),
        first_step_s=first_step,
        steady_step_s=steady_step,
    )
    return findings, summary


def step_stats(times: list[float]) -> tuple[float | None, float | None]:
    """(first step seconds, steady step seconds: the median step over the second half of the run)."""
    if not times:
        return None, None
    steps = [b - a for a, b in zip(times, times[1:])]
    steady = sorted(steps[len(steps) // 2 :])
    median = steady[len(steady) // 2] if steady else None
    return round(times[0], 4), (round(median, 5) if median is not None else None)


def _call_site(
    places: Places,
    starts: dict[str, list[Frame]],
    callers: dict[str, list[Frame]],
    traced: dict[str, set[tuple[str, int]]],
    cid_or_frame: str,
) -> Location | None:
    """The user's line that called into the compiled function (innermost project frame below it), marked `traced`
    when that line itself ran inside a compiled call."""
    stack = starts.get(cid_or_frame)
    if stack is None:  # a frame id: any compile of that frame will do
        stack = next((s for c, s in starts.items() if c.split("/")[0] == cid_or_frame), None)
    cid = cid_or_frame if cid_or_frame in callers else next((c for c in callers if c.split("/")[0] == cid_or_frame), "")
    live = callers.get(cid)
    if live:
        # A resume function is called from the original function's own frame: skip those frames, so the
        # call site is where the user called the compiled function.
        own = user_function_name(stack[-1].function) if stack else None
        outer = [
            f
            for f in live
            if not f.function.startswith("torch_dynamo_resume_in_") and user_function_name(f.function) != own
        ]
        site = places.innermost_user(outer)
        inner = next((f for f in reversed(outer) if site is not None and places.absolute(f.file) == site.path), None)
        if site is not None and inner is not None and (inner.file, inner.line) in traced.get(cid, set()):
            site = replace(site, traced=True)
        return site
    if not stack:
        return None
    return places.innermost_user(stack[:-1])


def _add_limit(
    add: Any, places: Places, ev: dict[str, Any], compiled: Frame | None, call_site: Location | None
) -> None:
    frame_id = (ev.get("compile_id") or "").split("/")[0]
    g = parse_recompile_reason(ev.get("recompile_reason") or "")
    site = compiled
    if site is None or places.where(places.absolute(site.file)) != PROJECT:
        site = Frame(call_site.path, call_site.line, call_site.function) if call_site else site
    if site is None:
        return
    add(
        ("TM250", places.absolute(site.file), site.line),
        {
            "type": "limit",
            "g": g,
            "site": site,
            "where": places.where(places.absolute(site.file)),
            "call_site": call_site,
            "compiled": compiled,
            "fail": ev.get("fail_reason") or "",
        },
        frame_id,
    )


def _add_eager(
    add: Any,
    places: Places,
    fb: EagerFallback,
    compiled: Frame | None,
    check: dict[str, Any] | None,
    call_site: Location | None,
    frame_id: str,
) -> None:
    """TM106 at the line the failure names (the innermost project frame of it), else at the `def`."""
    user = next((f for f in reversed(fb.frames) if places.where(places.absolute(f.file)) == PROJECT), None)
    site = user or (fb.frames[-1] if fb.frames else compiled)
    if site is None:
        return
    path = places.absolute(site.file)
    add(
        ("TM106", path, site.line),
        {
            "type": "eager",
            "fb": fb,
            "site": site,
            "where": places.where(path),
            "call_site": call_site,
            "compiled": compiled,
            "check": check,
            "user": places.location(user) if user else None,
        },
        frame_id,
    )


def _logging_caller(places: Places, gb: GraphBreak) -> Frame | None:
    """The project line a library break was reached from, when that line logs (`logger.info(...)` of an installed
    logger such as loguru's, a framework's `self.log(...)`): the break is the logging call's, filed there."""
    for f in reversed(gb.user_stack):
        path = places.absolute(f.file)
        if places.where(path) != PROJECT:
            continue
        code = f.code or linecache.getline(path, f.line).strip()
        return Frame(path, f.line, user_function_name(f.function), code) if logging_line(code) else None
    return None


def _inside_note(places: Places, inner: Frame) -> str:
    where = f"{places.display(inner.file)}:{inner.line}"
    return (
        f" (inside the logging library, at {where}: the break is this logging call's; move the call out of the "
        "compiled function, or into a helper decorated with @torch.compiler.disable)"
    )


def _finding(
    places: Places, key: tuple[str, str, int], grp: _Group, hit_limit: bool, breaks_at: dict[tuple[str, str], list[int]]
) -> Finding:
    code, path, line = key
    info = grp.first
    rule = rules.BY_CODE[code]
    where = info["where"]
    site: Frame = info["site"]
    loc = places.location(Frame(path, line, site.function, site.code))
    user_frame = None
    if info["type"] == "break":
        gb: GraphBreak = info["gb"]
        if where != PROJECT:
            user_frame = project_frame(places, gb.user_stack, info.get("root"), breaks_at)
        return Finding(
            rule=code,
            kind=Kind(rule.kind),
            title=rule.title,
            file=loc.file,
            line=line,
            function=loc.function or gb.function,
            path=path,
            where=Where(where),
            reason=reason_for_break(gb)
            + (generated_note(info["generated"]) if info.get("generated") else "")
            + (_inside_note(places, info["inside"]) if info.get("inside") else ""),
            count=grp.count,
            severity=Severity.INFO if rule.informational else Severity.FIX,
            gb_id=gb.gb_id,
            gb_type=gb.gb_type,
            docs_url=gb.docs_url,
            code=site.code,
            user_frame=user_frame,
        )
    # A compiled frame of generated code (a dataclass's `__init__` compiled on its own) has no file to read.
    compiled_frame = info.get("compiled")
    compiled = places.location(compiled_frame) if compiled_frame and not is_generated(compiled_frame.file) else None
    call_site = info.get("call_site")
    if info["type"] == "eager":
        fb: EagerFallback = info["fb"]
        function = compiled.function if compiled else loc.function
        return Finding(
            rule=code,
            kind=Kind(rule.kind),
            title=rule.title,
            file=loc.file,
            line=line,
            function=function,
            path=path,
            where=Where(where),
            reason=reason_for_eager(fb, function, info.get("check")),
            count=grp.count,
            severity=Severity.FIX,
            gb_id=fb.gb_id,
            docs_url=fb.docs_url,
            code=site.code,
            user_frame=(info["user"] or call_site) if where != PROJECT else None,
            call_site=call_site,
            compiled_function=compiled,
        )
    g: GuardFailure = info["g"]
    if where != PROJECT:
        user_frame = resumed_at(places, info.get("compiled")) or call_site
    common: dict[str, Any] = dict(
        file=loc.file,
        line=line,
        function=loc.function,
        path=path,
        where=Where(where),
        count=grp.count,
        variable=g.variable,
        guard=g.guard,
        hint=g.hint,
        code=site.code,
        user_frame=user_frame,
        call_site=call_site,
        compiled_function=compiled,
    )
    if info["type"] == "limit":
        limit = re.search(r"\(currently set to (\d+)\)", info.get("fail", ""))
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
    once = max(grp.extra["frames"].values()) == 1
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
        reason=reason_for_guard(g) + (generated_note(info["generated"]) if info.get("generated") else ""),
        severity=severity,
        pattern=pattern,
        **common,
    )
