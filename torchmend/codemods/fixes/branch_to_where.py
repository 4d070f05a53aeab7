"""Rewrite a Python `if` on a tensor value into `torch.where` (TM103).

The branches of the `if` (and its `elif`s and `else`) are lined up statement by statement: a statement
that assigns the same names in several branches becomes one `torch.where`; one that only some branches
have keeps the old value in the others (`n = torch.where(c, new, n)`). Every branch is then computed,
and the condition picks, so the rewrite is exact as long as computing the branch not taken is harmless:
that is what the safety check looks at.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Iterator, Sequence, Union

import libcst as cst

from torchmend.codemods.analysis import values
from torchmend.codemods.base import Invalid, Valid, SAFE, UNSAFE, Codemod, NoFix, Proposal, Result
from torchmend.codemods.source import Context, SourceFile, simple_names
from torchmend.codemods.torch_ops import (
    BOOLEAN_RESULT,
    HARMLESS_BUILTINS,
    INF_NAN_OR_RAISE,
    RANDOM,
    TORCH_MODULES,
    WHERE_HARMLESS,
)
from torchmend.model import Finding, Where

Body = Union[cst.IndentedBlock, cst.SimpleStatementSuite]
StmtLine = Union[cst.SimpleStatementLine, cst.SimpleStatementSuite]

_ATOMS = (cst.Name, cst.Attribute, cst.Call, cst.Subscript, cst.Integer, cst.Float, cst.Imaginary, cst.SimpleString,
          cst.ConcatenatedString, cst.FormattedString, cst.List, cst.Dict, cst.Set, cst.Ellipsis)
_RICH = (cst.LessThan, cst.GreaterThan, cst.LessThanEqual, cst.GreaterThanEqual, cst.Equal, cst.NotEqual)
_WHILE_ADVICE = ("move the loop out of the compiled function (torch.compiler.disable on a helper), or run a fixed "
                 "number of iterations and mask each one with torch.where; torch._higher_order_ops.while_loop "
                 "(a prototype) traces a loop whose carried tensors keep their shapes")
_RAISE_ADVICE = ("to keep the check inside the graph, replace the branch with `torch._assert_async(~(<test>), "
                 "\"message\")` (it raises a RuntimeError, not your exception); or check outside the compiled "
                 "function")
_ASSERT_ADVICE = ("to keep the check inside the graph, use `torch._assert_async(<test>, \"message\")` (it raises a "
                  "RuntimeError when the test is false); or check outside the compiled function")
_COND_ADVICE = ("to run only one branch, rewrite it as torch.cond(<test>, then_fn, else_fn, (operands,)): both "
                "functions take the same tensors and return tensors of the same shapes and dtypes")


class _Unfixable(Exception):
    """Why this branch cannot become torch.where (turned into a NoFix by the codemod)."""

    def __init__(self, reason: str, advice: str = _COND_ADVICE) -> None:
        super().__init__(reason)
        self.reason, self.advice = reason, advice


class _NeedsCond(_Unfixable):
    """A branch shape torch.where cannot merge but torch.cond may run (nested blocks, unpacking a call)."""


def _code(node: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(node)


class _NoComments(cst.CSTTransformer):
    def leave_Comment(self, original: cst.Comment, updated: cst.Comment) -> cst.RemovalSentinel:
        return cst.RemovalSentinel.REMOVE


def _short(node: cst.CSTNode, width: int = 60) -> str:
    """The node's code on one line, for messages."""
    if isinstance(node, cst.BaseExpression) and node.lpar:
        node = node.with_changes(lpar=[], rpar=[])
    text = " ".join(_code(node.visit(_NoComments())).split())
    return text if len(text) <= width else text[: width - 3] + "..."


def _call_name(src: SourceFile, call: cst.Call) -> tuple[str, bool]:
    """The called function's last name, and whether it is (or may be, for a method) torch's."""
    func = call.func
    names = src.qualified_names(func) if func in src.positions else set()
    for q in names:
        module, _, last = q.rpartition(".")
        if module in TORCH_MODULES:
            return last, True
        if module == "builtins":
            return last, False
    if isinstance(func, cst.Attribute):
        # A method of a local value (a tensor, most likely); `self.x(...)` is a submodule or method of the user's.
        base = func.value
        return func.attr.value, not (isinstance(base, cst.Name) and base.value in ("self", "cls"))
    if isinstance(func, cst.Name):
        return func.value, False
    return "", False


# --- the test: from Python truthiness to a boolean tensor ---------------------------------------------


def _paren(e: cst.BaseExpression, keep: tuple[type, ...] = ()) -> cst.BaseExpression:
    if e.lpar or isinstance(e, _ATOMS + keep):
        return e
    return e.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


def _strip(e: cst.BaseExpression) -> cst.BaseExpression:
    return e.with_changes(lpar=[], rpar=[]) if e.lpar and "\n" not in _code(e) else e


def _is_bool_call(src: SourceFile, e: cst.BaseExpression) -> bool:
    if not isinstance(e, cst.Call):
        return False
    name, torchy = _call_name(src, e)
    return torchy and name in BOOLEAN_RESULT


def _flag_like(src: SourceFile, e: cst.BaseExpression) -> bool:
    """A bare name or attribute that is not known to hold a boolean tensor: most likely a Python flag."""
    return isinstance(e, (cst.Name, cst.Attribute)) and not _known_mask_name(src, e)


def _known_mask_name(src: SourceFile, e: cst.BaseExpression) -> bool:
    """`big` where every assignment of it is `big = <comparison>` or `big = x.any()`."""
    if not isinstance(e, cst.Name) or e not in src.scopes:
        return False
    scope = src.scopes[e]
    if scope is None:
        return False
    values = []
    for assignment in scope.assignments[e.value]:
        target = getattr(assignment, "node", None)
        parent = src.parents.get(target) if target is not None else None
        stmt = src.parents.get(parent) if isinstance(parent, cst.AssignTarget) else None
        if not isinstance(stmt, cst.Assign):
            return False
        values.append(stmt.value)
    return bool(values) and all(_is_bool_call(src, v) or (
        isinstance(v, cst.Comparison) and all(isinstance(t.operator, _RICH) for t in v.comparisons)
        and not values(src).is_python(v)) for v in values)


@dataclass
class _Mask:
    expr: cst.BaseExpression
    tensor: bool  # certainly a boolean tensor (else: a value whose truthiness is right, maybe a Python bool)
    leaf: cst.BaseExpression | None = None  # `expr` is `leaf != 0`


def _mask(src: SourceFile, e: cst.BaseExpression, trusted: bool) -> _Mask:
    """An expression that torch.where accepts as its condition and that is true exactly when `e` is.
    `trusted`: `e` as a whole is known to be a tensor (the finding says so)."""
    if values(src).is_python(e):
        raise _Unfixable(f"`{_short(e)}` is a Python value, not a tensor", "")
    if isinstance(e, cst.BooleanOperation):
        op = cst.BitAnd if isinstance(e.operator, cst.And) else cst.BitOr
        left, right = _mask(src, e.left, False), _mask(src, e.right, False)
        if not (left.tensor or right.tensor or trusted):
            raise _Unfixable(f"`{_short(e)}` does not look like a tensor test")
        combined = cst.BinaryOperation(
            _operand(left.expr, op), op(whitespace_before=e.operator.whitespace_before,
                                        whitespace_after=e.operator.whitespace_after),
            _operand(right.expr, op), lpar=e.lpar, rpar=e.rpar)
        return _Mask(combined, True)
    if isinstance(e, cst.UnaryOperation) and isinstance(e.operator, cst.Not):
        inner = _mask(src, e.expression, trusted)
        if inner.leaf is not None:  # `not x.sum()`: `x.sum() == 0`
            return _Mask(_truth(inner.leaf, cst.Equal()).with_changes(lpar=e.lpar, rpar=e.rpar), inner.tensor)
        if inner.tensor or trusted:
            return _Mask(cst.UnaryOperation(cst.BitInvert(), _paren(_strip(inner.expr)), lpar=e.lpar, rpar=e.rpar),
                         True)
        # `not n` for a value that may be a Python bool: `~` would be bitwise; `== 0` is exact for both.
        return _Mask(_truth(inner.expr, cst.Equal()).with_changes(lpar=e.lpar, rpar=e.rpar), False)
    if isinstance(e, cst.Comparison) and all(isinstance(t.operator, _RICH) for t in e.comparisons):
        # `n > limit` between plain names may be two Python numbers; `x.sum() > 0` computes on a tensor.
        tensor = trusted or not all(isinstance(x, (cst.Name, cst.Attribute, cst.Integer, cst.Float))
                                    for x in [e.left, *(t.comparator for t in e.comparisons)])
        if len(e.comparisons) == 1:
            return _Mask(e, tensor)
        # `a < x < b` is `a < x and x < b`: Python's `and` would call bool() on the first result.
        left, parts = e.left, []
        for t in e.comparisons:
            parts.append(cst.Comparison(left, [t], lpar=[cst.LeftParen()], rpar=[cst.RightParen()]))
            left = t.comparator
        acc: cst.BaseExpression = parts[0]
        for p in parts[1:]:
            acc = cst.BinaryOperation(acc, cst.BitAnd(), p)
        return _Mask(acc.with_changes(lpar=e.lpar, rpar=e.rpar), tensor)
    if _is_bool_call(src, e) or (isinstance(e, cst.BinaryOperation) and isinstance(
            e.operator, (cst.BitAnd, cst.BitOr, cst.BitXor))) or _known_mask_name(src, e):
        return _Mask(e, True)
    # Any other value (`x.sum()`, `flag`): Python's truthiness of a number is `!= 0`, for tensors too.
    return _Mask(_truth(e, cst.NotEqual()), trusted, leaf=e)


_TIGHTER_THAN_AND = (cst.Add, cst.Subtract, cst.Multiply, cst.Divide, cst.FloorDivide, cst.Modulo, cst.MatrixMultiply,
                     cst.Power, cst.LeftShift, cst.RightShift, cst.BitAnd)


def _operand(e: cst.BaseExpression, op: type) -> cst.BaseExpression:
    """`e` as an operand of `&` or `|`, in parentheses unless it binds at least as tightly."""
    tight = _TIGHTER_THAN_AND + ((cst.BitXor, cst.BitOr) if op is cst.BitOr else ())
    if isinstance(e, cst.UnaryOperation) and not isinstance(e.operator, cst.Not) or (
            isinstance(e, cst.BinaryOperation) and isinstance(e.operator, tight)):
        return e
    return _paren(e)


def _truth(e: cst.BaseExpression, op: cst.BaseCompOp) -> cst.Comparison:
    return cst.Comparison(_paren(e, (cst.BinaryOperation, cst.UnaryOperation)),
                          [cst.ComparisonTarget(op, cst.Integer("0"))])


def _and_operands(e: cst.BaseExpression) -> list[tuple[cst.BaseExpression, cst.BooleanOperation | None]]:
    """`a and b and c` as [(a, None), (b, op), (c, op)]: each operand with the `and` before it."""
    if isinstance(e, cst.BooleanOperation) and isinstance(e.operator, cst.And) and not e.lpar:
        left = _and_operands(e.left)
        return left + [(e.right, e)]
    return [(e, None)]


def _split_test(src: SourceFile, test: cst.BaseExpression) -> tuple[cst.BaseExpression | None, cst.BaseExpression]:
    """`flag and x.sum() > 0` -> (`flag`, `x.sum() > 0`): the Python part stays an `if`, the tensor part goes
    to torch.where. `if A and T: s` is `if A: if T: s`, so this is exact whatever the types are."""
    inner = test.with_changes(lpar=[], rpar=[]) if test.lpar else test
    operands = _and_operands(inner)
    if len(operands) == 1:
        return None, test
    python = [(x, op) for x, op in operands if values(src).is_python(x) or _flag_like(src, x)]
    tensor = [(x, op) for x, op in operands if not (values(src).is_python(x) or _flag_like(src, x))]
    if not tensor:  # the finding says a tensor is tested: it must be one of the bare names
        tensor = [(x, op) for x, op in operands if not values(src).is_python(x)]
        python = [(x, op) for x, op in operands if values(src).is_python(x)]
        if not tensor:
            raise _Unfixable(f"the test `{_short(test)}` looks like plain Python (no tensor in it)", "")
    if not python:
        return None, test

    def join(parts: list[tuple[cst.BaseExpression, cst.BooleanOperation | None]]) -> cst.BaseExpression:
        acc = parts[0][0]
        for x, op in parts[1:]:
            acc = cst.BooleanOperation(acc, op.operator if op else cst.And(), x)  # type: ignore[union-attr]
        return acc.with_changes(lpar=test.lpar, rpar=test.rpar) if test.lpar and "\n" in _code(acc) else acc

    return join(python), join(tensor)


# --- the branches --------------------------------------------------------------------------------------


@dataclass(eq=False)
class _Line:
    node: StmtLine
    leading: list[cst.EmptyLine]  # its comment lines
    comment: cst.Comment | None
    used: bool = False


_RETURN = "<return>"  # the target of a `return` op


@dataclass(eq=False)
class _Op:
    """One small statement of a branch: `targets = values` (or `return values`)."""

    targets: tuple[str, ...]
    values: tuple[cst.BaseExpression, ...]
    line: _Line
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
class _Branch:
    test: cst.BaseExpression | None  # None: the else branch
    ops: list[_Op] = field(default_factory=list)
    comments: list[cst.EmptyLine] = field(default_factory=list)  # `elif`/`else` header and footer comments
    header: cst.Comment | None = None


def _comment_lines(lines: Sequence[cst.EmptyLine]) -> list[cst.EmptyLine]:
    return [ln.with_changes(indent=True) for ln in lines if ln.comment is not None]


def _as_line(c: cst.Comment | None) -> list[cst.EmptyLine]:
    return [cst.EmptyLine(comment=c)] if c is not None else []


def _describe_target(t: cst.BaseExpression) -> str:
    if isinstance(t, cst.Attribute):
        return (f"the branch sets `{_short(t)}`, state that outlives the call; torchmend only merges branches that "
                "set local names")
    if isinstance(t, cst.Subscript):
        return (f"the branch writes into `{_short(t)}` in place; torchmend only merges branches that set whole "
                "local names")
    return f"the branch unpacks into `{_short(t)}`; write one assignment per name first"


def _in_place(src: SourceFile, e: cst.CSTNode) -> str:
    for call in _walk(e, cst.Call):
        assert isinstance(call, cst.Call)
        if isinstance(call.func, cst.Attribute):
            name = call.func.attr.value
            if name.endswith("_") and not name.startswith("_"):
                return f"`{_short(call)}` modifies a tensor in place"
        if any(a.keyword is not None and a.keyword.value == "inplace" and not _is_false(a.value) for a in call.args):
            return f"`{_short(call)}` works in place"
    for named in _walk(e, cst.NamedExpr):
        return f"`{_short(named)}` assigns inside an expression"
    return ""


def _is_false(e: cst.BaseExpression) -> bool:
    return isinstance(e, cst.Name) and e.value == "False"


def _walk(node: cst.CSTNode, kind: type | tuple[type, ...]) -> Iterator[cst.CSTNode]:
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, kind):
            yield n
        stack.extend(reversed(n.children))


def _ops(src: SourceFile, small: cst.BaseSmallStatement, line: _Line) -> list[_Op]:
    """The small statement as ops: `a, b = x, y` is two when no value reads `a` or `b` (so the order is free)."""
    op = _op(src, small, line)
    if op is None:
        return []
    if op.tuple_form and not op.is_return and not set(op.targets) & op.reads:
        return [_Op((n,), (v,), line, small) for n, v in zip(op.targets, op.values)]
    return [op]


def _op(src: SourceFile, small: cst.BaseSmallStatement, line: _Line) -> _Op | None:
    if isinstance(small, cst.Pass):
        return None
    if isinstance(small, cst.Expr):
        if isinstance(small.value, (cst.BaseString, cst.Ellipsis)):
            return None
        problem = _in_place(src, small.value)
        if problem:
            raise _Unfixable(f"in the branch, {problem}; that changes the tensor for every name bound to it",
                             "write it out of place (`x = x.clamp(max=1)` for `x.clamp_(max=1)`), then torchmend can "
                             "merge the branch")
        what = f"calls `{_short(small.value)}`" if isinstance(small.value, cst.Call) else \
            f"evaluates `{_short(small.value)}`"
        raise _Unfixable(f"the branch {what} for its effect; torch.where and torch.cond only choose between "
                         "computed values",
                         "move the call out of the branch, or gate it with torch.compiler.is_compiling() if it only "
                         "logs; " + _COND_ADVICE)
    if isinstance(small, cst.Raise):
        raise _Unfixable("the branch raises; neither torch.where nor torch.cond can raise depending on a "
                         "tensor's value", _RAISE_ADVICE)
    if isinstance(small, (cst.Break, cst.Continue)):
        raise _Unfixable(f"the branch leaves the loop (`{_code(small).strip()}`): how many times the loop runs "
                         "depends on the tensor's value", _WHILE_ADVICE)
    if isinstance(small, cst.Return):
        if small.value is None or (isinstance(small.value, cst.Name) and small.value.value == "None"):
            raise _Unfixable("a branch returns nothing; torch.where needs a tensor from every branch")
        problem = _in_place(src, small.value)
        if problem:
            raise _Unfixable(f"the branch's {problem}")
        if isinstance(small.value, cst.Tuple) and not any(isinstance(el, cst.StarredElement)
                                                          for el in small.value.elements):
            return _Op((_RETURN,), tuple(el.value for el in small.value.elements), line, small,
                       tuple_form=True, is_return=True)
        return _Op((_RETURN,), (small.value,), line, small, is_return=True)
    if isinstance(small, cst.Assign):
        if len(small.targets) != 1:
            raise _Unfixable("the branch has a chained assignment (`a = b = ...`); split it first", "")
        target, value = small.targets[0].target, small.value
        problem = _in_place(src, value)
        if problem:
            raise _Unfixable(f"in the branch, {problem}")
        if isinstance(target, cst.Name):
            return _Op((target.value,), (value,), line, small)
        if (isinstance(target, (cst.Tuple, cst.List)) and isinstance(value, (cst.Tuple, cst.List))
                and len(target.elements) == len(value.elements)
                and all(isinstance(el, cst.Element) and isinstance(el.value, cst.Name) for el in target.elements)
                and all(isinstance(el, cst.Element) for el in value.elements)):
            names = tuple(el.value.value for el in target.elements)  # type: ignore[attr-defined]
            return _Op(names, tuple(el.value for el in value.elements), line, small, tuple_form=True)
        if isinstance(target, (cst.Tuple, cst.List)) and _names_only(target):
            raise _NeedsCond(f"the branch unpacks `{_short(value)}` (torch.where cannot split it)")
        raise _Unfixable(_describe_target(target), "")
    if isinstance(small, cst.AugAssign):
        if not isinstance(small.target, cst.Name):
            raise _Unfixable(_describe_target(small.target), "")
        problem = _in_place(src, small.value)
        if problem:
            raise _Unfixable(f"in the branch, {problem}")
        op_name = type(small.operator).__name__.removesuffix("Assign")
        binary = getattr(cst, op_name)()
        value = cst.BinaryOperation(cst.Name(small.target.value), binary,
                                    _paren(small.value, (cst.UnaryOperation,)))
        return _Op((small.target.value,), (value,), line, small, aug=True)
    if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name) and small.value is not None:
        problem = _in_place(src, small.value)
        if problem:
            raise _Unfixable(f"in the branch, {problem}")
        return _Op((small.target.value,), (small.value,), line, small)
    raise _Unfixable(f"the branch has a `{_code(small).strip().split()[0]}` statement; torch.where and "
                     "torch.cond only choose between computed values", "")


def _branch(src: SourceFile, test: cst.BaseExpression | None, body: Body,
            leading: Sequence[cst.EmptyLine]) -> _Branch:
    branch = _Branch(test, comments=_comment_lines(leading))
    if isinstance(body, cst.SimpleStatementSuite):
        branch.header = body.trailing_whitespace.comment
        line = _Line(body, [], None)
        smalls = [(line, s) for s in body.body]
    else:
        branch.header = body.header.comment
        smalls = []
        for stmt in body.body:
            if not isinstance(stmt, cst.SimpleStatementLine):
                kind = type(stmt).__name__.lower()
                raise _NeedsCond(f"the branch has a nested `{kind}` block (torch.where only merges straight-line "
                                 "assignments)")
            line = _Line(stmt, _comment_lines(stmt.leading_lines), stmt.trailing_whitespace.comment)
            smalls.extend((line, s) for s in stmt.body)
        branch.comments += _comment_lines(body.footer)
    for line, small in smalls:
        for op in _ops(src, small, line):
            if branch.ops and branch.ops[-1].is_return:
                raise _Unfixable("the branch has code after its `return`", "")
            branch.ops.append(op)
    return branch


def _chain(src: SourceFile, node: cst.If) -> list[_Branch]:
    """The `if`, its `elif`s and its `else` (an empty one when there is none), as branches."""
    branches = [_branch(src, node.test, node.body, [])]
    cur: cst.If = node
    while isinstance(cur.orelse, cst.If):
        cur = cur.orelse
        branches.append(_branch(src, cur.test, cur.body, cur.leading_lines))
    if isinstance(cur.orelse, cst.Else):
        branch = _branch(src, None, cur.orelse.body, cur.orelse.leading_lines)
        branch.comments[:0] = _as_line(branch.header)  # `else:  # why` goes above what the else did
        branch.header = None
        branches.append(branch)
    else:
        branches.append(_Branch(None))
    return branches


# --- where names live ------------------------------------------------------------------------------------


@dataclass
class _Names:
    src: SourceFile
    node: cst.If
    consumed: cst.CSTNode | None  # the `return` after the `if` that became its else branch

    def __post_init__(self) -> None:
        self.scope = self.src.scopes.get(self.node)
        fn = self.src.enclosing(self.node, (cst.FunctionDef, cst.Lambda))
        self.function = fn if fn is not None else self.src.module
        self.declared = {n.name.value for d in self.src.nodes_in(self.function, (cst.Global, cst.Nonlocal))
                         for n in d.names}  # type: ignore[attr-defined]
        self.start = self.src.positions[self.node].start
        self.end = self.src.positions[self.node].end
        self.loops = [a for a in self.src.ancestors(self.node) if isinstance(a, (cst.For, cst.While))
                      and (self.function is self.src.module or self.function in set(self.src.ancestors(a)))]

    def inside(self, n: cst.CSTNode) -> bool:
        anc = set(self.src.ancestors(n))
        return self.node in anc or (self.consumed is not None and self.consumed in anc)

    def defined_before(self, name: str) -> bool:
        if name in self.declared:
            return True
        for a in self.scope.assignments[name] if self.scope is not None else ():
            node = getattr(a, "node", None)
            pos = self.src.positions.get(node) if node is not None else None
            if pos is not None and (pos.start.line, pos.start.column) < (self.start.line, self.start.column) \
                    and not self.inside(node):
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
            if n.value == name and self.src.scopes.get(n) is not self.scope and not self.inside(n):  # type: ignore
                return True
        return False

    def used(self) -> set[str]:
        return {n.value for n in self.src.nodes_in(self.function, cst.Name)}  # type: ignore[attr-defined]


# --- safety -------------------------------------------------------------------------------------------------


def _constant(e: cst.BaseExpression) -> float | None:
    if isinstance(e, cst.UnaryOperation) and isinstance(e.operator, (cst.Minus, cst.Plus)):
        inner = _constant(e.expression)
        return None if inner is None else (-inner if isinstance(e.operator, cst.Minus) else inner)
    if isinstance(e, (cst.Integer, cst.Float)):
        return float(e.evaluated_value)
    return None


def _hazards(src: SourceFile, e: cst.BaseExpression) -> list[str]:
    """Why computing `e` on the path not taken could raise, change state or give inf/nan."""
    found: list[str] = []
    for n in _walk(e, (cst.BinaryOperation, cst.Call, cst.Subscript, cst.Lambda, cst.BaseComp, cst.Await)):
        if isinstance(n, cst.BinaryOperation):
            right = _constant(n.right)
            if isinstance(n.operator, (cst.Divide, cst.FloorDivide, cst.Modulo)) and not right:
                found.append(f"`{_short(n)}` divides by a value that can be zero")
            elif isinstance(n.operator, cst.Power) and not (right is not None and right >= 0 and right == int(right)):
                found.append(f"`{_short(n)}` can give inf or nan")
        elif isinstance(n, cst.Call):
            name, torchy = _call_name(src, n)
            if name in RANDOM:
                found.append(f"`{_short(n)}` draws random numbers on both paths")
            elif name in ("pow", "float_power") and len(n.args) >= 1 and (
                    (c := _constant(n.args[-1].value)) is not None and c >= 0 and c == int(c)):
                continue
            elif name in INF_NAN_OR_RAISE and (torchy or isinstance(n.func, cst.Attribute)):
                found.append(f"`{_short(n)}` can give inf or nan")
            elif (torchy and name in WHERE_HARMLESS) or (not torchy and isinstance(n.func, cst.Name)
                                                    and name in HARMLESS_BUILTINS):
                continue
            else:
                found.append(f"`{_short(n)}` is a call torchmend cannot see into")
        elif isinstance(n, cst.Subscript):
            index = [el.slice for el in n.slice]
            if not all(isinstance(s, cst.Index) and (_constant(s.value) is not None or isinstance(s.value, cst.Ellipsis)
                                                     or _is_none(s.value)) or
                       isinstance(s, cst.Slice) and all(x is None or _constant(x) is not None
                                                        for x in (s.lower, s.upper, s.step)) for s in index):
                found.append(f"`{_short(n)}` indexes with a value and can raise")
        else:
            found.append(f"`{_short(n)}` cannot be checked")
    return found


def _is_none(e: cst.BaseExpression) -> bool:
    return isinstance(e, cst.Name) and e.value == "None"


# --- building the new statements -----------------------------------------------------------------------------


def _where(where: cst.BaseExpression, cond: cst.BaseExpression, a: cst.BaseExpression,
           b: cst.BaseExpression) -> cst.Call:
    comma = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    return cst.Call(where, [cst.Arg(cond, comma=comma), cst.Arg(a, comma=comma), cst.Arg(b)])


def _placeholder(k: int) -> cst.Name:
    return cst.Name(f"__tm_cond_{k}__")


def _merge(slots: list[dict[int, _Op]], k: int, ops: list[_Op]) -> list[dict[int, _Op]]:
    """Line up branch k's statements with those before (longest common run of same-target statements)."""
    a = [next(iter(s.values())).key for s in slots]
    b = [op.key for op in ops]
    lcs = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i in range(len(a) - 1, -1, -1):
        for j in range(len(b) - 1, -1, -1):
            lcs[i][j] = lcs[i + 1][j + 1] + 1 if a[i] == b[j] else max(lcs[i + 1][j], lcs[i][j + 1])
    out: list[dict[int, _Op]] = []
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


class _Replace(cst.CSTTransformer):
    def __init__(self, names: dict[str, cst.BaseExpression]) -> None:
        super().__init__()
        self.names = names

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.BaseExpression:  # type: ignore[override]
        return self.names.get(original.value, updated)


@dataclass
class _Plan:
    lines: list[cst.BaseStatement]
    notes: list[str]  # what makes it unsafe (empty: safe)
    hazards: list[str]  # what computing the branch not taken can do


def _build(src: SourceFile, branches: list[_Branch], names: _Names, where: cst.BaseExpression,
           masks: list[_Mask], returns: bool) -> _Plan:
    """The statements that replace the `if`: condition temporaries, then one statement per lined-up slot."""
    slots: list[dict[int, _Op]] = []
    for k, branch in enumerate(branches):
        slots = _merge(slots, k, branch.ops)
    if not slots:
        raise _Unfixable("the `if` does nothing in any branch", "delete it")
    emitted, notes = _merged_statements(slots, branches, names, where, returns)
    notes += [f"`{_short(op.small)}` changed the tensor in place; now a new tensor is built, so other names bound "
              "to the same tensor no longer see the change" for b in branches for op in b.ops if op.aug]
    notes += [f"assumes the `elif` test `{_short(b.test)}` is a tensor (torch.where raises on a Python bool)"
              for b, mask in zip(branches[1:], masks[1:]) if b.test is not None and not mask.tensor]
    hazards = [h for b in branches for op in b.ops for v in op.values for h in _hazards(src, v)]
    hazards += [h for b in branches[1:] if b.test is not None for h in _hazards(src, b.test)]
    temps, evaluated_at, replacements = _conditions(emitted, masks, names)
    statements = [small.visit(_Replace(replacements)) for _, small in emitted]
    lines = _lay_out(temps, [slot for slot, _ in emitted], statements, branches, evaluated_at)  # type: ignore
    return _Plan(lines, list(dict.fromkeys(notes)), list(dict.fromkeys(hazards)))


def _merged_statements(slots: list[dict[int, _Op]], branches: list[_Branch], names: _Names,
                       where: cst.BaseExpression, returns: bool
                       ) -> tuple[list[tuple[dict[int, _Op], cst.BaseSmallStatement]], list[str]]:
    """One statement per slot: `n = torch.where(c0, v0, torch.where(c1, v1, n))`, with placeholders for the
    conditions; a branch without a statement in the slot keeps `n` as it is."""
    assigned: dict[str, list[int]] = {}
    for k, branch in enumerate(branches):
        for op in branch.ops:
            for n in op.targets if not op.is_return else ():
                if k not in assigned.setdefault(n, []):
                    assigned[n].append(k)

    def temp(n: str) -> bool:
        """Assigned in one branch only, written there before it is read, and dead after the `if`: then a plain
        assignment is exact (nothing else reads it)."""
        if names.defined_before(n) or len(assigned[n]) != 1 or (not returns and names.read_after(n)):
            return False
        k = assigned[n][0]
        return not any(n in op.reads and (j != k or n not in _written_before(b.ops, op))
                       for j, b in enumerate(branches) for op in b.ops)

    exists = {n for n in assigned if names.defined_before(n)}
    notes: list[str] = []
    emitted: list[tuple[dict[int, _Op], cst.BaseSmallStatement]] = []
    for slot in slots:
        first = next(iter(slot.values()))
        plain = not first.is_return and all(temp(n) for n in first.targets)
        values: list[cst.BaseExpression] = []
        for i in range(len(first.values)):
            target = first.targets[i] if not first.is_return else _RETURN
            pieces = [slot[k].values[i] if k in slot else None for k in range(len(branches))]
            if plain:
                values.append(first.values[i])
                continue
            if None in pieces and target not in exists:
                raise _Unfixable(_one_sided(target, sorted(slot), branches),
                                 f"give `{target}` a value before the `if` (the one it keeps when the branch is "
                                 "not taken)")
            values.append(_where_chain(where, [p if p is not None else cst.Name(target) for p in pieces]))
            if all(p is None or _constant(p) is not None for p in pieces):
                notes.append(f"`{target}` becomes a 0-d tensor (it was a Python number in every branch)"
                             if not first.is_return else "the function returns a 0-d tensor where it returned a "
                             "Python number")
        exists |= set(first.targets)
        emitted.append((slot, _statement(first, values)))
    return emitted, notes


def _where_chain(where: cst.BaseExpression, pieces: list[cst.BaseExpression]) -> cst.BaseExpression:
    """`torch.where(c0, p0, torch.where(c1, p1, p2))`, leaving out the choices between equal values."""
    acc = pieces[-1]
    for k in range(len(pieces) - 2, -1, -1):
        if not _strip(pieces[k]).deep_equals(_strip(acc)):
            acc = _where(where, _placeholder(k), _strip(pieces[k]), _strip(acc))
    return acc


def _conditions(emitted: list[tuple[dict[int, _Op], cst.BaseSmallStatement]], masks: list[_Mask], names: _Names
                ) -> tuple[list[cst.SimpleStatementLine], dict[int, int], dict[str, cst.BaseExpression]]:
    """Each condition evaluated once: in a temporary when used more than once, spread over lines, or when a
    statement before its use changes a name it reads; otherwise inline. Returns the temporaries, the line
    each condition is evaluated on, and what each placeholder becomes."""
    uses: dict[int, list[int]] = {k: [] for k in range(len(masks))}
    for s, (_, small) in enumerate(emitted):
        for n in _walk(small, cst.Name):
            for k in range(len(masks)):
                if n.value == _placeholder(k).value:  # type: ignore[attr-defined]
                    uses[k].append(s)
    fresh = _fresh(names.used())
    replacements: dict[str, cst.BaseExpression] = {}
    temps: list[cst.SimpleStatementLine] = []
    evaluated_at: dict[int, int] = {}
    for k, mask in enumerate(masks):
        expr = _strip(mask.expr)
        multiline = "\n" in _code(expr)
        before = emitted[:uses[k][0]] if uses[k] else []
        written = {n for slot, _ in before for n in next(iter(slot.values())).targets}
        if len(uses[k]) > 1 or multiline or written & simple_names(expr):
            name = next(fresh)
            value = _paren(expr) if multiline else expr  # a value over several lines needs its parentheses
            evaluated_at[k] = len(temps)
            temps.append(cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(cst.Name(name))], value)]))
            replacements[_placeholder(k).value] = cst.Name(name)
        else:
            replacements[_placeholder(k).value] = expr
    for k in range(len(masks)):
        if k not in evaluated_at and uses[k]:
            evaluated_at[k] = len(temps) + uses[k][0]
    return temps, evaluated_at, replacements


def _lay_out(temps: list[cst.SimpleStatementLine], slots: list[dict[int, _Op]],
             statements: list[cst.BaseSmallStatement], branches: list[_Branch],
             evaluated_at: dict[int, int]) -> list[cst.SimpleStatementLine]:
    """The statements as lines, each carrying the comments of the lines it came from; the `if`/`elif`
    line's own comment goes where its test is now evaluated (so `# tm:` markers follow the test)."""
    lines = list(temps)
    displaced: dict[int, int] = {}  # line -> where its end-of-line comment goes if another takes its place
    for slot, small in zip(slots, statements):
        leading: list[cst.EmptyLine] = []
        comment: cst.Comment | None = None
        for k, op in sorted(slot.items()):
            leading += branches[k].comments
            branches[k].comments = []
            if not op.line.used:
                op.line.used = True
                leading += op.line.leading
                if comment is None and op.line.comment is not None:
                    comment, displaced[len(lines)] = op.line.comment, len(leading)
                else:
                    leading += _as_line(op.line.comment)
        lines.append(_with_comment(cst.SimpleStatementLine([small], leading_lines=leading), comment))
    leftover = [c for b in branches for c in b.comments]
    for k, branch in enumerate(branches):
        if k in evaluated_at:
            lines[evaluated_at[k]] = _with_comment(lines[evaluated_at[k]], branch.header,
                                                   displaced.get(evaluated_at[k]))
        else:
            leftover += _as_line(branch.header)
    lines[0] = lines[0].with_changes(leading_lines=[*leftover, *lines[0].leading_lines])
    return lines


def _written_before(ops: list[_Op], op: _Op) -> set[str]:
    out: set[str] = set()
    for o in ops:
        if o is op:
            return out
        out |= set(o.targets)
    return out


def _one_sided(target: str, where_: list[int], branches: list[_Branch]) -> str:
    when = "only in some branches"
    if len(branches) == 2:
        when = {(0,): "only when the test is true", (1,): "only when the test is false"}.get(tuple(where_), when)
    return (f"`{target}` is assigned {when} and has no value before the `if`, but is used after it: it needs a "
            "value in every case")


def _fresh(used: set[str]) -> Iterator[str]:
    if "cond" not in used:
        yield "cond"
    i = 2
    while True:
        if f"cond_{i}" not in used:
            yield f"cond_{i}"
        i += 1


def _statement(op: _Op, values: list[cst.BaseExpression]) -> cst.BaseSmallStatement:
    comma = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    value: cst.BaseExpression = values[0] if not op.tuple_form else cst.Tuple(
        [cst.Element(v, comma=comma if i < len(values) - 1 else cst.MaybeSentinel.DEFAULT)
         for i, v in enumerate(values)], lpar=[], rpar=[])
    if op.is_return:
        return cst.Return(value)
    if isinstance(op.small, cst.AnnAssign) or (isinstance(op.small, cst.Assign) and not op.tuple_form and isinstance(
            op.small.targets[0].target, cst.Name)):
        return op.small.with_changes(value=value, semicolon=cst.MaybeSentinel.DEFAULT)  # keeps `x: T = ...`
    if isinstance(op.small, cst.Assign) and op.tuple_form:
        return op.small.with_changes(value=value, semicolon=cst.MaybeSentinel.DEFAULT)
    return cst.Assign([cst.AssignTarget(cst.Name(op.targets[0]))], value)


def _with_comment(line: cst.SimpleStatementLine, comment: cst.Comment | None,
                  at: int | None = None) -> cst.SimpleStatementLine:
    """`line` with `comment` at its end; a comment already there moves above it (to leading line `at`)."""
    if comment is None:
        return line
    leading = list(line.leading_lines)
    at = len(leading) if at is None else at
    leading[at:at] = _as_line(line.trailing_whitespace.comment)
    return line.with_changes(leading_lines=leading,
                             trailing_whitespace=cst.TrailingWhitespace(whitespace=cst.SimpleWhitespace("  "),
                                                                        comment=comment))


def _next_statement(src: SourceFile, node: cst.BaseStatement) -> cst.BaseStatement | None:
    parent = src.parents.get(node)
    body = parent.body if isinstance(parent, (cst.IndentedBlock, cst.Module)) else ()
    for i, stmt in enumerate(body):
        if stmt is node:
            return body[i + 1] if i + 1 < len(body) else None  # type: ignore[return-value]
    return None


def _is_where(src: SourceFile, node: cst.CSTNode) -> bool:
    return any(src.is_qualified(c.func, "torch.where", "torch.cond")  # type: ignore[attr-defined]
               for c in src.nodes_in(node, cst.Call))


# --- the codemod ---------------------------------------------------------------------------------------------


class BranchToWhere(Codemod):
    """Turn a Python `if` on a tensor into `torch.where`.

    What it does:
        TM103: an `if`/`elif` (or `a if c else b`, or `c1 and c2` as a value) whose test is a tensor, in a
        torch.compile'd function or module.

    Why is this bad:
        `if` needs a Python bool, and a tensor's value is not known while dynamo traces: it ends the graph
        at the `if`, runs the test eagerly, and compiles what follows separately for each outcome (a graph
        break on every call).

    Example:
        out = self.fc(x)
        if out.abs().max() > 10.0:
            out = out / 10.0

    Fix:
        out = self.fc(x)
        out = torch.where(out.abs().max() > 10.0, out / 10.0, out)

    Fix safety:
        Safe when the branches only compute harmless values, unsafe otherwise. torch.where computes every
        branch and picks one, which is exact for arithmetic, division by a non-zero constant and known
        element-wise functions. It is unsafe when the branch not taken can give inf/nan or raise (division
        by a tensor, log, sqrt, pow with a non-constant exponent, calls torchmend cannot see into): its
        value is discarded but its gradient is not, and 0 * inf = nan. Also unsafe: `h *= 0.5` (in place
        becomes a new tensor), names that only ever hold Python numbers (they become 0-d tensors), and
        branches with loops, which become torch.cond functions (exact, but torch.cond raises unless both
        branches return one tensor of the same shape and dtype). torch.where broadcasts and promotes, so
        the branches must give the same shape and dtype. An `if` that prints, raises, returns in one branch
        only or sets a name in one branch only is reported, not rewritten; so is a `while` on a tensor.
    """

    rules = ("TM103",)
    name = "branch-to-where"
    INVALID = (
        # the reference case: an if without else updating a name
        Invalid(
            """
            import torch

            def f(out):
                if out.abs().max() > 10.0:  # tm: TM103
                    out = out / 10.0
                return out
            """,
            """
            import torch

            def f(out):
                out = torch.where(out.abs().max() > 10.0, out / 10.0, out)  # tm: TM103
                return out
            """,
        ),
        # if/else setting the same name; torch imported as t
        Invalid(
            """
            import torch as t

            def f(x):
                # pick a scale
                if x.mean() > 0:  # tm: TM103
                    y = x * 2
                else:
                    y = -x
                return y
            """,
            """
            import torch as t

            def f(x):
                # pick a scale
                y = t.where(x.mean() > 0, x * 2, -x)  # tm: TM103
                return y
            """,
        ),
        # several statements, the second reading the first: the condition is evaluated once
        Invalid(
            """
            import torch

            def f(h, g):
                if h.sum() > 0:  # tm: TM103
                    h = h * 0.5
                    g = g + h
                return h, g
            """,
            """
            import torch

            def f(h, g):
                cond = h.sum() > 0  # tm: TM103
                h = torch.where(cond, h * 0.5, h)
                g = torch.where(cond, g + h, g)
                return h, g
            """,
        ),
        # both branches return
        Invalid(
            """
            import torch

            def f(x):
                if x.max() > 1:  # tm: TM103
                    return x / 2
                else:
                    return x
            """,
            """
            import torch

            def f(x):
                return torch.where(x.max() > 1, x / 2, x)  # tm: TM103
            """,
        ),
        # and / not become & / ~; a conditional expression
        Invalid(
            """
            import torch

            def f(x):
                y = x * 2 if x.min() > 0 and not x.isnan().any() else x  # tm: TM103
                return y
            """,
            """
            import torch

            def f(x):
                y = torch.where((x.min() > 0) & ~x.isnan().any(), x * 2, x)  # tm: TM103
                return y
            """,
        ),
    )
    VALID = (
        Valid(
            """
            import torch

            def f(out):
                out = torch.where(out.max() > 1, out / 2, out)  # tm: TM103
                return out
            """,
        ),
        # a print in the branch: reported, not rewritten
        Valid(
            """
            import torch

            def f(x):
                if x.sum() > 0:  # tm: TM103
                    print('positive')
                return x
            """,
        ),
        # a name set in one branch only and used after
        Valid(
            """
            import torch

            def f(x):
                if x.sum() > 0:  # tm: TM103
                    y = x
                return y
            """,
        ),
        # a while loop on a tensor
        Valid(
            """
            import torch

            def f(x):
                while x.norm() > 1:  # tm: TM103
                    x = x / 2
                return x
            """,
        ),
    )

    def propose(self, finding: Finding, ctx: Context) -> Result:
        if finding.where != Where.PROJECT:
            return NoFix(finding, f"the `if` is in {finding.file}, outside your project; torchmend does not edit "
                         "libraries", "call that function outside the compiled region, or wrap the call in a "
                         "function decorated with torch.compiler.disable")
        src = ctx.file(finding.path)
        stmt = src.statement_at(finding.line)
        try:
            if isinstance(stmt, cst.While):
                return NoFix(finding, "a `while` on a tensor runs a number of times only the data decides; "
                             "torch.where cannot repeat work and torch.cond cannot loop", _WHILE_ADVICE)
            if isinstance(stmt, cst.If):
                return self._if(finding, src, _chain_start(src, stmt))
            if isinstance(stmt, cst.SimpleStatementLine):
                return self._line(finding, src, stmt)
        except _Unfixable as e:
            return NoFix(finding, e.reason, e.advice)
        kind = type(stmt).__name__ if stmt is not None else "no statement"
        return NoFix(finding, f"line {finding.line} is not an `if` ({kind}); torchmend rewrites `if`/`elif` and "
                     "`a if c else b` only", _COND_ADVICE)

    # --- `if` statements ---

    def _if(self, finding: Finding, src: SourceFile, node: cst.If) -> Result:
        python_part, tensor_test = _split_test(src, node.test)
        try:
            return where_fix(finding, src, node, python_part, tensor_test)
        except _NeedsCond as e:
            try:
                return cond_fix(finding, src, node, python_part, tensor_test)
            except _Unfixable as why_not:
                raise _Unfixable(f"{e.reason}, and torch.cond does not apply: {why_not.reason}",
                                 why_not.advice or e.advice) from None

    # --- a simple statement: `a if c else b`, or already rewritten ---

    def _line(self, finding: Finding, src: SourceFile, stmt: cst.SimpleStatementLine) -> Result:
        if _is_where(src, stmt) or self._condition_temp(src, stmt):
            return NoFix(finding, "already uses torch.where", skipped=True)
        if any(isinstance(s, cst.Assert) for s in stmt.body):
            return NoFix(finding, "an `assert` on a tensor needs its value in Python", _ASSERT_ADVICE)
        ifexps = [e for e in src.nodes_in(stmt, cst.IfExp) if not values(src).is_python(e.test)]  # type: ignore
        boolops = [e for e in src.nodes_in(stmt, cst.BooleanOperation)
                   if not isinstance(src.parents.get(e), cst.BooleanOperation) and _all_masks(src, e)]
        if not ifexps and len(boolops) == 1:
            return self._bool_operation(finding, src, boolops[0])  # type: ignore[arg-type]
        if len(ifexps) != 1:
            why = "several conditional expressions" if ifexps else "no `if`"
            return NoFix(finding, f"line {finding.line} has {why}; torchmend cannot tell which value is tested (an "
                         "`and`/`or` on tensors, bool(), a comprehension filter?)", _COND_ADVICE)
        e = ifexps[0]
        assert isinstance(e, cst.IfExp)
        problem = _in_place(src, e)
        if problem:
            raise _Unfixable(problem)
        mask = _mask(src, e.test, trusted=True)
        where, imports = src.torch_expr("where")
        call = _where(where, _strip(mask.expr), _strip(e.body), _strip(e.orelse)).with_changes(lpar=e.lpar, rpar=e.rpar)
        notes = ["the result becomes a 0-d tensor instead of a Python number"] if (
            _constant(e.body) is not None and _constant(e.orelse) is not None) else []
        plan = _Plan([], notes, _hazards(src, e.body) + _hazards(src, e.orelse))
        return proposal(finding, src, {e: call}, imports, plan, _short(e.test))

    def _bool_operation(self, finding: Finding, src: SourceFile, e: cst.BooleanOperation) -> Result:
        """`a > 0 and b > 0` as a value: `and` calls bool() on `a > 0`; `&` gives the same boolean tensor."""
        combined = _mask(src, e, trusted=False).expr
        right = [h for x in _bool_operands(e)[1:] for h in _hazards(src, x)]
        notes = [f"`&`/`|` computes every operand, where `and`/`or` stopped early: {'; '.join(right[:3])}"] \
            if right else []
        return Proposal((finding,), finding.rule, src.path, replace={e: combined}, safety=UNSAFE if notes else SAFE,
                        why="combine the tensor tests with `&`/`|` (they stay in the graph) instead of `and`/`or` "
                            "(they call bool() on a tensor)", note="; ".join(notes))

    @staticmethod
    def _condition_temp(src: SourceFile, stmt: cst.SimpleStatementLine) -> bool:
        """`cond = <test>` that a later torch.where of the same block takes as its condition."""
        if len(stmt.body) != 1 or not isinstance(stmt.body[0], cst.Assign):
            return False
        target = stmt.body[0].targets[0].target
        if not isinstance(target, cst.Name):
            return False
        nxt = _next_statement(src, stmt)
        while nxt is not None:
            for call in src.nodes_in(nxt, cst.Call):
                if src.is_qualified(call.func, "torch.where") and call.args and isinstance(  # type: ignore
                        call.args[0].value, cst.Name) and call.args[0].value.value == target.value:  # type: ignore
                    return True
            nxt = _next_statement(src, nxt)
        return False


def where_fix(finding: Finding, src: SourceFile, node: cst.If, python_part: cst.BaseExpression | None,
              tensor_test: cst.BaseExpression) -> Result:
    branches = _chain(src, node)
    has_else = isinstance(_last(node).orelse, cst.Else)
    if python_part is not None and len(branches) > 2:
        raise _Unfixable(f"the test mixes a Python check (`{_short(python_part)}`) with a tensor test, and the "
                         "`if` has `elif`s", "split it into `if <python check>:` around an `if <tensor test>:`")

    # Returns: every branch returns, or the `if` has no else and a `return` follows it.
    returning = [bool(b.ops) and b.ops[-1].is_return for b in branches]
    trailing: cst.SimpleStatementLine | None = None
    if any(returning) and not has_else:
        after = _next_statement(src, node)
        if not _is_elif(src, node) and isinstance(after, cst.SimpleStatementLine) and len(after.body) == 1 \
                and isinstance(after.body[0], cst.Return):
            trailing = after
            line = _Line(after, [] if python_part is not None else _comment_lines(after.leading_lines),
                         None if python_part is not None else after.trailing_whitespace.comment)
            branches[-1] = _Branch(None, _ops(src, after.body[0], line))
            returning[-1] = True
    if any(returning) and not all(returning):
        raise _Unfixable("only some branches return; the code after the `if` would have to run for the others",
                         _COND_ADVICE)
    if python_part is not None and (has_else or trailing is not None):
        # The else stays as it is under the Python check; its copy in torch.where loses the comments.
        for op in branches[-1].ops:
            op.line = _Line(op.line.node, [], None)
        branches[-1].comments = []

    masks = [_mask(src, tensor_test, trusted=True)]
    for b in branches[1:]:
        if b.test is not None:
            try:
                masks.append(_mask(src, b.test, trusted=False))
            except _Unfixable as e:
                raise _Unfixable(f"the `elif` test: {e.reason}; torch.where needs a tensor test in every "
                                 "branch", "test the Python value first, in an `if` of its own, and the tensor "
                                 "in an `if` inside it") from None
    where, imports = src.torch_expr("where")
    names = _Names(src, node, trailing if python_part is None else None)
    plan = _build(src, branches, names, where, masks, all(returning))
    edits = _wrap(src, node, plan.lines, python_part)
    if trailing is not None and python_part is None:
        edits[trailing] = cst.RemovalSentinel.REMOVE
    return proposal(finding, src, edits, imports, plan, _short(tensor_test))


def cond_fix(finding: Finding, src: SourceFile, node: cst.If, python_part: cst.BaseExpression | None,
             tensor_test: cst.BaseExpression) -> Result:
    if isinstance(node.orelse, cst.If):
        raise _Unfixable("the `if` has `elif`s")
    bodies = [node.body] + ([node.orelse.body] if isinstance(node.orelse, cst.Else) else [])
    blocks = [_statements(b) for b in bodies]
    for block in blocks:
        _check_cond_block(src, block, in_loop=False)
    names = _Names(src, node, None)
    bound = [_bound(block) for block in blocks]
    assigned = list(dict.fromkeys(n for every, _ in bound for n in every))
    outputs = [n for n in assigned if names.read_after(n)]
    if not outputs:
        raise _Unfixable("nothing the branch computes is used after the `if`", "delete the `if`")
    for n in outputs:
        where_set = [k for k, (every, _) in enumerate(bound) if n in every]
        if not names.defined_before(n) and (len(blocks) == 1 or not all(n in top for _, top in bound)):
            raise _Unfixable(_one_sided(n, where_set, [_Branch(None)] * 2),
                             f"give `{n}` a value before the `if` (the one it keeps when the branch is not taken)")
    if len(outputs) > 1:
        # Seen with torch 2.13: cond's backward refuses output gradients that are one tensor (after `h + g`).
        raise _Unfixable(f"the branches set several names used after the `if` ({', '.join(outputs)}); torchmend "
                         "writes torch.cond for one output only, as its backward refuses gradients of several "
                         "outputs that alias each other (e.g. after `h + g`)", _COND_ADVICE)
    params = [n for n in assigned if names.defined_before(n)]
    used = names.used()
    fresh = _fresh_names(used)
    fn_true, fn_false = next(fresh(f"{outputs[0]}_if_true")), next(fresh(f"{outputs[0]}_if_false"))
    header = bodies[0].header.comment if isinstance(bodies[0], cst.IndentedBlock) else \
        bodies[0].trailing_whitespace.comment
    else_comments = _comment_lines(node.orelse.leading_lines) if isinstance(node.orelse, cst.Else) else []
    if isinstance(node.orelse, cst.Else) and isinstance(node.orelse.body, cst.IndentedBlock):
        else_comments += _as_line(node.orelse.body.header.comment)
    defs = [_branch_fn(fn_true, params, blocks[0], outputs[0], bound[0][1]),
            _branch_fn(fn_false, params, blocks[1] if len(blocks) > 1 else [], outputs[0],
                       bound[1][1] if len(blocks) > 1 else set())]
    defs[1] = defs[1].with_changes(leading_lines=else_comments)
    mask = _strip(_mask(src, tensor_test, trusted=True).expr)
    lines: list[cst.BaseStatement] = list(defs)
    if "\n" in _code(mask):
        temp = next(_fresh(used))
        lines.append(cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(cst.Name(temp))], _paren(mask))]))
        mask = cst.Name(temp)
    cond, imports = src.torch_expr("cond")
    comma = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    operands = cst.Tuple([cst.Element(cst.Name(p), comma=comma if i < len(params) - 1 else (
        cst.Comma() if len(params) == 1 else cst.MaybeSentinel.DEFAULT)) for i, p in enumerate(params)])
    call = cst.Call(cond, [cst.Arg(mask, comma=comma), cst.Arg(cst.Name(fn_true), comma=comma),
                           cst.Arg(cst.Name(fn_false), comma=comma), cst.Arg(operands)])
    lines.append(_with_comment(cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(cst.Name(outputs[0]))],
                                                                   call)]), header))
    plan = _Plan(lines, [f"torch.cond runs one branch, as before, but under torch.compile both branches must "
                         f"return `{outputs[0]}` as a tensor of the same shape and dtype (not a Python number) "
                         "and change nothing outside, or torch.cond raises; the branch functions return a clone "
                         "where the result could be an input, which torch.cond does not allow"], [])
    edits = _wrap(src, node, lines, python_part)
    made = proposal(finding, src, edits, imports, plan, _short(tensor_test))
    return replace(made, why=f"run the branches as functions under torch.cond instead of branching on "
                             f"`{_short(tensor_test)}`", alternative="")


def proposal(finding: Finding, src: SourceFile, edits: dict, imports: tuple, plan: _Plan,
             test: str) -> Proposal:
    notes = list(plan.notes)
    if plan.hazards:
        shown = "; ".join(plan.hazards[:3]) + (f" (and {len(plan.hazards) - 3} more)" if len(plan.hazards) > 3
                                               else "")
        notes.insert(0, f"torch.where computes every branch: {shown}. The value of the branch not taken is "
                     "discarded, its gradient is not (0 * inf = nan)")
    return Proposal((finding,), finding.rule, src.path, replace=edits, imports=imports,  # type: ignore[arg-type]
                    safety=UNSAFE if notes else SAFE,
                    why=f"compute every branch and pick with torch.where instead of branching on `{test}`",
                    note="; ".join(notes), alternative=_COND_ADVICE if plan.hazards else "")


def _is_elif(src: SourceFile, node: cst.If) -> bool:
    parent = src.parents.get(node)
    return isinstance(parent, cst.If) and parent.orelse is node


def _wrap(src: SourceFile, node: cst.If, lines: Sequence[cst.BaseStatement],
          python_part: cst.BaseExpression | None) -> dict[cst.CSTNode, object]:
    """The edit that puts `lines` where the `if` was: under the Python part of its test when it had one
    (`if flag:`, keeping its else), and as the `else:` of the `if` above when it was an `elif`."""
    is_elif = _is_elif(src, node)
    stmts = list(lines)
    if python_part is not None:
        stmts = [node.with_changes(test=python_part, body=cst.IndentedBlock(stmts),
                                   leading_lines=[] if is_elif else node.leading_lines)]
    elif not is_elif:
        stmts[0] = stmts[0].with_changes(leading_lines=[*node.leading_lines, *stmts[0].leading_lines])
    if is_elif:
        return {node: cst.Else(cst.IndentedBlock(stmts), leading_lines=node.leading_lines)}
    return {node: stmts[0] if len(stmts) == 1 else cst.FlattenSentinel(stmts)}


def _statements(body: Body) -> list[cst.BaseStatement]:
    if isinstance(body, cst.SimpleStatementSuite):
        return [cst.SimpleStatementLine(body.body)]
    return list(body.body)


def _names_only(target: cst.BaseExpression) -> bool:
    if isinstance(target, cst.Name):
        return True
    return isinstance(target, (cst.Tuple, cst.List)) and all(
        isinstance(el, cst.Element) and _names_only(el.value) for el in target.elements)


def _check_cond_block(src: SourceFile, block: Sequence[cst.BaseStatement], in_loop: bool) -> None:
    """Raise unless the statements only bind local names (what a torch.cond branch function may do)."""
    for stmt in block:
        problem = _in_place(src, stmt)
        if problem:
            raise _Unfixable(f"in the branch, {problem}")
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if isinstance(small, cst.Assign):
                    for t in small.targets:
                        if not _names_only(t.target):
                            raise _Unfixable(_describe_target(t.target), "")
                elif isinstance(small, (cst.AugAssign, cst.AnnAssign)):
                    if not isinstance(small.target, cst.Name):
                        raise _Unfixable(_describe_target(small.target), "")
                elif isinstance(small, (cst.Break, cst.Continue)) and in_loop:
                    continue
                elif isinstance(small, cst.Pass) or (isinstance(small, cst.Expr) and isinstance(
                        small.value, (cst.BaseString, cst.Ellipsis))):
                    continue
                else:
                    _op(src, small, _Line(stmt, [], None))  # raises with the reason for that statement
                    raise _Unfixable(f"the branch has `{_short(small)}`, which a torch.cond branch cannot do")
        elif isinstance(stmt, (cst.For, cst.While)):
            if isinstance(stmt, cst.For) and not _names_only(stmt.target):
                raise _Unfixable(_describe_target(stmt.target), "")
            _check_cond_block(src, _statements(stmt.body), in_loop=True)
            if stmt.orelse is not None:
                _check_cond_block(src, _statements(stmt.orelse.body), in_loop)
        elif isinstance(stmt, cst.If):
            if _tensor_test(src, stmt.test):
                raise _Unfixable(f"the branch has its own `if` on a tensor (`{_short(stmt.test)}`); fix that one "
                                 "first", "")
            _check_cond_block(src, _statements(stmt.body), in_loop)
            orelse = stmt.orelse
            while isinstance(orelse, cst.If):
                _check_cond_block(src, _statements(orelse.body), in_loop)
                orelse = orelse.orelse
            if orelse is not None:
                _check_cond_block(src, _statements(orelse.body), in_loop)
        else:
            raise _Unfixable(f"the branch has a `{type(stmt).__name__.lower()}` block, which a torch.cond branch "
                             "function cannot hold", "")


def _bound(block: Sequence[cst.BaseStatement]) -> tuple[list[str], set[str]]:
    """Every name the statements bind (in order), and those bound to a new value by the last top-level
    statement that binds them (safe to return from a torch.cond branch without a clone)."""
    every: list[str] = []
    fresh: set[str] = set()
    for stmt in block:
        here: list[str] = []
        for n in _walk(stmt, (cst.AssignTarget, cst.AugAssign, cst.AnnAssign, cst.For)):
            target = n.target  # type: ignore[attr-defined]
            here += [x.value for x in _walk(target, cst.Name)]  # type: ignore[attr-defined]
        every += here
        fresh -= set(here)
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                # `y = x` returns an input as it is: torch.cond refuses an output that aliases an input.
                if isinstance(small, cst.Assign) and not isinstance(small.value, (cst.Name, cst.Attribute)):
                    fresh |= {x.value for t in small.targets for x in _walk(t.target, cst.Name)}  # type: ignore
                elif isinstance(small, cst.AugAssign):
                    fresh.add(small.target.value)  # type: ignore[attr-defined]
    return list(dict.fromkeys(every)), fresh


def _branch_fn(name: str, params: list[str], block: Sequence[cst.BaseStatement], output: str,
               fresh: set[str]) -> cst.FunctionDef:
    """`def name(params): <block>; return output` (a clone when it may be an input: cond refuses aliases)."""
    value = cst.Name(output) if output in fresh else cst.Call(cst.Attribute(cst.Name(output), cst.Name("clone")))
    body = [*block, cst.SimpleStatementLine([cst.Return(value)])]
    return cst.FunctionDef(cst.Name(name), cst.Parameters([cst.Param(cst.Name(p)) for p in params]),
                           cst.IndentedBlock(body))


def _fresh_names(used: set[str]):  # type: ignore[no-untyped-def]
    def fresh(base: str) -> Iterator[str]:
        if base not in used:
            yield base
        i = 2
        while True:
            if f"{base}_{i}" not in used:
                yield f"{base}_{i}"
            i += 1
    return fresh


def _bool_operands(e: cst.BaseExpression) -> list[cst.BaseExpression]:
    if isinstance(e, cst.BooleanOperation):
        return _bool_operands(e.left) + _bool_operands(e.right)
    return [e]


def _all_masks(src: SourceFile, e: cst.BaseExpression) -> bool:
    """`and`/`or` of boolean tensors only (comparisons on tensors, x.any(), ...)."""
    if isinstance(e, cst.BooleanOperation):
        return _all_masks(src, e.left) and _all_masks(src, e.right)
    return (isinstance(e, cst.Comparison) or _is_bool_call(src, e) or _known_mask_name(src, e)) and _tensor_test(
        src, e)


def _chain_start(src: SourceFile, node: cst.If) -> cst.If:
    """For an `elif`, the `if` above it when that tests a tensor too: both then become one torch.where (and
    the proposals for both findings are the same edit). Above a Python test, the `elif` starts its own chain."""
    while True:
        parent = src.parents.get(node)
        if not (isinstance(parent, cst.If) and parent.orelse is node and _tensor_test(src, parent.test)):
            return node
        node = parent


def _tensor_test(src: SourceFile, test: cst.BaseExpression) -> bool:
    try:
        return _split_test(src, test)[0] is None and _mask(src, test, trusted=False).tensor
    except _Unfixable:
        return False


def _last(node: cst.If) -> cst.If:
    while isinstance(node.orelse, cst.If):
        node = node.orelse
    return node
