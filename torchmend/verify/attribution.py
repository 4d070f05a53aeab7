"""Which change removed which findings: each proposal's targeted findings, looked for in the patched run.

A finding after the patch is mapped back to the original line of its file (difflib over the file's old
and new text), so a finding that survives a rewrite that moved it is still recognised. No extra runs.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from torchmend.codemods.base import Proposal
from torchmend.model import Finding


def new_to_old(before: str, after: str) -> dict[int, int]:
    """1-based line in `after` -> the line of `before` it came from.

    Inside a changed block, a line that is an old line re-indented (a gated print) maps to that line, else
    to the block's first: two adjacent changes make one block, and a finding left at the second must not
    count against the first."""
    a, b = before.splitlines(), after.splitlines()
    mapping: dict[int, int] = {}
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal" or i1 == i2:
            for k, j in enumerate(range(j1, j2)):
                mapping[j + 1] = (i1 + k + 1) if tag == "equal" else i1 + 1
            continue
        inner = difflib.SequenceMatcher(
            None, [x.strip() for x in a[i1:i2]], [y.strip() for y in b[j1:j2]], autojunk=False
        )
        for t, p1, _, q1, q2 in inner.get_opcodes():
            for k, q in enumerate(range(q1, q2)):
                mapping[j1 + q + 1] = i1 + 1 + (p1 + k if t == "equal" else min(p1, i2 - i1 - 1))
    return mapping


@dataclass(frozen=True)
class ChangeEffect:
    proposal: Proposal
    removed: tuple[Finding, ...]  # targeted findings gone after the patch
    remaining: tuple[Finding, ...]  # targeted findings still there (as often as before, for a `reduces` change)
    # A change that `reduces` (Proposal.reduces): targeted findings still there, recorded fewer times than before
    reduced: tuple[tuple[Finding, int], ...] = ()  # (the finding before, its count after)

    @property
    def helped(self) -> bool:
        return bool(self.removed or self.reduced)


def attribute(
    proposals: list[Proposal], after: list[Finding], changes: dict[str, tuple[str, str]]
) -> list[ChangeEffect]:
    maps = {path: new_to_old(old, new) for path, (old, new) in changes.items()}
    seen: dict[tuple[str, str, int], int] = {}
    for f in after:
        line = maps[f.path].get(f.line, f.line) if f.path in maps else f.line
        key = (f.rule, f.path, line)
        seen[key] = seen.get(key, 0) + f.count
    effects = []
    for p in proposals:
        keys = [(f, (f.rule, f.path, f.line)) for f in p.findings]
        removed = tuple(f for f, k in keys if k not in seen)
        reduced = tuple((f, seen[k]) for f, k in keys if p.reduces and k in seen and seen[k] < f.count)
        fewer = {id(f) for f, _ in reduced}
        remaining = tuple(f for f, k in keys if k in seen and id(f) not in fewer)
        effects.append(ChangeEffect(p, removed, remaining, reduced))
    return effects
