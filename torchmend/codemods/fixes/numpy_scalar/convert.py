"""NumPy on Python numbers, rewritten to `math` and builtins with the same value (TM114).

One conversion, bottom-up from a NumPy-rooted expression: `np.ceil(np.log(L)).astype("int").item()` becomes
`math.ceil(math.log(L))`. Every leaf must be a Python number the source shows (a shape or a size, `len()`, a literal,
a module's number attribute, arithmetic of those); anything else refuses with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import libcst as cst
from libcst.metadata import Assignment

from torchmend.analysis import match as m
from torchmend.analysis.names import builtin_or_math
from torchmend.analysis.source import SourceFile
from torchmend.analysis.values import NUMBERS, Kind, values
from torchmend.codemods.base import Refuse

# np.<name> -> the math function of the same value (float in, float out; ceil/floor/trunc give an int)
MATH = {"ceil", "floor", "trunc", "log", "log2", "log10", "log1p", "sqrt", "exp", "expm1", "prod"}
INT_MATH = {"ceil", "floor", "trunc"}
BUILTINS = {"abs": "abs", "absolute": "abs", "round": "round", "around": "round", "maximum": "max", "minimum": "min"}
INT_DTYPES = {"int", "int64", "int32", "intp", "int_", "long"}
FLOAT_DTYPES = {"float", "float64", "double", "float_"}
# Builtins and math functions whose result is an int whatever number they get: a float there is cast anyway.
INT_CONSUMERS = {"int", "floor", "ceil", "trunc", "isqrt"}
SCALAR_METHODS = ("astype", "item")
_SAME_VALUE_OPS = (cst.Add, cst.Subtract, cst.Multiply, cst.FloorDivide, cst.Modulo, cst.Divide)


@dataclass(frozen=True)
class Converted:
    node: cst.BaseExpression
    py_int: bool  # the new expression is a Python int
    np_int: bool  # NumPy's value was an integer too (so the value, not only the number, is the same)
    math: bool  # it calls `math.`
    iterated: bool = False  # `range(...)` for an iterated `np.arange` of ints: the same ints, one by one

    @property
    def exact(self) -> bool:
        """The same value as NumPy's, of the same kind: an integer both ways (or the same ints iterated)."""
        return self.np_int and (self.py_int or self.iterated)


class Converter:
    """Converts the NumPy-rooted expressions of one file; `math` is how the file names the math module."""

    def __init__(self, src: SourceFile, math: str) -> None:
        self.src, self.math = src, math
        self.values = values(src)

    # --- which nodes are NumPy's -------------------------------------------------------------------

    def numpy_function(self, call: cst.CSTNode) -> str | None:
        """`np.log(...)` -> "log" (not NumPy's random generator: TM110's)."""
        if not isinstance(call, cst.Call) or not _dotted(call.func):
            return None  # `np.ceil(x).astype` is named `numpy.ceil.astype` too: a method of a result, not NumPy's
        for q in self.src.qualified_names(call.func):
            if q.startswith("numpy.") and not q.startswith("numpy.random"):
                return q.removeprefix("numpy.")
        return None

    def rooted(self, e: cst.CSTNode) -> bool:
        """A NumPy call, or NumPy's own cast of one (`.astype(int)`, `.item()`)."""
        if self.numpy_function(e):
            return True
        return (
            isinstance(e, cst.Call)
            and isinstance(e.func, cst.Attribute)
            and e.func.attr.value in SCALAR_METHODS
            and self.rooted(e.func.value)
        )

    def top(self, call: cst.Call) -> cst.BaseExpression:
        """The outermost node the rewrite replaces for a NumPy call: its casts, and an `int(...)` around them."""
        node: cst.BaseExpression = call
        while True:
            parent = self.src.parents.get(node)
            call_of = self.src.parents.get(parent) if isinstance(parent, cst.Attribute) else None
            if (
                isinstance(parent, cst.Attribute)
                and parent.attr.value in SCALAR_METHODS
                and isinstance(call_of, cst.Call)
            ):
                node = call_of
                continue
            holder = self.src.parents.get(parent) if isinstance(parent, cst.Arg) else None
            if (
                isinstance(holder, cst.Call)
                and len(holder.args) == 1
                and builtin_or_math(self.src, holder.func) == "int"
            ):
                return holder
            return node

    # --- the conversion ----------------------------------------------------------------------------

    def convert(self, e: cst.BaseExpression) -> Converted:
        if not isinstance(e, cst.Call):
            raise Refuse(f"`{self.src.code(e)}` is not a NumPy call")
        name = self.numpy_function(e)
        if name is not None:
            return self._numpy(e, name)
        if isinstance(e.func, cst.Attribute) and e.func.attr.value in SCALAR_METHODS:
            return self._cast(e, e.func)
        inner = self.convert(_only_arg(self.src, e))  # int(np...)
        if inner.py_int:
            return Converted(inner.node, True, True, inner.math)  # int(math.ceil(x)) is math.ceil(x)
        return Converted(e.with_changes(args=[cst.Arg(inner.node)]), True, True, inner.math)

    def _cast(self, e: cst.Call, func: cst.Attribute) -> Converted:
        inner = self.convert(func.value)
        if func.attr.value == "item":
            if e.args:
                raise Refuse(f"`{self.src.code(e)}` picks an element: not a scalar")
            return inner
        dtype = _dtype(self.src, _only_arg(self.src, e))
        if dtype in INT_DTYPES:
            node = inner.node if inner.py_int else _call("int", inner.node)
            return Converted(node, True, True, inner.math)
        if dtype in FLOAT_DTYPES:
            return Converted(_call("float", inner.node), False, False, inner.math)
        raise Refuse(f"`{self.src.code(e)}` casts to a type that is not int or float64")

    def _numpy(self, e: cst.Call, name: str) -> Converted:
        if any(a.keyword is not None or a.star for a in e.args):
            raise Refuse(f"`{self.src.code(e)}` passes keyword or starred arguments: NumPy's own options")
        sequences = [self.sequence(a.value) for a in e.args]
        if (name == "prod") != any(sequences) or (name == "prod" and len(e.args) != 1):
            raise Refuse(
                f"`{self.src.code(e)}`: torchmend rewrites `np.prod` of a shape or a tuple, and other NumPy functions "
                "of single numbers"
            )
        args = [self._argument(a.value) for a in e.args]
        nodes = [a.node for a in args]
        ints = bool(args) and all(a.py_int for a in args)
        used_math = any(a.math for a in args)
        if name in MATH and len(args) == 1:
            node: cst.BaseExpression = cst.Call(cst.Attribute(cst.Name(self.math), cst.Name(name)), [cst.Arg(nodes[0])])
            py_int = name in INT_MATH or (name == "prod" and ints)
            return Converted(node, py_int, name == "prod" and ints, True)
        if name in ("abs", "absolute") and len(args) == 1 or name in ("maximum", "minimum") and len(args) == 2:
            return Converted(_call(BUILTINS[name], *nodes), ints, ints, used_math)
        if name in ("round", "around") and len(args) in (1, 2):
            # Python's round and NumPy's both round half to even; one argument gives an int where NumPy a float
            return Converted(_call("round", *nodes), len(args) == 1, ints and len(args) == 1, used_math)
        if name == "power" and len(args) == 2:
            power = cst.BinaryOperation(_paren(nodes[0]), cst.Power(), _paren(nodes[1]))
            return Converted(power, ints, ints, used_math)  # NumPy refuses a negative int power that Python takes
        if name in INT_DTYPES | {"int64", "int32"} and len(args) == 1:
            return Converted(_call("int", *nodes), True, True, used_math)
        if name in FLOAT_DTYPES | {"float64"} and len(args) == 1:
            return Converted(_call("float", *nodes), False, False, used_math)
        if name == "arange" and 1 <= len(args) <= 3:
            return self._arange(e, nodes, ints, used_math)
        raise Refuse(f"`np.{name}` with {len(args)} argument(s) has no `math` or builtin equivalent torchmend writes")

    def _arange(self, e: cst.Call, nodes: list[cst.BaseExpression], ints: bool, used_math: bool) -> Converted:
        parent = self.src.parents.get(e)
        iterated = isinstance(parent, (cst.For, cst.CompFor)) and parent.iter is e
        if not (iterated and ints):
            raise Refuse(
                f"`{self.src.code(e)}` makes an array: torchmend writes `range` only where a loop or a comprehension "
                "iterates an `np.arange` of ints"
            )
        return Converted(_call("range", *nodes), False, True, used_math, iterated=True)

    def _argument(self, e: cst.BaseExpression) -> Converted:
        if self.rooted(e):
            return self.convert(e)
        if not self.number(e, frozenset()):
            raise Refuse(
                f"`{self.src.code(e)}` is not known to be a Python number (a shape or a size, `len()`, a literal, a "
                "module's number attribute, or arithmetic of those)"
            )
        py_int = self.int_valued(e)
        inside = self.inner_tops(e)
        if not inside:
            return Converted(e, py_int, False, False)
        done = {t: self.convert(t) for t in inside}  # `int(np.sqrt(n)) // 2`: the NumPy inside is rewritten too
        node = cast(cst.BaseExpression, e.visit(_Swap({t: c.node for t, c in done.items()})))
        return Converted(node, py_int, False, any(c.math for c in done.values()))

    def inner_tops(self, root: cst.CSTNode) -> list[cst.BaseExpression]:
        """The outermost NumPy-rooted expressions under `root` (each NumPy call with its casts and `int()`)."""
        found: list[cst.BaseExpression] = []
        for call in self.src.nodes_in(root, cst.Call):
            if self.numpy_function(call) is None:
                continue
            top = self.top(call)
            if top is not root and root not in set(self.src.ancestors(top)):
                top = call  # the casts reach past `root`: only what is inside it
            found.append(top)
        return [t for t in dict.fromkeys(found) if not any(a in found for a in self.src.ancestors(t))]

    def sequence(self, e: cst.BaseExpression) -> bool:
        """A shape (`x.shape`, `x.size()`, a slice of one), a tuple, or a name bound only to those."""
        if isinstance(e, cst.Tuple):
            return True
        if isinstance(e, cst.Subscript):
            return m.matches(e.slice[0].slice, m.Slice()) and self.sequence(e.value)
        if isinstance(e, cst.Name):
            values = [self.src.assigned_value(n) for n in self.bindings(e)]
            return bool(values) and all(
                v is not None and not isinstance(v, cst.Name) and self.sequence(v) for v in values
            )
        return m.matches(e, m.Attribute(attr=m.Name("shape")) | m.Call(func=m.Attribute(attr=m.Name("size")), args=[]))

    def int_valued(self, e: cst.BaseExpression) -> bool:
        """An int for sure: an int literal, a size (`x.shape[1]`, `x.size(1)`, `len(...)`, `.numel()`), a name bound
        only to ints or unpacked from a shape, and `+ - * // %` of those; a shape's slice (for `math.prod`)."""
        if self.values.kind(e) in (Kind.INT, Kind.BOOL):
            return True
        if isinstance(e, cst.Name):
            bound = self.bindings(e)
            return bool(bound) and all(self._unpacked_from_shape(n) or self._int_bound(n) for n in bound)
        if isinstance(e, (cst.Attribute, cst.Subscript)):
            return self._shape(e)
        if isinstance(e, cst.BinaryOperation):
            ops = (cst.Add, cst.Subtract, cst.Multiply, cst.FloorDivide, cst.Modulo)
            return isinstance(e.operator, ops) and self.int_valued(e.left) and self.int_valued(e.right)
        if isinstance(e, cst.UnaryOperation):
            return not isinstance(e.operator, cst.Not) and self.int_valued(e.expression)
        return isinstance(e, cst.Call) and builtin_or_math(self.src, e.func) in ("len", "int")

    def _int_bound(self, node: cst.CSTNode) -> bool:
        value = self.src.assigned_value(node)
        return value is not None and not isinstance(value, cst.Name) and self.int_valued(value)

    # --- what is a Python number -------------------------------------------------------------------

    def number(self, e: cst.BaseExpression, seen: frozenset[cst.CSTNode]) -> bool:
        if self.values.kind(e) in NUMBERS:
            return True
        if isinstance(e, cst.Name):
            bound = self.bindings(e)
            return bool(bound) and e not in seen and all(self._bound_number(n, seen | {e}) for n in bound)
        if isinstance(e, cst.Attribute):
            return e.attr.value in ("shape", "ndim") or self._number_attribute(e)
        if isinstance(e, cst.Subscript):
            return self._shape(e.value) or (isinstance(e.value, cst.Name) and self.number(e.value, seen))
        if isinstance(e, cst.BinaryOperation):
            return self.number(e.left, seen) and self.number(e.right, seen)
        if isinstance(e, cst.UnaryOperation):
            return self.number(e.expression, seen)
        if isinstance(e, cst.Tuple):
            return all(self.number(el.value, seen) for el in e.elements if isinstance(el, cst.Element))
        if isinstance(e, cst.Call):
            return self._number_call(e, seen)
        return False

    def _number_call(self, e: cst.Call, seen: frozenset[cst.CSTNode]) -> bool:
        if isinstance(e.func, cst.Attribute) and e.func.attr.value in ("size", "numel", "dim", "nelement"):
            return True  # `x.size(1)`, `x.numel()`: a Python int whatever `x` is
        if builtin_or_math(self.src, e.func) in ("len", "int", "float", "round", "abs", "min", "max") or any(
            q.startswith("math.") for q in self.src.qualified_names(e.func)
        ):
            return bool(e.args) and all(self.number(a.value, seen) for a in e.args)
        return self.rooted(e)

    def bindings(self, name: cst.Name) -> list[cst.CSTNode]:
        """What binds this read of `name` (every assignment of it in its scope: scopes are not flow-sensitive)."""
        scope = self.src.scopes.get(name)
        if scope is None:
            return []
        accesses = [a for a in scope.accesses[name.value] if a.node is name]
        return [r.node for a in accesses for r in a.referents if isinstance(r, Assignment)]

    def _bound_number(self, node: cst.CSTNode, seen: frozenset[cst.CSTNode]) -> bool:
        if self._unpacked_from_shape(node):
            return True
        value = self.src.assigned_value(node)
        return value is not None and (self.rooted(value) or self.number(value, seen))

    def _unpacked_from_shape(self, node: cst.CSTNode) -> bool:
        """`L` of `B, L, D = x.shape` (or `= x.size()`, `= x.shape[:3]`)."""
        element = self.src.parents.get(node)
        tup = self.src.parents.get(element) if isinstance(element, cst.Element) else None
        target = self.src.parents.get(tup) if isinstance(tup, (cst.Tuple, cst.List)) else None
        assign = self.src.parents.get(target) if isinstance(target, cst.AssignTarget) else None
        if not isinstance(assign, cst.Assign):
            return False
        value = assign.value
        if isinstance(value, cst.Subscript) and m.matches(value.slice[0].slice, m.Slice()):
            value = value.value
        return self._shape(value)

    def _shape(self, e: cst.CSTNode) -> bool:
        """`x.shape`, `x.size()`, or an index or slice of one."""
        if isinstance(e, cst.Subscript):
            return self._shape(e.value)
        if isinstance(e, cst.Attribute):
            return e.attr.value == "shape"
        return m.matches(e, m.Call(func=m.Attribute(attr=m.Name("size")), args=[]))

    def _number_attribute(self, e: cst.Attribute) -> bool:
        """`self.factor`: a module's attribute that its class never assigns anything but numbers."""
        if not m.matches(e.value, m.Name("self")):
            return False
        cls = self.src.enclosing(e, cst.ClassDef)
        if cls is None:
            return False
        assigned = [
            t
            for t in self.src.nodes_in(cls, cst.AssignTarget)
            if m.matches(t.target, m.Attribute(value=m.Name("self"), attr=m.Name(e.attr.value)))
        ]
        for t in assigned:
            assign = self.src.parents.get(t)
            value = assign.value if isinstance(assign, cst.Assign) else None
            if value is None or self.values.maybe_tensor(value) or isinstance(value, _NOT_NUMBERS):
                return False
        return True


_NOT_NUMBERS = (cst.BaseString, cst.List, cst.Dict, cst.Set, cst.Lambda)


def _dotted(e: cst.BaseExpression) -> bool:
    while isinstance(e, cst.Attribute):
        e = e.value
    return isinstance(e, cst.Name)


class _Swap(cst.CSTTransformer):
    def __init__(self, new: dict[cst.CSTNode, cst.BaseExpression]) -> None:
        super().__init__()
        self.new = new

    def on_leave(self, original_node, updated_node):
        return self.new.get(original_node, updated_node)


def consumed_as_int(src: SourceFile, node: cst.CSTNode) -> bool:
    """The value reaches `int()`, `math.floor()`, ... through arithmetic only: a float there is cast anyway, so a
    float that becomes an int (or NumPy's float64 a Python float) gives the same result."""
    while True:
        parent = src.parents.get(node)
        if isinstance(parent, cst.BinaryOperation) and isinstance(parent.operator, _SAME_VALUE_OPS):
            node = parent
            continue
        holder = src.parents.get(parent) if isinstance(parent, cst.Arg) else None
        if not isinstance(holder, cst.Call):
            return False
        name = builtin_or_math(src, holder.func)
        return name in INT_CONSUMERS or (name == "round" and len(holder.args) == 1)


def _only_arg(src: SourceFile, call: cst.Call) -> cst.BaseExpression:
    if len(call.args) != 1 or call.args[0].keyword is not None or call.args[0].star:
        raise Refuse(f"`{src.code(call)}` does not take one plain argument")
    return call.args[0].value


def _dtype(src: SourceFile, e: cst.BaseExpression) -> str:
    if isinstance(e, cst.SimpleString):
        return str(e.evaluated_value)
    if isinstance(e, cst.Name) and e.value in ("int", "float"):
        return e.value
    for q in src.qualified_names(e):
        if q.startswith("numpy."):
            return q.removeprefix("numpy.")
    return ""


def _call(name: str, *args: cst.BaseExpression) -> cst.Call:
    return cst.Call(cst.Name(name), [cst.Arg(a) for a in args])


def _paren(e: cst.BaseExpression) -> cst.BaseExpression:
    """An operand in parentheses unless it is a plain name, number, call, attribute or index (or has them)."""
    if isinstance(e, (cst.Name, cst.Integer, cst.Float, cst.Call, cst.Attribute, cst.Subscript)) or e.lpar:
        return e
    return e.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


def placed(src: SourceFile, top: cst.CSTNode, new: cst.BaseExpression) -> cst.BaseExpression:
    """The replacement of `top`, in parentheses where an operator around it would bind it otherwise (`a ** b`)."""
    parent = src.parents.get(top)
    around = (cst.BinaryOperation, cst.UnaryOperation, cst.Attribute, cst.Subscript, cst.Comparison, cst.Await)
    return _paren(new) if isinstance(parent, around) else new
