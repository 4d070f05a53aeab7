"""Compile placement (issue 40): where a whole-model compile breaks, which of its submodules compiled without a
break. Read from the run alone: each compile call's module tree (modtree.py, in its COMPILE_CALL event) against the
stacks of the run's graph breaks. A submodule is broken when a break's stack passes through its class's `forward`
(every instance of that class, to be safe) or through a submodule of it; the placement is the largest submodules
that are not, that hold parameters and can be compiled alone (a ModuleList cannot). No torch here."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from torchmend.model import Placement
from torchmend.profiler.events import COMPILE_CALL, GRAPH_BREAK, OWN_MARKER, START
from torchmend.profiler.traceparse import Frame, parse_graph_break

MIN_SHARE = 0.01  # of the model's parameters, for a submodule to be compiled on its own


@dataclass(frozen=True)
class _Node:
    name: str
    cls: str
    file: str
    first: int
    last: int
    params: int
    callable: bool

    def holds(self, frame: Frame) -> bool:
        return self.first <= frame.line <= self.last and _same(self.file, frame.file)


def _same(a: str, b: str) -> bool:
    return a == b or os.path.realpath(a) == os.path.realpath(b)


def _same_root(path: str, root: str) -> bool:
    return os.path.realpath(path).startswith(os.path.join(os.path.realpath(root), ""))


def _parent(name: str) -> str | None:
    return None if not name else name.rsplit(".", 1)[0] if "." in name else ""


def break_stacks(events: Iterable[dict[str, Any]]) -> list[tuple[Frame, ...]]:
    """The user stack of every graph break the run recorded (torchmend's own step counter's left out)."""
    out = []
    for ev in events:
        if ev.get("ev") != GRAPH_BREAK or OWN_MARKER in str(ev.get("text", "")):
            continue
        gb = parse_graph_break(str(ev.get("text", "")))
        if gb is not None and gb.user_stack:
            out.append(gb.user_stack)
    return out


def placements(events: list[dict[str, Any]]) -> tuple[Placement, ...]:
    """One Placement per compile call of a module that broke inside and has submodules that did not."""
    stacks = break_stacks(events)
    frames = {f for stack in stacks for f in stack}
    torch_root = next((str(e.get("torch_root") or "") for e in events if e.get("ev") == START), "")
    out = []
    for ev in events:
        if ev.get("ev") != COMPILE_CALL or not ev.get("modules") or not ev.get("at"):
            continue
        placed = place([_Node(*row) for row in ev["modules"]], frames, torch_root)
        if placed is not None:
            out.append(replace(placed, path=str(ev["at"][0]), line=int(ev["at"][1])))
    return tuple(dict.fromkeys(out))  # one model compiled at one line, recorded per rank or per call: once


def place(nodes: list[_Node], frames: set[Frame], torch_root: str = "") -> Placement | None:
    """The placement in one module tree (the root first), or None where the root did not break or no part of it
    compiled cleanly. A module of torch's own classes (under `torch_root`: nn.Linear, nn.Sequential) is not placed
    itself: `module.compile()` on one compiles nothing (dynamo skips torch.nn's frames as the frame it starts from;
    measured on torch 2.13), so its children are looked at instead."""
    if not nodes or nodes[0].name != "":
        return None
    by_name = {n.name: n for n in nodes}
    children: dict[str, list[str]] = {n.name: [] for n in nodes}
    for n in nodes[1:]:
        parent = _parent(n.name)
        if parent in children:
            children[parent].append(n.name)
    broken_here = {n.name for n in nodes if any(n.holds(f) for f in frames)}
    broken: set[str] = set()
    total: dict[str, int] = {}
    for n in reversed(nodes):  # children come after their parent in named_modules() order
        total[n.name] = n.params + sum(total[c] for c in children[n.name])
        if n.name in broken_here or any(c in broken for c in children[n.name]):
            broken.add(n.name)
    if "" not in broken or not total[""]:
        return None
    chosen: list[str] = []

    def walk(name: str) -> None:
        node = by_name[name]
        own_class = not (torch_root and _same_root(node.file, torch_root))
        if name not in broken and node.callable and own_class and total[name] > 0:
            chosen.append(name)
            return
        for c in children[name]:
            walk(c)

    walk("")
    # a lone small layer left inside a broken one (a head's projection) is not worth a graph of its own
    chosen = [c for c in chosen if total[c] >= MIN_SHARE * total[""]]
    if not chosen:
        return None
    # where the breaks are: the innermost broken modules (no broken child), for the message
    innermost = tuple(n for n in sorted(broken) if n and not any(c in broken for c in children[n]))
    return Placement(
        path="",
        line=0,
        model=nodes[0].cls,
        modules=tuple(chosen),
        broken=innermost,
        share=round(sum(total[c] for c in chosen) / total[""], 4),
    )
