"""The branches of an `if` chain as operations (assignments, returns) aligned slot by slot across branches."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Union, cast

import libcst as cst

from torchmend.analysis.source import SourceFile, simple_names
from torchmend.codemods.fixes.branch_to_where.condition import (
    COND_ADVICE,
    RAISE_ADVICE,
    WHILE_ADVICE,
    NeedsCond,
    Unfixable,
    code,
    is_tensor_test,
    paren,
    self_attribute,
    short,
    tensor_attribute,
    walk,
)

Body = Union[cst.IndentedBlock, cst.SimpleStatementSuite]
StmtLine = Union[cst.SimpleStatementLine, cst.SimpleStatementSuite]


def as_body(suite: cst.BaseSuite) -> Body:
    """A suite as the union it always is: libcst has no BaseSuite but these two."""
    return cast(Body, suite)


# --- the branches --------------------------------------------------------------------------------------


@dataclass(eq=False)
class Line:
    node: StmtLine
    leading: list[cst.EmptyLine]  # its comment lines
    comment: cst.Comment | None
    used: bool = False


RETURN = "<return>"  # the target of a `return` op


@dataclass(eq=False)
class Op:
    """One small statement of a branch: `targets = values` (or `return values`)."""

    targets: tuple[str, ...]
    values: tuple[cst.BaseExpression, ...]
    line: Line
    small: cst.BaseSmallStatement
    tuple_form: bool = False
    aug: bool = False
    is_return: bool = False

    @property
    def key(self) -> tuple[object, ...]:
        return (self.targets, self.tuple_form, len(self.values), self.is_return)

    @property
    def reads(self) -> set[str]:
        return set().union(*(simple_names(v) for v in self.values))


@dataclass(eq=False)
class Branch:
    test: cst.BaseExpression | None  # None: the else branch
    ops: list[Op] = field(default_factory=list)
    comments: list[cst.EmptyLine] = field(default_factory=list)  # `elif`/`else` header and footer comments
    header: cst.Comment | None = None


def comment_lines(lines: Sequence[cst.EmptyLine]) -> list[cst.EmptyLine]:
    return [ln.with_changes(indent=True) for ln in lines if ln.comment is not None]


def as_line(c: cst.Comment | None) -> list[cst.EmptyLine]:
    return [cst.EmptyLine(comment=c)] if c is not None else []


def describe_target(t: cst.BaseExpression) -> str:
    if isinstance(t, cst.Attribute):
        return (
            f"the branch sets `{short(t)}`, state that outlives the call; torchmend only merges branches that "
            "set local names or tensors the class registers (buffers)"
        )
    if isinstance(t, cst.Subscript):
        return (
            f"the branch writes into `{short(t)}` in place; torchmend only merges branches that set whole local names"
        )
    return f"the branch unpacks into `{short(t)}`; write one assignment per name first"


def in_place(src: SourceFile, e: cst.CSTNode) -> str:
    for call in walk(e, cst.Call):
        assert isinstance(call, cst.Call)
        if isinstance(call.func, cst.Attribute):
            name = call.func.attr.value
            if name.endswith("_") and not name.startswith("_"):
                return f"`{short(call)}` modifies a tensor in place"
        if any(a.keyword is not None and a.keyword.value == "inplace" and not _is_false(a.value) for a in call.args):
            return f"`{short(call)}` works in place"
    for named in walk(e, cst.NamedExpr):
        return f"`{short(named)}` assigns inside an expression"
    return ""


def _is_false(e: cst.BaseExpression) -> bool:
    return isinstance(e, cst.Name) and e.value == "False"


def ops_of(src: SourceFile, small: cst.BaseSmallStatement, line: Line) -> list[Op]:
    """The small statement as ops: `a, b = x, y` is two when no value reads `a` or `b` (so the order is free)."""
    op = op_of(src, small, line)
    if op is None:
        return []
    if op.tuple_form and not op.is_return and not set(op.targets) & op.reads:
        return [Op((n,), (v,), line, small) for n, v in zip(op.targets, op.values)]
    return [op]


def op_of(src: SourceFile, small: cst.BaseSmallStatement, line: Line) -> Op | None:
    if isinstance(small, cst.Pass):
        return None
    if isinstance(small, cst.Expr):
        if isinstance(small.value, (cst.BaseString, cst.Ellipsis)):
            return None
        problem = in_place(src, small.value)
        if problem:
            raise Unfixable(
                f"in the branch, {problem}; that changes the tensor for every name bound to it",
                "write it out of place (`x = x.clamp(max=1)` for `x.clamp_(max=1)`), then torchmend can "
                "merge the branch",
            )
        what = (
            f"calls `{short(small.value)}`"
            if isinstance(small.value, cst.Call)
            else f"evaluates `{short(small.value)}`"
        )
        raise Unfixable(
            f"the branch {what} for its effect; torch.where and torch.cond only choose between computed values",
            "move the call out of the branch, or gate it with torch.compiler.is_compiling() if it only "
            "logs; " + COND_ADVICE,
        )
    if isinstance(small, cst.Raise):
        raise Unfixable(
            "the branch raises; neither torch.where nor torch.cond can raise depending on a tensor's value",
            RAISE_ADVICE,
        )
    if isinstance(small, (cst.Break, cst.Continue)):
        raise Unfixable(
            f"the branch leaves the loop (`{code(small).strip()}`): how many times the loop runs "
            "depends on the tensor's value",
            WHILE_ADVICE,
        )
    if isinstance(small, cst.Return):
        if small.value is None or (isinstance(small.value, cst.Name) and small.value.value == "None"):
            raise Unfixable("a branch returns nothing; torch.where needs a tensor from every branch")
        problem = in_place(src, small.value)
        if problem:
            raise Unfixable(f"the branch's {problem}")
        if isinstance(small.value, cst.Tuple) and not any(
            isinstance(el, cst.StarredElement) for el in small.value.elements
        ):
            return Op(
                (RETURN,), tuple(el.value for el in small.value.elements), line, small, tuple_form=True, is_return=True
            )
        return Op((RETURN,), (small.value,), line, small, is_return=True)
    if isinstance(small, cst.Assign):
        if len(small.targets) != 1:
            raise Unfixable("the branch has a chained assignment (`a = b = ...`); split it first", "")
        target, value = small.targets[0].target, small.value
        problem = in_place(src, value)
        if problem:
            raise Unfixable(f"in the branch, {problem}")
        if isinstance(target, cst.Name):
            return Op((target.value,), (value,), line, small)
        if (
            isinstance(target, (cst.Tuple, cst.List))
            and isinstance(value, (cst.Tuple, cst.List))
            and len(target.elements) == len(value.elements)
            and all(isinstance(el, cst.Element) and isinstance(el.value, cst.Name) for el in target.elements)
            and all(isinstance(el, cst.Element) for el in value.elements)
        ):
            names = tuple(
                el.value.value
                for el in target.elements  # all of them pass (checked above)
                if isinstance(el, cst.Element) and isinstance(el.value, cst.Name)
            )
            return Op(names, tuple(el.value for el in value.elements), line, small, tuple_form=True)
        if isinstance(target, (cst.Tuple, cst.List)) and names_only(target):
            raise NeedsCond(f"the branch unpacks `{short(value)}` (torch.where cannot split it)")
        dotted = self_attribute(target)
        if dotted and tensor_attribute(src, small, dotted):  # `self.running_max = ...`: a buffer of the module
            return Op((dotted,), (value,), line, small)
        raise Unfixable(describe_target(target), "")
    if isinstance(small, cst.AugAssign):
        if not isinstance(small.target, cst.Name):
            raise Unfixable(describe_target(small.target), "")
        problem = in_place(src, small.value)
        if problem:
            raise Unfixable(f"in the branch, {problem}")
        op_name = type(small.operator).__name__.removesuffix("Assign")
        binary = getattr(cst, op_name)()
        value = cst.BinaryOperation(cst.Name(small.target.value), binary, paren(small.value, (cst.UnaryOperation,)))
        return Op((small.target.value,), (value,), line, small, aug=True)
    if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name) and small.value is not None:
        problem = in_place(src, small.value)
        if problem:
            raise Unfixable(f"in the branch, {problem}")
        return Op((small.target.value,), (small.value,), line, small)
    raise Unfixable(
        f"the branch has a `{code(small).strip().split()[0]}` statement; torch.where and "
        "torch.cond only choose between computed values",
        "",
    )


def _branch(
    src: SourceFile, test: cst.BaseExpression | None, suite: cst.BaseSuite, leading: Sequence[cst.EmptyLine]
) -> Branch:
    branch = Branch(test, comments=comment_lines(leading))
    body = as_body(suite)
    if isinstance(body, cst.SimpleStatementSuite):
        branch.header = body.trailing_whitespace.comment
        line = Line(body, [], None)
        smalls = [(line, s) for s in body.body]
    else:
        branch.header = body.header.comment
        smalls = []
        for stmt in body.body:
            if not isinstance(stmt, cst.SimpleStatementLine):
                kind = type(stmt).__name__.lower()
                raise NeedsCond(
                    f"the branch has a nested `{kind}` block (torch.where only merges straight-line assignments)"
                )
            line = Line(stmt, comment_lines(stmt.leading_lines), stmt.trailing_whitespace.comment)
            smalls.extend((line, s) for s in stmt.body)
        branch.comments += comment_lines(body.footer)
    for line, small in smalls:
        for op in ops_of(src, small, line):
            if branch.ops and branch.ops[-1].is_return:
                raise Unfixable("the branch has code after its `return`", "")
            branch.ops.append(op)
    return branch


def chain(src: SourceFile, node: cst.If) -> list[Branch]:
    """The `if`, its `elif`s and its `else` (an empty one when there is none), as branches."""
    branches = [_branch(src, node.test, node.body, [])]
    cur: cst.If = node
    while isinstance(cur.orelse, cst.If):
        cur = cur.orelse
        branches.append(_branch(src, cur.test, cur.body, cur.leading_lines))
    if isinstance(cur.orelse, cst.Else):
        branch = _branch(src, None, cur.orelse.body, cur.orelse.leading_lines)
        branch.comments[:0] = as_line(branch.header)  # `else:  # why` goes above what the else did
        branch.header = None
        branches.append(branch)
    else:
        branches.append(Branch(None))
    return branches


# --- where names live ------------------------------------------------------------------------------------


@dataclass
class Names:
    src: SourceFile
    node: cst.If
    consumed: cst.CSTNode | None  # the `return` after the `if` that became its else branch
    reserved: set[str] = field(default_factory=set)  # names the rewrite itself introduces

    def __post_init__(self) -> None:
        self.scope = self.src.scopes.get(self.node)
        fn = self.src.enclosing(self.node, (cst.FunctionDef, cst.Lambda))
        self.function = fn if fn is not None else self.src.module
        self.declared = {
            n.name.value
            for d in self.src.nodes_in(self.function, (cst.Global, cst.Nonlocal))
            if isinstance(d, (cst.Global, cst.Nonlocal))
            for n in d.names
        }
        self.start = self.src.positions[self.node].start
        self.end = self.src.positions[self.node].end
        self.loops = [
            a
            for a in self.src.ancestors(self.node)
            if isinstance(a, (cst.For, cst.While))
            and (self.function is self.src.module or self.function in set(self.src.ancestors(a)))
        ]

    def inside(self, n: cst.CSTNode) -> bool:
        anc = set(self.src.ancestors(n))
        return self.node in anc or (self.consumed is not None and self.consumed in anc)

    def defined_before(self, name: str) -> bool:
        if "." in name or name in self.declared:  # `self.x`: an attribute set on the object before the call
            return True
        for a in self.scope.assignments[name] if self.scope is not None else ():
            node = getattr(a, "node", None)
            pos = self.src.positions.get(node) if node is not None else None
            if (
                node is not None
                and pos is not None
                and (pos.start.line, pos.start.column) < (self.start.line, self.start.column)
                and not self.inside(node)
            ):
                return True
        return False

    def read_after(self, name: str) -> bool:
        """Whether the value `name` has after the `if` is read: later, in a later loop turn, or by a closure."""
        if self.scope is None:
            return True
        for access in self.scope.accesses[name]:
            n = access.node
            if self.inside(n) or n not in self.src.positions:
                continue
            pos = self.src.positions[n].start
            if (pos.line, pos.column) > (self.end.line, self.end.column):
                return True
            if any(loop in set(self.src.ancestors(n)) for loop in self.loops):
                return True
        for n in self.src.nodes_in(self.function, cst.Name):
            if n.value == name and self.src.scopes.get(n) is not self.scope and not self.inside(n):
                return True
        return False

    def used(self) -> set[str]:
        return {n.value for n in self.src.nodes_in(self.function, cst.Name)} | self.reserved


def merge(slots: list[dict[int, Op]], k: int, ops: list[Op]) -> list[dict[int, Op]]:
    """Line up branch k's statements with those before (longest common run of same-target statements)."""
    a = [next(iter(s.values())).key for s in slots]
    b = [op.key for op in ops]
    lcs = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i in range(len(a) - 1, -1, -1):
        for j in range(len(b) - 1, -1, -1):
            lcs[i][j] = lcs[i + 1][j + 1] + 1 if a[i] == b[j] else max(lcs[i + 1][j], lcs[i][j + 1])
    out: list[dict[int, Op]] = []
    i = j = 0
    while i < len(a) and j < len(b):
        if a[i] == b[j]:
            out.append({**slots[i], k: ops[j]})
            i, j = i + 1, j + 1
        elif lcs[i + 1][j] >= lcs[i][j + 1]:
            out.append(slots[i])
            i += 1
        else:
            out.append({k: ops[j]})
            j += 1
    return out + slots[i:] + [{k: op} for op in ops[j:]]


def next_statement(src: SourceFile, node: cst.BaseStatement) -> cst.BaseStatement | None:
    parent = src.parents.get(node)
    body = parent.body if isinstance(parent, (cst.IndentedBlock, cst.Module)) else ()
    for i, stmt in enumerate(body):
        if stmt is node:
            return body[i + 1] if i + 1 < len(body) else None
    return None


def is_elif_of(src: SourceFile, node: cst.If) -> bool:
    parent = src.parents.get(node)
    return isinstance(parent, cst.If) and parent.orelse is node


def wrap(
    src: SourceFile, node: cst.If, lines: Sequence[cst.BaseStatement], python_part: cst.BaseExpression | None
) -> dict[cst.CSTNode, object]:
    """The edit that puts `lines` where the `if` was: under the Python part of its test when it had one
    (`if flag:`, keeping its else), and as the `else:` of the `if` above when it was an `elif`."""
    is_elif = is_elif_of(src, node)
    stmts = list(lines)
    if python_part is not None:
        stmts = [
            node.with_changes(
                test=python_part, body=cst.IndentedBlock(stmts), leading_lines=[] if is_elif else node.leading_lines
            )
        ]
    elif not is_elif:
        first = cast(Union[cst.SimpleStatementLine, cst.BaseCompoundStatement], stmts[0])  # libcst's only statements
        stmts[0] = first.with_changes(leading_lines=[*node.leading_lines, *first.leading_lines])
    if is_elif:
        return {node: cst.Else(cst.IndentedBlock(stmts), leading_lines=node.leading_lines)}
    return {node: stmts[0] if len(stmts) == 1 else cst.FlattenSentinel(stmts)}


def statements(suite: cst.BaseSuite) -> list[cst.BaseStatement]:
    body = as_body(suite)
    if isinstance(body, cst.SimpleStatementSuite):
        return [cst.SimpleStatementLine(body.body)]
    return list(body.body)


def names_only(target: cst.BaseExpression) -> bool:
    if isinstance(target, cst.Name):
        return True
    return isinstance(target, (cst.Tuple, cst.List)) and all(
        isinstance(el, cst.Element) and names_only(el.value) for el in target.elements
    )


def chain_start(src: SourceFile, node: cst.If) -> cst.If:
    """For an `elif`, the `if` above it when that tests a tensor too: both then become one torch.where (and
    the proposals for both findings are the same edit). Above a Python test, the `elif` starts its own chain."""
    while True:
        parent = src.parents.get(node)
        if not (isinstance(parent, cst.If) and parent.orelse is node and is_tensor_test(src, parent.test)):
            return node
        node = parent


def last(node: cst.If) -> cst.If:
    while isinstance(node.orelse, cst.If):
        node = node.orelse
    return node
