"""Where a global or closure number is bound (an assignment, a parameter, an import...), the scope its bindings
share, and whether its value is a float, an int or no number: what the global-scalar fix (TM206,
global_scalar/__init__.py) reads before it writes `torch.tensor(...)`."""

from __future__ import annotations

import re

import libcst as cst
from libcst.metadata import Assignment, BaseAssignment, FunctionScope, GlobalScope

from torchmend.analysis import builtin_or_math
from torchmend.analysis import match as m
from torchmend.analysis.source import SourceFile
from torchmend.analysis.values import NOT_NUMBERS


def how_bound(src: SourceFile, b: Assignment) -> str:
    node = b.node
    parent = src.parents.get(node)
    if isinstance(node, cst.Param):
        return "a parameter"
    if isinstance(node, (cst.Import, cst.ImportFrom)):
        return "an import"
    if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
        return "a def or class"
    if isinstance(parent, (cst.For, cst.CompFor)):
        return "a for loop"
    if isinstance(parent, cst.NamedExpr):
        return "a := expression"
    if isinstance(parent, (cst.Element, cst.Tuple, cst.List, cst.StarredElement)):
        return "a tuple unpacking"
    if isinstance(parent, cst.AssignTarget):
        return "a chained assignment"
    return "a statement torchmend cannot rewrite in place"


def scope_body(src: SourceFile, b: BaseAssignment) -> cst.CSTNode | None:
    """The module or function whose body holds the binding's variable."""
    if isinstance(b.scope, GlobalScope):
        return src.module
    if isinstance(b.scope, FunctionScope):
        return b.scope.node
    return None


def top_level(src: SourceFile, stmt: cst.CSTNode, body: cst.CSTNode) -> bool:
    """The statement runs once, unconditionally, in `body` (not inside an if/for/while/try/with/def)."""
    line = src.parents.get(stmt)  # SmallStatement -> SimpleStatementLine
    holder = src.parents.get(line) if line is not None else None
    if body is src.module:
        return holder is src.module
    return isinstance(holder, cst.IndentedBlock) and src.parents.get(holder) is body


def inside(src: SourceFile, node: cst.CSTNode, body: cst.CSTNode) -> bool:
    """In `body` itself, not in a function nested in it."""
    for anc in src.ancestors(node):
        if anc is body:
            return True
        if isinstance(anc, (cst.FunctionDef, cst.Lambda)):
            return False
    return False


_INT_LITERAL = re.compile(r"^[0-9][0-9_]*$")


def maybe_float(src: SourceFile, value: cst.BaseExpression, op: cst.BaseAugOp | None, name: str) -> bool:
    """Could this update store a float? Only integer literals, the variable itself, + - * // % and
    int()/len() count as surely int."""
    if op is not None and not isinstance(
        op, (cst.AddAssign, cst.SubtractAssign, cst.MultiplyAssign, cst.FloorDivideAssign, cst.ModuloAssign)
    ):
        return True

    def surely_int(e: cst.BaseExpression) -> bool:
        if isinstance(e, cst.Integer) or m.matches(e, m.Name(name)):
            return True
        if isinstance(e, cst.UnaryOperation) and isinstance(e.operator, (cst.Minus, cst.Plus)):
            return surely_int(e.expression)
        if isinstance(e, cst.BinaryOperation) and isinstance(
            e.operator, (cst.Add, cst.Subtract, cst.Multiply, cst.FloorDivide, cst.Modulo)
        ):
            return surely_int(e.left) and surely_int(e.right)
        if isinstance(e, cst.Call) and builtin_or_math(src, e.func) in ("int", "len"):
            return True
        return False

    return not surely_int(value)


def surely_float(e: cst.BaseExpression) -> bool:
    if isinstance(e, cst.Float):
        return True
    if isinstance(e, cst.UnaryOperation):
        return surely_float(e.expression)
    if isinstance(e, cst.BinaryOperation):
        return isinstance(e.operator, cst.Divide) or surely_float(e.left) or surely_float(e.right)
    return m.matches(e, m.Call(func=m.Name("float")))


def as_float(value: cst.BaseExpression) -> cst.BaseExpression:
    """`1` -> `1.0`, `-2` -> `-2.0`, anything else not surely a float -> `float(value)`: a tensor made
    from an int is int64, and fill_ with a float would truncate."""
    if surely_float(value):
        return value
    if isinstance(value, cst.Integer) and _INT_LITERAL.match(value.value):
        return cst.Float(value.value + ".0", lpar=value.lpar, rpar=value.rpar)
    if (
        isinstance(value, cst.UnaryOperation)
        and isinstance(value.expression, cst.Integer)
        and _INT_LITERAL.match(value.expression.value)
    ):
        return value.with_changes(expression=as_float(value.expression))
    return cst.Call(cst.Name("float"), [cst.Arg(value)])


def number_like(value: cst.BaseExpression) -> bool:
    """Not something torch.tensor() would refuse or turn into more than a number."""
    return not isinstance(value, NOT_NUMBERS) and not m.matches(
        value, m.Name("None") | m.Name("True") | m.Name("False")
    )
