"""Which of the user's lines reached a finding inside a library (transformers, diffusers, torch.nn, ...).

A graph break's user stack lists the live frames and the frames dynamo inlined, but torch 2.13 leaves out the
compiled frame itself when the break is inside a call it inlined: a break in `nn.TransformerEncoder` called
from `model.py` then looks as if the training loop called the library directly. The compiled frame is known
(the compile's own stack), and so is the line it broke at: dynamo continues the frame in a resume function
(`torch_dynamo_resume_in_forward_at_21`) that the frame calls from that line. Pure: no torch.

Code generated at run time (`<string>`: dataclass and namedtuple methods made by exec) has no source: a finding
inside it is moved to the nearest real frame, the line that called it. So is one inside dynamo's own version of a
builtin (torch/_dynamo/polyfills: `if all(mask):` breaks in its `all`): the line that called the builtin.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

from torchmend.model import Location, Where
from torchmend.profiler.traceparse import Frame, GraphBreak, GuardFailure, parse_stack, user_function_name

_RESUME_AT_RE = re.compile(r"^torch_dynamo_resume_in_.+_at_(?P<line>\d+)$")


def resume_start_line(function: str) -> int | None:
    """`torch_dynamo_resume_in_forward_at_142` -> 142 (the line the original frame broke at)."""
    m = _RESUME_AT_RE.match(function or "")
    return int(m["line"]) if m else None


def break_lines(compile_starts: Iterable[dict[str, Any]]) -> dict[tuple[str, str], list[int]]:
    """(file, compiled function's raw name) -> the lines it called a resume function from, i.e. where it broke.

    Read from each resume's compile start: its live callers (or, in a trace, its stack) end with the frame
    that called it, at the line of the break."""
    lines: dict[tuple[str, str], list[int]] = {}
    for ev in compile_starts:
        stack = ev.get("stack") or []
        if not stack or resume_start_line(stack[-1][2]) is None:
            continue
        callers = ev.get("callers") or stack[:-1]
        if callers:
            file, line, function = callers[-1][:3]
            seen = lines.setdefault((file, function), [])
            if line not in seen:
                seen.append(line)
    return lines


def project_frame(
    places: Any, stack: Sequence[Frame], compiled: Frame | None, breaks_at: dict[tuple[str, str], list[int]]
) -> Location | None:
    """The user's frame that reached a library finding (`places`: findings.Places).

    `stack`: the finding's user stack, oldest first (may be empty: a guard has none); `compiled`: the compiled
    frame (its raw function name), when known."""
    if compiled is not None and places.where(places.absolute(compiled.file)) == Where.PROJECT:
        function = user_function_name(compiled.function)
        shown = any(f.file == compiled.file and f.function == function for f in stack)
        if not shown:
            lines = breaks_at.get((compiled.file, compiled.function))
            line = lines[0] if lines else resume_start_line(compiled.function)
            if line is not None:
                return places.location(Frame(compiled.file, line, function))
    return places.innermost_user(stack)


def resumed_at(places: Any, compiled: Frame | None) -> Location | None:
    """A library guard in a project frame dynamo resumed after a break (`torch_dynamo_resume_in_forward_at_142`)
    was reached from that line of the project (model.py:142), not from the training loop that called forward."""
    line = resume_start_line(compiled.function) if compiled else None
    if compiled is None or line is None or places.where(places.absolute(compiled.file)) != Where.PROJECT:
        return None
    return places.location(Frame(compiled.file, line, compiled.function))


# --- code generated at run time ------------------------------------------------------------------------------


def is_generated(file: str) -> bool:
    """Code made at run time by exec/eval (a dataclass's `__init__`/`__eq__`, a namedtuple's `__new__`, attrs):
    its file is `<string>` or another `<...>` name, with no source to read or edit."""
    return file.startswith("<")


# Dynamo's own Python versions of builtins it traces (`all`, `any`, `sum`, `zip` ...): nobody's code but dynamo's, so
# a break inside one is the break of the line that called the builtin.
_STAND_IN_DIRS = ("/torch/_dynamo/polyfills/",)


def is_stand_in(file: str) -> bool:
    """Code no user wrote or can edit, standing in at a break: generated at run time, or a dynamo polyfill."""
    return is_generated(file) or any(d in file.replace("\\", "/") for d in _STAND_IN_DIRS)


def real_frame(frames: Sequence[Frame]) -> Frame | None:
    """The innermost frame of code somebody wrote: the line that called into generated code or a polyfill."""
    return next((f for f in reversed(frames) if not is_stand_in(f.file)), None)


def out_of_generated_guard(g: GuardFailure) -> tuple[GuardFailure, Frame | None]:
    """A guard installed inside generated code (`opts.scale == 0.5  # <string>:4 in __eq__`) moved to the nearest
    real frame of its user stack (`if opts == DEFAULT:` in forward), with the generated frame it was in; with no
    real frame, to no site (the caller then files it at the call site)."""
    if g.site is None or not is_stand_in(g.site.file):
        return g, None
    lines = g.text.splitlines()
    marker = next((i for i, ln in enumerate(lines) if ln.strip().lstrip("- ").strip() == "User stack trace:"), None)
    frames = parse_stack([ln.replace("-   ", "  ", 1) for ln in lines[marker + 1 :]]) if marker is not None else []
    # With no real frame in its stack, no site: the finding goes to the call site, as a guard with no line does.
    return replace(g, site=real_frame(frames)), g.site


def out_of_generated_break(gb: GraphBreak) -> tuple[GraphBreak, Frame | None]:
    """A graph break inside generated code or a dynamo polyfill moved to the nearest real frame of its user stack."""
    if not is_stand_in(gb.file):
        return gb, None
    inner = gb.user_stack[-1] if gb.user_stack else Frame(gb.file, gb.line, "")
    real = real_frame(gb.user_stack)
    if real is None:
        return gb, inner
    keep = gb.user_stack[: gb.user_stack.index(real) + 1]
    return replace(gb, file=real.file, line=real.line, user_stack=keep), inner


def generated_note(frame: Frame) -> str:
    """What the reason says about the generated code (or dynamo polyfill) a finding was moved out of."""
    what = f"`{frame.function}`" if frame.function else "a function"
    if not is_generated(frame.file):
        where = frame.file.replace("\\", "/").rsplit("/torch/", 1)[-1]
        return f" (inside dynamo's own version of {what}, torch/{where}:{frame.line}, called from this line)"
    return f" (inside {what}, code generated at run time ({frame.file}), called from this line)"
