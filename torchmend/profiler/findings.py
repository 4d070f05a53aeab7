"""From raw events to deduplicated findings at the user's source lines, and the run summary.

Pure: takes the event list of a run, returns frozen, JSON-serialisable records.
"""

from __future__ import annotations

import linecache
import os
import re
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

from torchmend.model import EndedBy, Finding, Location, Summary, Where
from torchmend.profiler.classify import (
    classify_break,
    classify_guard,
    logging_line,
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
)
from torchmend.profiler.hotspots import parse_version, with_library_advice
from torchmend.profiler.parallel import mark_wrapper_breaks
from torchmend.profiler.pathmap import is_library_path
from torchmend.profiler.ranks import merge_ranks
from torchmend.profiler.seen import BreakSeen, EagerSeen, Group, LimitSeen, RecompileSeen, Seen, finding_of
from torchmend.profiler.traceparse import (
    Frame,
    GraphBreak,
    parse_graph_break,
    parse_recompile_reason,
    resolve_short_path,
    user_function_name,
)
from torchmend.profiler.userframe import (
    break_lines,
    out_of_generated_break,
    out_of_generated_guard,
)
from torchmend.values import Root

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
        """A project file where it really is (links followed), shown under the root; any other path as it is."""
        return Root(self.root).display(os.path.realpath(path)) if self.where(path) == PROJECT else path

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
    run = _Run(events, project_root)
    run.read()
    return run.result(ended_by, wall_seconds)


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


def _is_limit(fail: str) -> bool:
    return "recompile limit" in fail.lower() or "cache_size_limit" in fail or "cache size limit" in fail.lower()


class _Run:
    """One rank's events folded into groups (one per rule, file and line) and the summary's counts."""

    def __init__(self, events: list[dict[str, Any]], project_root: Path) -> None:
        self.events = separate_resets(events)
        self.start = next((e for e in self.events if e.get("ev") == START), {})
        self.places = Places(project_root, self.start.get("library_roots", []))
        self.torch_version = parse_version(self.start.get("torch"))  # what the break ids mean (gbids.py)
        self.known_files = _known_files(self.events)
        # Python's own library: code compiled there (a resume function inside `logging`, after a break in a logging
        # call) is not the model's, and its ops do not count as compiled coverage. torch's own code is the model's
        # (nn.Sequential's forward is in torch/nn/modules/container.py).
        roots = self.start.get("library_roots", [])
        packages = tuple(os.path.join(r, "") for r in roots if r.endswith(("site-packages", "dist-packages")))
        self.stdlib = tuple(os.path.join(r, "") for r in roots if r and os.path.join(r, "") not in packages)
        self.packages = packages  # a venv's stdlib folder holds its site-packages: those are not Python's own
        self.starts: dict[str, list[Frame]] = {}  # compile id -> the Python stack when it began compiling
        self.callers: dict[str, list[Frame]] = {}  # compile id -> the live stack of callers (no torch frames)
        # compile id -> callers' lines that ran inside compiled code
        self.traced_callers: dict[str, set[tuple[str, int]]] = {}
        self.code_of_frame: dict[str, Frame] = {}  # frame id -> the compiled code object's location
        self.groups: OrderedDict[tuple[str, str, int], Group] = OrderedDict()
        self.compiles = self.graphs = self.breaks = self.recompiles = self.limit_hits = self.steps = self.optimizers = 0
        self.compile_s = 0.0
        self.frames: set[str] = set()
        self.frame_ops: dict[str, int] = {}  # frame id -> the ops of the last graph it compiled (coverage)
        self.limited_frames: set[str] = set()
        self.failure: Finding | None = None  # TM107: compiling broke the script itself; TM112: dynamo crashed in it
        self.cached_sites: dict[str, Frame] = {}  # TM208: cached tensor attribute -> the line its `is None` guard names
        self.step_times: list[float] = []
        self.backend_breaks: dict[str, list[GraphBreak]] = {}  # compile id -> breaks that only say the backend failed
        self.backend_checks: dict[str, dict[str, Any]] = {}  # compile id -> did the script's own backend compile it?

    def add(self, key: tuple[str, str, int], seen: Seen, frame_id: str = "") -> None:
        group = self.groups.setdefault(key, Group(seen))
        group.count += 1
        group.frames[frame_id] += 1
        if isinstance(seen, BreakSeen):
            group.depths.add(seen.gb.inlined)

    def add_break(self, gb: GraphBreak, cid: str) -> int:
        gb, generated = out_of_generated_break(gb)  # `<string>` (exec-made code), a dynamo polyfill: no line to edit
        path = self.places.absolute(gb.file)
        where = self.places.where(path)
        site = gb.user_stack[-1] if gb.user_stack and gb.user_stack[-1].line == gb.line else Frame(gb.file, gb.line, "")
        code = classify_break(gb, where, site.code or linecache.getline(path, gb.line), self.torch_version, path)
        root = self.starts[cid][-1] if self.starts.get(cid) else None  # the compiled frame
        logged = _logging_caller(self.places, gb) if where != PROJECT and code != "TM901" else None
        if logged is not None:  # inside a logger or a framework's `self.log`: the project line that logged
            inner = Frame(path, gb.line, gb.function, site.code)
            self.add(("TM102", logged.file, logged.line), BreakSeen(gb, logged, PROJECT, root, None, inner))
            return 1
        self.add((code, path, gb.line), BreakSeen(gb, site, where, root, generated))
        return 1

    def call_site(self, cid_or_frame: str) -> Location | None:
        return _call_site(self.places, self.starts, self.callers, self.traced_callers, cid_or_frame)

    def entry(self, cid_or_frame: str) -> Location | None:
        """Finding.entry: the innermost project frame of the live stack that ran outside compiled code."""
        cid = _with_callers(self.callers, cid_or_frame)
        traced = self.traced_callers.get(cid, set())
        return self.places.innermost_user([f for f in self.callers.get(cid, []) if (f.file, f.line) not in traced])

    # --- the events, one kind at a time ---------------------------------------------------------------

    def read(self) -> None:
        for ev in self.events:
            kind = ev.get("ev")
            cid = ev.get("compile_id") or ""
            if kind == COMPILE_START:
                self.starts[cid] = [Frame(f[0], f[1], f[2]) for f in ev.get("stack", [])]
                if ev.get("callers"):
                    self.callers[cid] = [Frame(f[0], f[1], f[2]) for f in ev["callers"]]
                    self.traced_callers[cid] = {(f[0], f[1]) for f in ev["callers"] if f[3:4] == [1]}
            elif kind == GRAPH_BREAK:
                self.graph_break(ev, cid)
            elif kind == BACKEND_CHECK:
                self.backend_checks[cid] = ev
            elif kind == COMPILE_END:
                self.compile_end(ev, cid)
            elif kind in (END, STEP):
                self.steps = max(self.steps, ev.get("steps") or 0)
                self.optimizers = max(self.optimizers, ev.get("optimizers") or 0)
                if kind == END and ev.get("step_times"):
                    self.step_times = ev["step_times"]
                if kind == END and ev.get("reason") == "error":
                    self.failure = compiled_save_finding(self.places, ev) or dynamo_crash_finding(self.places, ev)
        # breaks whose frame never reported its COMPILE_END
        self.breaks += sum(self.add_break(gb, c) for c, pending in self.backend_breaks.items() for gb in pending)

    def graph_break(self, ev: dict[str, Any], cid: str) -> None:
        if OWN_MARKER in ev.get("text", ""):
            return
        gb = parse_graph_break(ev.get("text", ""))
        if gb is None:
            return
        if is_backend_failure_break(ev.get("text", "")):  # its frame's COMPILE_END decides what it was
            self.backend_breaks.setdefault(cid, []).append(gb)
            return
        self.breaks += self.add_break(gb, cid)

    def compile_end(self, ev: dict[str, Any], cid: str) -> None:
        frame_id = cid.split("/")[0]
        fail = ev.get("fail_reason") or ""
        if OWN_MARKER in fail:
            return
        if ev.get("co_name") and ev.get("co_filename"):
            self.code_of_frame.setdefault(
                frame_id, Frame(ev["co_filename"], ev.get("co_firstlineno") or 0, ev["co_name"])
            )
        fallback = eager_fallback(ev)
        if fallback is not None:  # the whole function runs eagerly: one TM106, not its `def`-line breaks
            self.backend_breaks.pop(cid, None)
            self.compiles += 1
            self.compile_s += ev.get("entire_frame_compile_time_s") or 0.0
            self.eager(fallback, self.code_of_frame.get(frame_id), self.backend_checks.get(cid), cid, frame_id)
            return
        self.breaks += sum(self.add_break(gb, cid) for gb in self.backend_breaks.pop(cid, []))
        if _is_limit(fail):
            self.limit_hits += 1
            self.limited_frames.add(frame_id)
            self.limit(ev, self.code_of_frame.get(frame_id), self.call_site(frame_id))
            return
        self.compiles += 1
        self.frames.add(frame_id)
        self.compile_s += ev.get("entire_frame_compile_time_s") or 0.0
        ops = ev.get("graph_op_count") or 0
        if ops > 0:
            self.graphs += 1
            code = os.path.realpath(ev.get("co_filename") or "")
            if not code.startswith(self.stdlib) or code.startswith(self.packages):
                self.frame_ops[frame_id] = ops  # the latest compile of the code is what the run goes on with
        if ev.get("recompile_reason"):
            self.recompiles += 1
            self.recompile(ev["recompile_reason"], cid, frame_id)

    def recompile(self, reason: str, cid: str, frame_id: str) -> None:
        g, generated = out_of_generated_guard(parse_recompile_reason(reason))
        if g.site is not None:
            short = resolve_short_path(g.site.file, self.known_files, self.start.get("torch_root"))
            g = replace(g, site=replace(g.site, file=short))
        compiled = self.code_of_frame.get(frame_id)
        call_site = self.call_site(cid)
        site_frame = g.site
        if site_frame is None:  # guards without a user line (tensor size, ...): act at the call site
            site_frame = Frame(call_site.path, call_site.line, call_site.function) if call_site else compiled
        if site_frame is None:
            return
        code = classify_guard(g)
        if code == "TM208":  # a cached tensor's size guards name no line: file them with its `is None` guard
            attr = re.sub(r"\.(?:size\(\)|shape)\[\d+\]$", "", g.variable or "")
            cached = self.cached_sites
            site_frame = cached.setdefault(attr, site_frame) if g.site else cached.get(attr, site_frame)
        path = self.places.absolute(site_frame.file)
        where = self.places.where(path)
        seen = RecompileSeen(g, site_frame, where, call_site, compiled, generated, self.entry(cid))
        self.add((code, path, site_frame.line), seen, frame_id)

    def limit(self, ev: dict[str, Any], compiled: Frame | None, call_site: Location | None) -> None:
        frame_id = (ev.get("compile_id") or "").split("/")[0]
        g = parse_recompile_reason(ev.get("recompile_reason") or "")
        site = compiled
        if site is None or self.places.where(self.places.absolute(site.file)) != PROJECT:
            site = Frame(call_site.path, call_site.line, call_site.function) if call_site else site
        if site is None:
            return
        path = self.places.absolute(site.file)
        fail = ev.get("fail_reason") or ""
        seen = LimitSeen(g, site, self.places.where(path), call_site, compiled, fail, self.entry(frame_id))
        self.add(("TM250", path, site.line), seen, frame_id)

    def eager(
        self, fb: EagerFallback, compiled: Frame | None, check: dict[str, Any] | None, cid: str, frame_id: str
    ) -> None:
        """TM106 at the line the failure names (the innermost project frame of it), else at the `def`."""
        places = self.places
        user = next((f for f in reversed(fb.frames) if places.where(places.absolute(f.file)) == PROJECT), None)
        site = user or (fb.frames[-1] if fb.frames else compiled)
        if site is None:
            return
        path = places.absolute(site.file)
        seen = EagerSeen(
            fb,
            site,
            places.where(path),
            self.call_site(cid),
            compiled,
            check,
            places.location(user) if user else None,
        )
        self.add(("TM106", path, site.line), seen, frame_id)

    # --- the findings and the summary -------------------------------------------------------------------

    def result(self, ended_by: str, wall_seconds: float) -> tuple[list[Finding], Summary]:
        breaks_at = break_lines(e for e in self.events if e.get("ev") == COMPILE_START)
        findings = [
            finding_of(self.places, key, grp, bool(grp.frames.keys() & self.limited_frames), breaks_at)
            for key, grp in self.groups.items()
        ]
        versions = {"torch": self.start.get("torch") or "", **self.start.get("libraries", {})}
        findings = [with_library_advice(f, versions) for f in findings]
        findings = mark_wrapper_breaks(findings, self.start.get("torch"), self.torch_version)
        findings += [self.failure] if self.failure else []
        first_step, steady_step = step_stats(self.step_times)
        last_step = round(self.step_times[-1], 4) if self.step_times else None
        summary = Summary(
            frames_compiled=len(self.frames),
            compiles=self.compiles,
            graphs=self.graphs,
            graph_breaks=self.breaks,
            recompiles=self.recompiles,
            recompile_limit_hits=self.limit_hits,
            compile_seconds=round(self.compile_s, 3),
            steps=self.steps,
            optimizers=self.optimizers,
            ended_by=EndedBy(ended_by),
            wall_seconds=round(wall_seconds, 2),
            torch_version=self.start.get("torch"),
            first_step_s=first_step,
            steady_step_s=steady_step,
            last_step_s=last_step,
            ops_compiled=sum(self.frame_ops.values()),
            largest_graph_ops=max(self.frame_ops.values(), default=0),
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


def _with_callers(callers: dict[str, list[Frame]], cid_or_frame: str) -> str:
    """The compile id whose live callers were recorded: `cid_or_frame` itself, or for a frame id any compile of it."""
    if cid_or_frame in callers:
        return cid_or_frame
    return next((c for c in callers if c.split("/")[0] == cid_or_frame), "")


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
    cid = _with_callers(callers, cid_or_frame)
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
