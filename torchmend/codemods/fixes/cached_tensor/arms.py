"""The cache nested in the arms of an outer `if` (word_language_model's `forward`):

    if has_mask:
        if self.src_mask is None or self.src_mask.size(0) != len(src):
            self.src_mask = ...
    else:
        self.src_mask = None

One arm rebuilds the attribute, the others set it to None. As a local it must be bound on every path through the
outer `if`, and no arm may both clear and rebuild it (that is a reset, not a cache).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import libcst as cst

from torchmend.analysis import match as m
from torchmend.codemods.base import Refuse
from torchmend.codemods.fixes.cached_tensor.syntax import self_attr


def is_cache(stmt: cst.CSTNode, attr: str) -> bool:
    """`if <test reading self.attr>: ... self.attr = ...`."""
    return (
        isinstance(stmt, cst.If)
        and bool(m.findall(stmt.test, self_attr(attr)))
        and bool(m.findall(stmt.body, m.AssignTarget(target=self_attr(attr))))
    )


def is_clear(stmt: cst.CSTNode, attr: str) -> bool:
    """`self.attr = None` alone on its line."""
    return m.matches(
        stmt, m.SimpleStatementLine(body=[m.Assign(targets=[m.AssignTarget(self_attr(attr))], value=m.Name("None"))])
    )


def _arms(node: cst.If) -> list[Sequence[cst.BaseStatement] | None]:
    """The statement lists of an `if`/`elif`/`else` chain; None for a missing `else`."""
    arms: list[Sequence[cst.BaseStatement] | None] = [
        node.body.body if isinstance(node.body, cst.IndentedBlock) else []
    ]
    if isinstance(node.orelse, cst.If):
        return arms + _arms(node.orelse)
    if isinstance(node.orelse, cst.Else):
        return arms + [node.orelse.body.body if isinstance(node.orelse.body, cst.IndentedBlock) else []]
    return arms + [None]


def nested_caches(stmt: cst.CSTNode, attr: str) -> list[cst.If]:
    """Caches inside the arms of `stmt` (an `if`, its arms' `if`s, ...), not `stmt` itself."""
    found: list[cst.If] = []
    if not isinstance(stmt, cst.If):
        return found
    for arm in _arms(stmt):
        for inner in arm or ():
            if is_cache(inner, attr):
                found.append(cast(cst.If, inner))  # is_cache checked it is an If
            elif isinstance(inner, cst.If):
                found += nested_caches(inner, attr)
    return found


def clears(outer: cst.If, attr: str) -> list[cst.SimpleStatementLine]:
    """`self.attr = None` lines in the arms of `outer`, at any depth of `if`s."""
    found: list[cst.SimpleStatementLine] = []
    for arm in _arms(outer):
        for stmt in arm or ():
            if is_clear(stmt, attr):
                found.append(cast(cst.SimpleStatementLine, stmt))  # is_clear matched one
            elif isinstance(stmt, cst.If):
                found += clears(stmt, attr)
    return found


def always_binds(outer: cst.If, cache: cst.If, cleared: list[cst.SimpleStatementLine], line: int, attr: str) -> None:
    """Refuse unless every path through `outer` either rebuilds (the cache) or clears self.attr, exactly once."""
    if not _binds(outer, cache, {id(c) for c in cleared}, attr):
        raise Refuse(
            f"on some path through the `if` at line {line} self.{attr} is neither rebuilt nor set to None "
            "(an `if`/`elif` without `else`): as a local it would be unbound there; add the missing arm by hand"
        )


def _binds(node: cst.If, cache: cst.If, cleared: set[int], attr: str) -> bool:
    for arm in _arms(node):
        if arm is None:
            return False
        touching = [s for s in arm if s is cache or id(s) in cleared or (isinstance(s, cst.If) and _touches(s, attr))]
        if len(touching) > 1:
            raise Refuse(f"one arm both sets self.{attr} to None and rebuilds it: a reset, not a plain cache")
        if not touching:
            return False
        first = touching[0]
        # neither the cache nor a clear: an `if` that touches self.attr, which must bind it in all its arms
        if first is not cache and id(first) not in cleared and not _binds(cast(cst.If, first), cache, cleared, attr):
            return False
    return True


def _touches(node: cst.CSTNode, attr: str) -> bool:
    return bool(m.findall(node, self_attr(attr)))
