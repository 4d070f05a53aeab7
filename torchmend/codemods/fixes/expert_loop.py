"""A loop over the rows of `mask.nonzero()` (a mixture-of-experts dispatch) becomes a loop over every index.

    expert_hit = torch.greater(expert_mask.sum(dim=(-1, -2)), 0).nonzero()
    for expert_idx in expert_hit:          ->    for expert_idx in range(expert_mask.shape[0]):
        expert_idx = expert_idx[0]                   ...
        ... expert_mask[expert_idx] ...              ... expert_mask[expert_idx] ...

The rows of `nonzero()` are a data-dependent number of 1-element tensors: dynamo cannot unroll a loop over
them (and `self[f"expert_{idx[0]}"]` needs a Python int), so every such loop breaks the graph. A loop over
`range(n)` has a static trip count and a Python int index; an index whose mask row is all zeros selects no
tokens and adds nothing, so the result is the same. The `torch.where(mask[i])` inside still has a
data-dependent size, which needs `torch._dynamo.config.capture_dynamic_output_shape_ops = True` (the fix
for that break, proposed beside the compile call).
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from torchmend.analysis import match as m
from torchmend.analysis.source import Context, SourceFile
from torchmend.codemods.base import UNSAFE, NoFix, Proposal, Result
from torchmend.model import Finding

_NOTE = (
    "every index is visited, also those with no rows in the mask (they select nothing and add nothing); "
    "the selection inside the loop still has a data-dependent size: it compiles with "
    "`torch._dynamo.config.capture_dynamic_output_shape_ops = True`"
)


def _nonzero_of(value: cst.BaseExpression) -> cst.BaseExpression | None:
    """`M` of `M.nonzero()` or `torch.nonzero(M)` (no other arguments), else None."""
    if not isinstance(value, cst.Call):
        return None
    func = value.func
    if isinstance(func, cst.Attribute) and func.attr.value == "nonzero":
        if not value.args and not (isinstance(func.value, cst.Name) and func.value.value == "torch"):
            return func.value
        if isinstance(func.value, cst.Name) and func.value.value == "torch" and len(value.args) == 1:
            if value.args[0].keyword is None and not value.args[0].star:
                return value.args[0].value
    return None


def _count(mask: cst.BaseExpression) -> cst.BaseExpression:
    """An expression for the number of rows of `mask`: `A.shape[0]` when the mask is `A.sum(dim=(-1, -2))`
    compared with something (the usual `torch.greater(A.sum(dim=(-1, -2)), 0)`), else `mask.shape[0]`."""
    summed = None
    if isinstance(mask, cst.Call) and mask.args and not mask.args[0].keyword:
        summed = mask.args[0].value  # torch.greater(X, 0) / torch.gt(X, 0)
    elif isinstance(mask, cst.Comparison):
        summed = mask.left
    if summed is not None and m.matches(
        summed,
        m.Call(func=m.Attribute(value=m.Name(), attr=m.Name("sum")), args=[m.Arg(keyword=m.Name("dim"))]),
    ):
        assert isinstance(summed, cst.Call) and isinstance(summed.func, cst.Attribute)
        dims = summed.args[0].value
        negative = isinstance(dims, cst.Tuple) and all(
            isinstance(e.value, cst.UnaryOperation) and isinstance(e.value.operator, cst.Minus) for e in dims.elements
        )
        if negative:
            return cst.parse_expression(f"{cst.Module([]).code_for_node(summed.func.value)}.shape[0]")
    return cst.Subscript(
        value=cst.Attribute(value=mask, attr=cst.Name("shape")),
        slice=[cst.SubscriptElement(cst.Index(cst.Integer("0")))],
    )


def _is_first_item(node: cst.CSTNode, var: str) -> bool:
    """`var[0]`"""
    return m.matches(node, m.Subscript(value=m.Name(var), slice=[m.SubscriptElement(m.Index(m.Integer("0")))]))


def _row_index(node: cst.CSTNode, var: str) -> bool:
    """`a[var]`"""
    return m.matches(node, m.Subscript(slice=[m.SubscriptElement(m.Index(m.Name(var)))]))


def _squeezed_row(node: cst.CSTNode, var: str) -> bool:
    """`a[var].squeeze(0)`: indexing with the 1-row tensor keeps a leading dim of 1 that squeeze(0) drops."""
    return (
        isinstance(node, cst.Call)
        and isinstance(node.func, cst.Attribute)
        and node.func.attr.value == "squeeze"
        and _row_index(node.func.value, var)
        and len(node.args) == 1
        and m.matches(node.args[0], m.Arg(value=m.Integer("0"), keyword=None))
    )


class _Body(cst.CSTTransformer):
    """The loop body with the index as a Python int: `v[0]` -> `v`, `a[v].squeeze(0)` -> `a[v]`. Any other
    use of `v` (the row as a tensor) is counted in `other`: then there is no fix. (A body that starts with
    `v = v[0]` uses `v` as the index from there on: the caller drops that line and keeps the rest.)"""

    def __init__(self, var: str) -> None:
        super().__init__()
        self.var = var
        self.other = 0
        self._index_uses: set[cst.CSTNode] = set()

    def visit_Subscript(self, node: cst.Subscript) -> bool:
        if _is_first_item(node, self.var):
            self._index_uses.add(node.value)
        return True

    def visit_Call(self, node: cst.Call) -> bool:
        if _squeezed_row(node, self.var):
            assert isinstance(node.func, cst.Attribute) and isinstance(node.func.value, cst.Subscript)
            self._index_uses.add(node.func.value.slice[0].slice.value)  # type: ignore[attr-defined]
        return True

    def visit_Name(self, node: cst.Name) -> None:
        if node.value == self.var and node not in self._index_uses:
            self.other += 1

    def leave_Subscript(self, original: cst.Subscript, updated: cst.Subscript) -> cst.BaseExpression:
        return cst.Name(self.var) if _is_first_item(original, self.var) else updated

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        if _squeezed_row(original, self.var):
            assert isinstance(updated.func, cst.Attribute)
            return updated.func.value
        return updated


def _uses(src: SourceFile, scope_root: cst.CSTNode, name: str) -> int:
    return sum(1 for n in src.nodes_in(scope_root, cst.Name) if n.value == name)


@dataclass(frozen=True)
class LoopPlan:
    """The rewrite of one loop: the `H = M.nonzero()` statement goes, the loop becomes `new_loop`."""

    assign: cst.SimpleStatementLine
    loop: cst.For
    new_loop: cst.For


def plan(src: SourceFile, stmt: cst.CSTNode | None) -> LoopPlan | tuple[str, str] | None:
    """The loop rewrite when `stmt` is `H = M.nonzero()` and `H` is then iterated by a `for`; (reason, advice)
    when it is that shape but the loop uses its rows in a way this rewrite cannot keep; None otherwise."""
    if stmt is None or not m.matches(stmt, m.SimpleStatementLine(body=[m.Assign(targets=[m.AssignTarget(m.Name())])])):
        return None
    assert isinstance(stmt, cst.SimpleStatementLine) and isinstance(stmt.body[0], cst.Assign)
    assign = stmt.body[0]
    mask = _nonzero_of(assign.value)
    if mask is None:
        return None
    hit = assign.targets[0].target
    assert isinstance(hit, cst.Name)
    func = src.enclosing(stmt, cst.FunctionDef)
    if func is None:
        return None
    loops = [
        f
        for f in src.nodes_in(func, cst.For)
        if m.matches(f.iter, m.Name(hit.value)) and isinstance(f.target, cst.Name)
    ]
    if len(loops) != 1 or src.line_of(loops[0]) < src.line_of(stmt):
        return None
    loop = loops[0]
    if _uses(src, func, hit.value) != 2:  # the assignment and the loop: nothing else reads the rows
        return f"`{hit.value}` (the rows of nonzero()) is also used outside the loop over it", ""
    var = loop.target.value  # type: ignore[attr-defined]
    stmts = list(loop.body.body)
    first = stmts[0] if stmts else None
    if first is not None and m.matches(
        first, m.SimpleStatementLine(body=[m.Assign(targets=[m.AssignTarget(m.Name(var))])])
    ):
        assert isinstance(first, cst.SimpleStatementLine) and isinstance(first.body[0], cst.Assign)
        if not _is_first_item(first.body[0].value, var):
            return None
        # `v = v[0]` first: from there on `v` is the index (a 0-dim tensor, now a Python int)
        new_body = loop.body.with_changes(body=stmts[1:])
        other = 0
    else:
        body = _Body(var)
        visited = loop.body.visit(body)
        assert isinstance(visited, cst.BaseSuite)
        new_body = visited
        other = body.other
    if other:
        return (
            f"the loop uses its row `{var}` as a tensor, not only its index (`{var}[0]`, `mask[{var}].squeeze(0)`)",
            "loop over `range(n)` with a Python int index and select with `torch.where(mask[i])` inside, then set "
            "`torch._dynamo.config.capture_dynamic_output_shape_ops = True` before compiling",
        )
    new_loop = loop.with_changes(iter=cst.Call(func=cst.Name("range"), args=[cst.Arg(_count(mask))]), body=new_body)
    return LoopPlan(stmt, loop, new_loop)


def loop_rewritten(src: SourceFile, loop: cst.For) -> bool:
    """Whether `loop` (over the rows of a nonzero()) is one this rewrite turns into a loop over range(n)."""
    if not isinstance(loop.iter, cst.Name):
        return False
    for ref in src.referents(loop.iter):
        stmt = src.enclosing(ref, cst.SimpleStatementLine)
        found = plan(src, stmt)
        if isinstance(found, LoopPlan) and found.loop is loop:
            return True
    return False


def propose_expert_loop(finding: Finding, ctx: Context) -> Result | None:
    """The loop rewrite for a finding on `H = M.nonzero()` followed by `for v in H:`; None when the line is not
    that shape (another fix may apply); NoFix when it is but the loop uses its rows as tensors."""
    src = ctx.file(finding.path)
    found = plan(src, src.statement_at(finding.line))
    if found is None:
        return None
    if isinstance(found, tuple):
        return NoFix(finding, *found)
    return Proposal(
        (finding,),
        finding.rule,
        src.path,
        replace={found.assign: cst.RemovalSentinel.REMOVE, found.loop: found.new_loop},
        safety=UNSAFE,
        why="loop over every index instead of the rows of nonzero(), whose number depends on the data",
        note=_NOTE,
    )
