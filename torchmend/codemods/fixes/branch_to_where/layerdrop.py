"""A LayerDrop-style random skip (`skip = torch.rand([]) < p`; `if not skip: h = layer(h)`) picked with
torch.where: every call runs the layer and keeps its output with the probability the draw gave, so the outputs keep
their distribution while the random stream changes (the layer's own dropout draws happen on every call). Such a
change is a safety class of its own (RANDOM_STREAM): applied only with `--allow-random-stream`, verified in
distribution over several seeds (verify/stochastic.py)."""

from __future__ import annotations

import dataclasses

import libcst as cst

from torchmend.codemods.base import RANDOM_STREAM, Proposal
from torchmend.codemods.source import SourceFile

RANDOM_STREAM_NOTE = (
    "changes the random stream, keeps the distribution: the skipped layer now runs on every call and its output "
    "is kept with the same probability (the skip still happens with probability p; gradients reach the layer "
    "only when it is kept); the layer's own random draws (dropout) happen on every call, so losses match the "
    "original in distribution over seeds, not bit for bit; the compute the skip saved is spent"
)


class _AsTensor(cst.CSTTransformer):
    """The condition of every torch.where call wrapped in torch.as_tensor: the test is a Python bool when the draw
    is not made (eval mode, p = 0), and torch.where takes a tensor condition only."""

    def __init__(self, src: SourceFile, as_tensor: cst.BaseExpression) -> None:
        super().__init__()
        self.src, self.as_tensor, self.wrapped = src, as_tensor, 0

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        func = updated.func
        name = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
        if name != "where" or len(updated.args) != 3:
            return updated
        cond = updated.args[0].value
        wrapped = cst.Call(self.as_tensor, [cst.Arg(cond)])
        self.wrapped += 1
        return updated.with_changes(args=[updated.args[0].with_changes(value=wrapped), *updated.args[1:]])


def random_stream_proposal(src: SourceFile, fix: Proposal, draw: str) -> Proposal | None:
    """`fix` (a torch.where rewrite of a test on a random draw) as a RANDOM_STREAM change: its conditions made
    tensors, its note saying what changes. None when it is not a torch.where rewrite of statements (torch.cond, or
    nothing to wrap)."""
    as_tensor, imports = src.torch_expr("as_tensor")
    replace: dict[cst.CSTNode, object] = {}
    wrapped = 0
    for node, new in fix.replace.items():
        if not isinstance(new, cst.CSTNode | cst.FlattenSentinel):
            return None
        t = _AsTensor(src, as_tensor)
        if isinstance(new, cst.FlattenSentinel):
            new = cst.FlattenSentinel([n.visit(t) for n in new.nodes])
        else:
            new = new.visit(t)
        wrapped += t.wrapped
        replace[node] = new
    if not wrapped or fix.insert_before or fix.insert_after:
        return None
    return dataclasses.replace(
        fix,
        replace=replace,  # type: ignore[arg-type]
        imports=tuple(dict.fromkeys((*fix.imports, *imports))),
        safety=RANDOM_STREAM,
        why=f"{fix.why} (a random skip drawn by `{draw}`: the layer runs every call, its output kept as often)",
        note=RANDOM_STREAM_NOTE + (f"; {fix.note}" if fix.note else ""),
        alternative=fix.alternative,
        fallbacks=(),
        shape="random-skip-where",
    )
