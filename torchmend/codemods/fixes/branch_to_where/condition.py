"""The test of an `if`: its Python part and its tensor mask, and what computing the branch not taken risks."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, TypeVar, cast, overload

import libcst as cst

from torchmend.analysis import values
from torchmend.analysis.source import SourceFile
from torchmend.analysis.torch_ops import (
    BOOLEAN_RESULT,
    HARMLESS_BUILTINS,
    INF_NAN_OR_RAISE,
    RANDOM,
    TORCH_MODULES,
    WHERE_HARMLESS,
)
from torchmend.codemods.base import Refuse

_ATOMS = (
    cst.Name,
    cst.Attribute,
    cst.Call,
    cst.Subscript,
    cst.Integer,
    cst.Float,
    cst.Imaginary,
    cst.SimpleString,
    cst.ConcatenatedString,
    cst.FormattedString,
    cst.List,
    cst.Dict,
    cst.Set,
    cst.Ellipsis,
)
_RICH = (cst.LessThan, cst.GreaterThan, cst.LessThanEqual, cst.GreaterThanEqual, cst.Equal, cst.NotEqual)
WHILE_ADVICE = (
    "move the loop out of the compiled function (torch.compiler.disable on a helper), or run a fixed "
    "number of iterations and mask each one with torch.where; torch._higher_order_ops.while_loop "
    "(a prototype) traces a loop whose carried tensors keep their shapes"
)
RAISE_ADVICE = (
    "to keep the check inside the graph, replace the branch with `torch._assert_async(~(<test>), "
    '"message")` (it raises a RuntimeError, not your exception); or check outside the compiled '
    "function"
)
ASSERT_ADVICE = (
    'to keep the check inside the graph, use `torch._assert_async(<test>, "message")` (it raises a '
    "RuntimeError when the test is false); or check outside the compiled function"
)
COND_ADVICE = (
    "to run only one branch, rewrite it as torch.cond(<test>, then_fn, else_fn, (operands,)): both "
    "functions take the same tensors and return tensors of the same shapes and dtypes"
)


class Unfixable(Refuse):
    """Why this branch cannot become torch.where (turned into a NoFix by the codemod); the advice is torch.cond's
    unless another is given."""

    def __init__(self, reason: str, advice: str = COND_ADVICE) -> None:
        super().__init__(reason, advice)


class NeedsCond(Unfixable):
    """A branch shape torch.where cannot merge but torch.cond may run (nested blocks, unpacking a call)."""


def code(node: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(node)


class _NoComments(cst.CSTTransformer):
    # libcst's typed visitor says a Comment cannot be removed, yet every field holding one is Optional and
    # REMOVE sets it to None at runtime: its stub is too narrow.
    def leave_Comment(  # type: ignore[override]
        self, original: cst.Comment, updated: cst.Comment
    ) -> cst.RemovalSentinel:
        return cst.RemovalSentinel.REMOVE


def short(node: cst.CSTNode, width: int = 60) -> str:
    """The node's code on one line, for messages."""
    if isinstance(node, cst.BaseExpression) and node.lpar:
        node = node.with_changes(lpar=[], rpar=[])
    text = " ".join(code(cast(cst.CSTNode, node.visit(_NoComments()))).split())  # it removes comments only
    return text if len(text) <= width else text[: width - 3] + "..."


def call_name(src: SourceFile, call: cst.Call) -> tuple[str, bool]:
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


def paren(e: cst.BaseExpression, keep: tuple[type, ...] = ()) -> cst.BaseExpression:
    if e.lpar or isinstance(e, _ATOMS + keep):
        return e
    return e.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


def strip(e: cst.BaseExpression) -> cst.BaseExpression:
    return e.with_changes(lpar=[], rpar=[]) if e.lpar and "\n" not in code(e) else e


def _is_bool_call(src: SourceFile, e: cst.BaseExpression) -> bool:
    if not isinstance(e, cst.Call):
        return False
    name, torchy = call_name(src, e)
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
    assigned = []  # not `values`: that name is the analysis the check below calls
    for assignment in scope.assignments[e.value]:
        target = getattr(assignment, "node", None)
        parent = src.parents.get(target) if target is not None else None
        stmt = src.parents.get(parent) if isinstance(parent, cst.AssignTarget) else None
        if not isinstance(stmt, cst.Assign):
            return False
        assigned.append(stmt.value)
    return bool(assigned) and all(
        _is_bool_call(src, v)
        or (
            isinstance(v, cst.Comparison)
            and all(isinstance(t.operator, _RICH) for t in v.comparisons)
            and not values(src).is_python(v)
        )
        for v in assigned
    )


@dataclass
class Mask:
    expr: cst.BaseExpression
    tensor: bool  # certainly a boolean tensor (else: a value whose truthiness is right, maybe a Python bool)
    leaf: cst.BaseExpression | None = None  # `expr` is `leaf != 0`


def mask_of(src: SourceFile, e: cst.BaseExpression, trusted: bool) -> Mask:
    """An expression that torch.where accepts as its condition and that is true exactly when `e` is.
    `trusted`: `e` as a whole is known to be a tensor (the finding says so)."""
    if values(src).is_python(e):
        raise Unfixable(f"`{short(e)}` is a Python value, not a tensor", "")
    if isinstance(e, cst.BooleanOperation):
        op = cst.BitAnd if isinstance(e.operator, cst.And) else cst.BitOr
        left, right = mask_of(src, e.left, False), mask_of(src, e.right, False)
        if not (left.tensor or right.tensor or trusted):
            raise Unfixable(f"`{short(e)}` does not look like a tensor test")
        combined = cst.BinaryOperation(
            _operand(left.expr, op),
            op(whitespace_before=e.operator.whitespace_before, whitespace_after=e.operator.whitespace_after),
            _operand(right.expr, op),
            lpar=e.lpar,
            rpar=e.rpar,
        )
        return Mask(combined, True)
    if isinstance(e, cst.UnaryOperation) and isinstance(e.operator, cst.Not):
        inner = mask_of(src, e.expression, trusted)
        if inner.leaf is not None:  # `not x.sum()`: `x.sum() == 0`
            return Mask(_truth(inner.leaf, cst.Equal()).with_changes(lpar=e.lpar, rpar=e.rpar), inner.tensor)
        if inner.tensor or trusted:
            return Mask(cst.UnaryOperation(cst.BitInvert(), paren(strip(inner.expr)), lpar=e.lpar, rpar=e.rpar), True)
        # `not n` for a value that may be a Python bool: `~` would be bitwise; `== 0` is exact for both.
        return Mask(_truth(inner.expr, cst.Equal()).with_changes(lpar=e.lpar, rpar=e.rpar), False)
    if isinstance(e, cst.Comparison) and all(isinstance(t.operator, _RICH) for t in e.comparisons):
        # `n > limit` between plain names may be two Python numbers; `x.sum() > 0` computes on a tensor.
        tensor = trusted or not all(
            isinstance(x, (cst.Name, cst.Attribute, cst.Integer, cst.Float))
            for x in [e.left, *(t.comparator for t in e.comparisons)]
        )
        if len(e.comparisons) == 1:
            return Mask(e, tensor)
        # `a < x < b` is `a < x and x < b`: Python's `and` would call bool() on the first result.
        lhs, parts = e.left, []
        for t in e.comparisons:
            parts.append(cst.Comparison(lhs, [t], lpar=[cst.LeftParen()], rpar=[cst.RightParen()]))
            lhs = t.comparator
        acc: cst.BaseExpression = parts[0]
        for p in parts[1:]:
            acc = cst.BinaryOperation(acc, cst.BitAnd(), p)
        return Mask(acc.with_changes(lpar=e.lpar, rpar=e.rpar), tensor)
    if (
        _is_bool_call(src, e)
        or (isinstance(e, cst.BinaryOperation) and isinstance(e.operator, (cst.BitAnd, cst.BitOr, cst.BitXor)))
        or _known_mask_name(src, e)
    ):
        return Mask(e, True)
    # Any other value (`x.sum()`, `flag`): Python's truthiness of a number is `!= 0`, for tensors too.
    return Mask(_truth(e, cst.NotEqual()), trusted, leaf=e)


_TIGHTER_THAN_AND = (
    cst.Add,
    cst.Subtract,
    cst.Multiply,
    cst.Divide,
    cst.FloorDivide,
    cst.Modulo,
    cst.MatrixMultiply,
    cst.Power,
    cst.LeftShift,
    cst.RightShift,
    cst.BitAnd,
)


def _operand(e: cst.BaseExpression, op: type) -> cst.BaseExpression:
    """`e` as an operand of `&` or `|`, in parentheses unless it binds at least as tightly."""
    tight = _TIGHTER_THAN_AND + ((cst.BitXor, cst.BitOr) if op is cst.BitOr else ())
    if (
        isinstance(e, cst.UnaryOperation)
        and not isinstance(e.operator, cst.Not)
        or (isinstance(e, cst.BinaryOperation) and isinstance(e.operator, tight))
    ):
        return e
    return paren(e)


def _truth(e: cst.BaseExpression, op: cst.BaseCompOp) -> cst.Comparison:
    return cst.Comparison(
        paren(e, (cst.BinaryOperation, cst.UnaryOperation)), [cst.ComparisonTarget(op, cst.Integer("0"))]
    )


def _and_operands(e: cst.BaseExpression) -> list[tuple[cst.BaseExpression, cst.BooleanOperation | None]]:
    """`a and b and c` as [(a, None), (b, op), (c, op)]: each operand with the `and` before it."""
    if isinstance(e, cst.BooleanOperation) and isinstance(e.operator, cst.And) and not e.lpar:
        left = _and_operands(e.left)
        return left + [(e.right, e)]
    return [(e, None)]


def split_test(src: SourceFile, test: cst.BaseExpression) -> tuple[cst.BaseExpression | None, cst.BaseExpression]:
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
            raise Unfixable(f"the test `{short(test)}` looks like plain Python (no tensor in it)", "")
    if not python:
        return None, test

    def join(parts: list[tuple[cst.BaseExpression, cst.BooleanOperation | None]]) -> cst.BaseExpression:
        acc = parts[0][0]
        for x, op in parts[1:]:
            acc = cst.BooleanOperation(acc, op.operator if op else cst.And(), x)
        return acc.with_changes(lpar=test.lpar, rpar=test.rpar) if test.lpar and "\n" in code(acc) else acc

    return join(python), join(tensor)


_N = TypeVar("_N", bound=cst.CSTNode)


@overload
def walk(node: cst.CSTNode, kind: type[_N]) -> Iterator[_N]: ...  # the nodes' type follows `kind`
@overload
def walk(node: cst.CSTNode, kind: tuple[type, ...]) -> Iterator[cst.CSTNode]: ...


def walk(node: cst.CSTNode, kind: type | tuple[type, ...]) -> Iterator[Any]:
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, kind):
            yield n
        stack.extend(reversed(n.children))


# --- safety -------------------------------------------------------------------------------------------------


def constant(e: cst.BaseExpression) -> float | None:
    if isinstance(e, cst.UnaryOperation) and isinstance(e.operator, (cst.Minus, cst.Plus)):
        inner = constant(e.expression)
        return None if inner is None else (-inner if isinstance(e.operator, cst.Minus) else inner)
    if isinstance(e, (cst.Integer, cst.Float)):
        return float(e.evaluated_value)
    return None


def hazards_of(src: SourceFile, e: cst.BaseExpression) -> list[str]:
    """Why computing `e` on the path not taken could raise, change state or give inf/nan."""
    found: list[str] = []
    for n in walk(e, (cst.BinaryOperation, cst.Call, cst.Subscript, cst.Lambda, cst.BaseComp, cst.Await)):
        if isinstance(n, cst.BinaryOperation):
            right = constant(n.right)
            if isinstance(n.operator, (cst.Divide, cst.FloorDivide, cst.Modulo)) and not right:
                found.append(f"`{short(n)}` divides by a value that can be zero")
            elif isinstance(n.operator, cst.Power) and not (right is not None and right >= 0 and right == int(right)):
                found.append(f"`{short(n)}` can give inf or nan")
        elif isinstance(n, cst.Call):
            name, torchy = call_name(src, n)
            if name in RANDOM:
                found.append(f"`{short(n)}` draws random numbers on both paths")
            elif (
                name in ("pow", "float_power")
                and len(n.args) >= 1
                and ((c := constant(n.args[-1].value)) is not None and c >= 0 and c == int(c))
            ):
                continue
            elif name in INF_NAN_OR_RAISE and (torchy or isinstance(n.func, cst.Attribute)):
                found.append(f"`{short(n)}` can give inf or nan")
            elif (torchy and name in WHERE_HARMLESS) or (
                not torchy and isinstance(n.func, cst.Name) and name in HARMLESS_BUILTINS
            ):
                continue
            else:
                found.append(f"`{short(n)}` is a call torchmend cannot see into")
        elif isinstance(n, cst.Subscript):
            index = [el.slice for el in n.slice]
            if not all(
                isinstance(s, cst.Index)
                and (constant(s.value) is not None or isinstance(s.value, cst.Ellipsis) or _is_none(s.value))
                or isinstance(s, cst.Slice)
                and all(x is None or constant(x) is not None for x in (s.lower, s.upper, s.step))
                for s in index
            ):
                found.append(f"`{short(n)}` indexes with a value and can raise")
        else:
            found.append(f"`{short(n)}` cannot be checked")
    return found


def _is_none(e: cst.BaseExpression) -> bool:
    return isinstance(e, cst.Name) and e.value == "None"


def is_where(src: SourceFile, node: cst.CSTNode) -> bool:
    return any(src.is_qualified(c.func, "torch.where", "torch.cond") for c in src.nodes_in(node, cst.Call))


def bool_operands(e: cst.BaseExpression) -> list[cst.BaseExpression]:
    if isinstance(e, cst.BooleanOperation):
        return bool_operands(e.left) + bool_operands(e.right)
    return [e]


def all_masks(src: SourceFile, e: cst.BaseExpression) -> bool:
    """`and`/`or` of boolean tensors only (comparisons on tensors, x.any(), ...)."""
    if isinstance(e, cst.BooleanOperation):
        return all_masks(src, e.left) and all_masks(src, e.right)
    return (isinstance(e, cst.Comparison) or _is_bool_call(src, e) or _known_mask_name(src, e)) and is_tensor_test(
        src, e
    )


def is_tensor_test(src: SourceFile, test: cst.BaseExpression) -> bool:
    try:
        return split_test(src, test)[0] is None and mask_of(src, test, trusted=False).tensor
    except Unfixable:
        return False


# --- tests on `self` state: tensor attributes, Python configuration -----------------------------------


def self_attribute(target: cst.BaseExpression) -> str:
    """`self.x_min` (an attribute of `self`, one level): its dotted name, else ''."""
    if isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name) and target.value.value == "self":
        return f"self.{target.attr.value}"
    return ""


def tensor_attribute(src: SourceFile, node: cst.CSTNode, dotted: str) -> bool:
    """`self.<attr>` holds a tensor: its class registers it as a buffer or parameter, or sets it from a torch call
    (`self.lo = nn.Buffer(torch.zeros(1))`, `self.register_buffer("lo", ...)`, `self.lo = torch.zeros(1)`)."""
    cls = src.enclosing(node, cst.ClassDef)
    if cls is None:
        return False
    attr = dotted.split(".", 1)[1]
    for call in src.nodes_in(cls, cst.Call):
        func = call.func
        if (
            isinstance(func, cst.Attribute)
            and func.attr.value in ("register_buffer", "register_parameter")
            and call.args
            and isinstance(call.args[0].value, cst.SimpleString)
            and call.args[0].value.evaluated_value == attr
        ):
            return True
    for assign in src.nodes_in(cls, cst.Assign):
        if (
            len(assign.targets) == 1
            and self_attribute(assign.targets[0].target) == dotted
            and isinstance(assign.value, cst.Call)
            and assign.value.func in src.positions
            and any(q.startswith("torch.") for q in src.qualified_names(assign.value.func))
        ):
            return True
    return False


def python_test(src: SourceFile, test: cst.BaseExpression) -> bool:
    """An `elif` test that is plain Python (a config number compared to a constant, a flag): one that does not
    look like a tensor and calls nothing, so evaluating it earlier and on every call changes nothing."""
    if values(src).is_python(test):
        return True
    if any(True for _ in walk(test, cst.Call)):
        return False
    if _config_test(src, test):
        return True
    try:
        return not mask_of(src, test, trusted=False).tensor
    except Unfixable:
        return True


def _config_test(src: SourceFile, e: cst.BaseExpression) -> bool:
    """`self.momentum == -1`, `self.flag and self.k > 2`: attributes of `self` the class does not set from torch,
    and constants."""
    if isinstance(e, cst.BooleanOperation):
        return _config_test(src, e.left) and _config_test(src, e.right)
    if isinstance(e, cst.UnaryOperation):
        return _config_test(src, e.expression)
    if isinstance(e, cst.Comparison):
        return all(_config_test(src, x) for x in [e.left, *(t.comparator for t in e.comparisons)])
    if constant(e) is not None or isinstance(e, (cst.SimpleString, cst.ConcatenatedString)):
        return True
    dotted = self_attribute(e)
    return bool(dotted) and not tensor_attribute(src, e, dotted)
