"""A LayerDrop-style random skip (`skip = torch.rand([]) < p`; `if not skip: h = layer(h)`) picked with
torch.where: every call runs the layer and keeps its output with the probability the draw gave, so the outputs keep
their distribution while the random stream changes (the layer's own dropout draws happen on every call). Such a
change is a safety class of its own (RANDOM_STREAM): applied only with `--allow-random-stream`, verified in
distribution over several seeds (verify/stochastic.py)."""

from __future__ import annotations

import dataclasses

import libcst as cst

from torchmend.analysis.source import SourceFile
from torchmend.analysis.torch_ops import RANDOM
from torchmend.codemods.base import RANDOM_STREAM, Proposal
from torchmend.codemods.fixes.branch_to_where.condition import Unfixable, call_name, short, walk
from torchmend.model import Finding

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


# --- `if p < self.layerdrop: continue` (the BART family's form) ----------------------------------------------

SKIP_NAME = "layer_skipped"


def continue_skip(finding: Finding, src: SourceFile, node: cst.If, draw: str) -> Proposal | str:
    """`if <random test>: continue` in a `for` loop whose remaining statements are plain assignments
    (`h = layer(h, ...)`): the test kept in a flag (False when it is not drawn), the assignments of values the loop
    carries picked with torch.where(flag, old, new). A reason (str) when the loop is not of that shape."""
    if node.orelse is not None or not only_continue(node.body):
        return "the random test's branch does more than `continue`"
    loop = src.enclosing(node, (cst.For, cst.FunctionDef))
    if not isinstance(loop, cst.For) or not isinstance(loop.body, cst.IndentedBlock):
        return "the random `continue` is not in a `for` loop"
    outer = next((s for s in loop.body.body if s is node or node in _descendants(src, s)), None)
    if outer is None:
        return "the random `continue` is not in a `for` loop"
    tail = list(loop.body.body[loop.body.body.index(outer) + 1 :])
    if outer is not node and (
        src.nodes_in(outer, (cst.Continue, cst.Break, cst.Return)) != src.nodes_in(node, cst.Continue)
    ):
        return "the statement around the random `continue` leaves the loop in other ways too"
    if not tail:
        return "nothing follows the random `continue` in the loop"
    fn = src.enclosing(loop, cst.FunctionDef)
    if fn is None or any(n.value == SKIP_NAME for n in src.nodes_in(fn, cst.Name)):
        return f"the function already uses the name `{SKIP_NAME}`"
    where, imports = src.torch_expr("where")
    as_tensor, more = src.torch_expr("as_tensor")
    flag = cst.Name(SKIP_NAME)
    picked = _pick_assignments(src, tail, flag, src.line_of(loop), where, as_tensor)
    if isinstance(picked, str):
        return picked
    replace: dict[cst.CSTNode, cst.CSTNode] = dict(picked)
    set_flag = cst.SimpleStatementLine(
        [cst.Assign([cst.AssignTarget(flag)], node.test)], leading_lines=node.leading_lines
    )
    replace[node] = set_flag
    reset = cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(flag)], cst.Name("False"))])
    return Proposal(
        (finding,),
        finding.rule,
        src.path,
        why=f"keep the random skip drawn by `{draw}` in a flag and pick the layer's result with torch.where "
        "instead of `continue` (the layer runs every call, its output kept as often)",
        safety=RANDOM_STREAM,
        replace=replace,
        insert_before={outer: [reset]},
        imports=tuple(dict.fromkeys((*imports, *more))),
        note=RANDOM_STREAM_NOTE,
        shape="random-skip-where",
    )


# --- `if r < p: flag = True` ... `if not flag: h = layer(h)` (the flag set in a branch) -------------------------


def flag_skip(finding: Finding, src: SourceFile, node: cst.If, fix: Proposal, draw: str) -> Proposal | str | None:
    """`if <random test>: flag = True` followed, in the same block of the loop, by `if not flag:` over plain
    assignments: one change of both. `fix` (the exact torch.where of the flag, `flag = torch.where(test, True,
    flag)`) alone only moves the break to the `if` that tests the flag, whose test is then a tensor; here that `if`
    becomes `h = torch.where(torch.as_tensor(flag), h, layer(h))` too. None when no `if` tests the flag (the exact
    rewrite stands alone); a reason (str) when one does, in a shape not rewritten."""
    stmts = node.body.body if isinstance(node.body, cst.IndentedBlock) else [node.body]
    only = stmts[0].body[0] if len(stmts) == 1 and isinstance(stmts[0], cst.SimpleStatementLine) else None
    if not (
        isinstance(only, cst.Assign)
        and len(only.targets) == 1
        and isinstance(only.targets[0].target, cst.Name)
        and isinstance(only.value, cst.Name)
        and only.value.value == "True"
    ):
        return None
    flag = only.targets[0].target.value
    later = _flag_test(src, node, flag)
    if not isinstance(later, cst.If):
        return later
    if not isinstance(later.body, cst.IndentedBlock):
        return f"`if not {flag}:` (line {src.line_of(later)}) has its body on the same line"
    body = list(later.body.body)
    where, imports = src.torch_expr("where")
    as_tensor, more = src.torch_expr("as_tensor")
    line = src.line_of(later)
    picked = _pick_assignments(src, body, cst.Name(flag), line, where, as_tensor)
    if isinstance(picked, str):
        return picked.replace("the random `continue`", f"`if not {flag}:`")
    replace: dict[cst.CSTNode, object] = dict(fix.replace)
    # every statement is a one-assignment SimpleStatementLine (_pick_assignments checked)
    new = [s.visit(_Swap(picked)) for s in body if isinstance(s, cst.SimpleStatementLine)]
    first = new[0]
    assert isinstance(first, cst.SimpleStatementLine)
    new[0] = first.with_changes(leading_lines=later.leading_lines)
    replace[later] = cst.FlattenSentinel(new)  # type: ignore[type-var]
    return dataclasses.replace(
        fix,
        replace=replace,  # type: ignore[arg-type]
        imports=tuple(dict.fromkeys((*fix.imports, *imports, *more))),
        safety=RANDOM_STREAM,
        why=f"keep the random skip drawn by `{draw}` in the flag `{flag}` as a tensor and pick the layer's result "
        f"with torch.where instead of `if not {flag}:` (line {line}; the layer runs every call, its output kept "
        "as often)",
        note=RANDOM_STREAM_NOTE,
        alternative="",
        fallbacks=(),
        shape="random-skip-where",
    )


def _flag_test(src: SourceFile, node: cst.If, flag: str) -> cst.If | str | None:
    """The `if not <flag>:` (no else) that first reads the flag after the statement of the loop body holding
    `node`; a reason when an `if` of another shape tests it first; None when no `if` does."""
    loop = src.enclosing(node, (cst.For, cst.FunctionDef))
    block = loop.body if isinstance(loop, cst.For | cst.FunctionDef) else None
    if not isinstance(block, cst.IndentedBlock):
        return None
    outer = next((s for s in block.body if s is node or node in _descendants(src, s)), None)
    if outer is None:
        return None
    for stmt in block.body[block.body.index(outer) + 1 :]:
        reads = [n for n in src.nodes_in(stmt, cst.Name) if n.value == flag]
        if not reads:
            continue
        if not isinstance(stmt, cst.If) or not any(n.value == flag for n in src.nodes_in(stmt.test, cst.Name)):
            return None
        test = stmt.test
        if (
            stmt.orelse is None
            and isinstance(test, cst.UnaryOperation)
            and isinstance(test.operator, cst.Not)
            and isinstance(test.expression, cst.Name)
            and test.expression.value == flag
            and len(reads) == 1
        ):
            return stmt
        return (
            f"the skip's flag `{flag}` is tested on line {src.line_of(stmt)} in another shape than `if not {flag}:` "
            "over plain assignments (an else branch, or a value such as None set when the layer is skipped); the "
            "flag's own rewrite would only move the graph break to that test"
        )
    return None


class _Swap(cst.CSTTransformer):
    """Put the picked assignments (the same nodes _pick_assignments was given) in place."""

    def __init__(self, picked: dict[cst.CSTNode, cst.CSTNode]) -> None:
        super().__init__()
        self.picked = picked

    def leave_Assign(self, original: cst.Assign, updated: cst.Assign) -> cst.Assign:
        new = self.picked.get(original)
        return new if isinstance(new, cst.Assign) else updated


def _pick_assignments(
    src: SourceFile,
    stmts: list[cst.BaseStatement],
    flag: cst.BaseExpression,
    line: int,
    where: cst.BaseExpression,
    as_tensor: cst.BaseExpression,
) -> dict[cst.CSTNode, cst.CSTNode] | str:
    """`name = value` statements skipped when `flag` is true: each name set before `line` (a value carried) becomes
    `name = torch.where(torch.as_tensor(flag), name, value)`; a name set only here stays (computed every call)
    unless it is read elsewhere. A reason (str) for any other statement."""
    spans = [(src.line_of(s), src.positions[s].end.line) for s in stmts]
    replace: dict[cst.CSTNode, cst.CSTNode] = {}
    for stmt in stmts:
        assign = stmt.body[0] if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 else None
        if not (
            isinstance(assign, cst.Assign)
            and len(assign.targets) == 1
            and isinstance(assign.targets[0].target, cst.Name)
        ):
            return f"line {src.line_of(stmt)} after the random `continue` is not a plain `name = value` assignment"
        if src.nodes_in(stmt, (cst.Yield, cst.Await)):
            return f"line {src.line_of(stmt)} yields or awaits"
        name = assign.targets[0].target.value
        if not _assigned_before(src, assign.targets[0].target, line):
            if _read_outside(src, assign.targets[0].target, spans):
                return f"`{name}` (line {src.line_of(stmt)}) is read after the loop but not set before it"
            continue
        picked = cst.Call(
            where,
            [cst.Arg(cst.Call(as_tensor, [cst.Arg(flag)])), cst.Arg(cst.Name(name)), cst.Arg(assign.value)],
        )
        replace[assign] = assign.with_changes(value=picked)
    if not replace:
        return "no value the loop carries is set after the random `continue`"
    return replace


def only_continue(body: cst.BaseSuite) -> bool:
    stmts = body.body if isinstance(body, cst.IndentedBlock) else [body]
    return (
        len(stmts) == 1
        and isinstance(stmts[0], cst.SimpleStatementLine | cst.SimpleStatementSuite)
        and len(stmts[0].body) == 1
        and isinstance(stmts[0].body[0], cst.Continue)
    )


def _descendants(src: SourceFile, root: cst.CSTNode) -> set[cst.CSTNode]:
    return set(src.nodes_in(root, cst.If))


def _assigned_before(src: SourceFile, target: cst.Name, line: int) -> bool:
    scope = src.scopes.get(target)
    if scope is None:
        return False
    for a in scope.assignments[target.value]:
        node = getattr(a, "node", None)
        if node is not None and node in src.positions and src.line_of(node) < line:
            return True
    return False


def _read_outside(src: SourceFile, target: cst.Name, spans: list[tuple[int, int]]) -> bool:
    scope = src.scopes.get(target)
    if scope is None:
        return True
    for access in scope.accesses[target.value]:
        node = access.node
        if node in src.positions and not any(lo <= src.line_of(node) <= hi for lo, hi in spans):
            return True
    return False


_RANDOM_ADVICE = (
    "to keep the skip and its numerics, draw it on the host outside the compiled model (e.g. `skips = "
    "(torch.rand(num_layers) < p).tolist()` in the training loop, passed in as Python bools: one graph per skip "
    "pattern seen) and leave the graph break as it is otherwise; if a different random stream is acceptable, "
    "`h = torch.where(skip, h, layer(h))` runs every layer (slower) with the same skip probability; or set the "
    "skip probability to 0 while compiling"
)


def random_draw(src: SourceFile, e: cst.CSTNode, depth: int = 3) -> cst.Call | None:
    """The random draw (`torch.rand([])`, `np.random.rand()`, ...) a test's value comes from, followed through
    the local assignments of the names it reads (a LayerDrop-style random skip)."""
    for call in walk(e, cst.Call):
        name, torchy = call_name(src, call)
        qualified = src.qualified_names(call.func) if call.func in src.positions else set()
        if (torchy and name in RANDOM) or any(q.startswith(("numpy.random.", "random.")) for q in qualified):
            return call
    if depth == 0:
        return None
    for n in walk(e, cst.Name):
        scope = src.scopes.get(n) if n in src.positions else None
        if scope is None:
            continue
        for assignment in scope.assignments[n.value]:
            target = getattr(assignment, "node", None)
            parent = src.parents.get(target) if target is not None else None
            stmt = src.parents.get(parent) if isinstance(parent, cst.AssignTarget) else None
            if isinstance(stmt, cst.Assign) and (found := random_draw(src, stmt.value, depth - 1)) is not None:
                return found
    return None


def random_skip(src: SourceFile, test: cst.BaseExpression) -> Unfixable | None:
    """Why a test on a random draw is not rewritten: torch.where would run the code it skips on every call."""
    draw = random_draw(src, test)
    if draw is None:
        return None
    return Unfixable(
        f"the test depends on a random draw (`{short(draw)}`, line {src.line_of(draw)}): a random skip such "
        "as LayerDrop. torch.where would run the skipped code on every call (the compute it saves is lost) "
        "and its own random draws (dropout) would shift the random stream, so losses and gradients differ; "
        "torch.cond traces those draws differently too (measured on torch 2.13)",
        _RANDOM_ADVICE,
    )
