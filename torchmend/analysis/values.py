"""Value kinds: one memoised analysis per file of what an expression is (tensor, float, int, bool, None)."""

from __future__ import annotations

import enum
import weakref
from collections.abc import Iterable

import libcst as cst
from libcst.metadata import Assignment, ImportAssignment

from torchmend.analysis import match as m
from torchmend.analysis.names import (
    binding_statement,
    builtin_or_math,
    is_torch,
    parameters,
    reads,
    self_name,
    unpacked_value,
)
from torchmend.analysis.source import SourceFile
from torchmend.analysis.torch_ops import (
    BOOL_ATTRS,
    BOOL_METHODS,
    INT_ATTRS,
    INT_METHODS,
    NOT_TENSOR_ATTRS,
    NUMBER_METHODS,
    PYTHON_ATTRS,
    PYTHON_BUILTINS,
    PYTHON_METHODS,
    TENSOR_ATTRS,
    TENSOR_EVIDENCE,
    TENSOR_METHODS,
    TORCH_NON_TENSOR,
)


class Kind(enum.Enum):
    TENSOR = "tensor"
    FLOAT = "float"
    INT = "int"
    BOOL = "bool"
    NONE = "None"
    UNKNOWN = "unknown"


NUMBERS = frozenset({Kind.INT, Kind.FLOAT, Kind.BOOL})
PYTHON_KINDS = NUMBERS | {Kind.NONE}
_INT_BUILTINS = {"int", "len", "ord", "hash", "id"}
_BOOL_BUILTINS = {"bool", "isinstance", "issubclass", "hasattr", "callable", "all", "any"}
_INT_MATH = {"floor", "ceil", "trunc", "factorial", "gcd", "lcm", "isqrt", "comb", "perm"}
_BOOL_MATH = {"isfinite", "isinf", "isnan", "isclose"}
_RICH = (cst.LessThan, cst.GreaterThan, cst.LessThanEqual, cst.GreaterThanEqual, cst.Equal, cst.NotEqual)
# Expressions that are never a real number: text, containers, comprehensions, lambdas (what torch.tensor() would
# refuse or turn into more than one number).
NOT_NUMBERS = (
    cst.BaseString,
    cst.List,
    cst.Tuple,
    cst.Dict,
    cst.Set,
    cst.ListComp,
    cst.DictComp,
    cst.SetComp,
    cst.GeneratorExp,
    cst.Lambda,
)
_NOT_VALUES = (*NOT_NUMBERS, cst.Imaginary)


def _same(kinds: Iterable[Kind]) -> Kind:
    found = set(kinds)
    return found.pop() if len(found) == 1 else Kind.UNKNOWN


class Values:
    """What the source shows about the values of one file, memoised per node (get it with `values(src)`).

    Names are followed through their plain assignments (all of them must agree) as far as they go; a cycle
    (`h = h * 2`) counts as not known. One rule everywhere: where the old per-fix checks stopped after 3 or 4
    names, this one stops only at a cycle."""

    def __init__(self, src: SourceFile) -> None:
        self.src = src
        self._kinds: dict[cst.CSTNode, Kind] = {}
        self._maybe: dict[tuple[cst.CSTNode, frozenset[str]], bool] = {}
        self._used_as_tensor: dict[cst.Param, bool] = {}

    # --- what the source shows -----------------------------------------------------------------------

    def kind(self, expr: cst.BaseExpression) -> Kind:
        if expr not in self._kinds:
            self._kinds[expr] = Kind.UNKNOWN  # cycles are not evidence
            self._kinds[expr] = self._kind(expr)
        return self._kinds[expr]

    def is_tensor(self, expr: cst.BaseExpression) -> bool:
        return self.kind(expr) is Kind.TENSOR

    def _kind(self, e: cst.BaseExpression) -> Kind:
        if isinstance(e, cst.Integer):
            return Kind.INT
        if isinstance(e, cst.Float):
            return Kind.FLOAT
        if isinstance(e, cst.Name):
            return {"True": Kind.BOOL, "False": Kind.BOOL, "None": Kind.NONE}.get(e.value) or self._name(e)
        if isinstance(e, cst.UnaryOperation):
            if isinstance(e.operator, cst.Not):
                return Kind.BOOL
            inner = self.kind(e.expression)
            return (
                Kind.INT
                if inner is Kind.BOOL
                else inner
                if inner in (Kind.TENSOR, Kind.INT, Kind.FLOAT)
                else Kind.UNKNOWN
            )
        if isinstance(e, cst.BinaryOperation):
            return self._arithmetic(e)
        if isinstance(e, cst.Comparison):
            return self._comparison(e)
        if isinstance(e, (cst.BooleanOperation, cst.IfExp)):
            pair = (e.left, e.right) if isinstance(e, cst.BooleanOperation) else (e.body, e.orelse)
            return _same(self.kind(x) for x in pair)
        if isinstance(e, cst.Call):
            return self._call(e)
        if isinstance(e, cst.Attribute):
            attr = e.attr.value
            return (
                Kind.TENSOR
                if attr in TENSOR_ATTRS
                else Kind.INT
                if attr in INT_ATTRS
                else Kind.BOOL
                if attr in BOOL_ATTRS
                else Kind.UNKNOWN
            )
        if isinstance(e, cst.Subscript):
            if self.kind(e.value) is Kind.TENSOR:
                return Kind.TENSOR
            if m.matches(
                e.value, m.Attribute(attr=m.Name("shape")) | m.Call(func=m.Attribute(attr=m.Name("size")), args=[])
            ):
                return Kind.INT
        return Kind.UNKNOWN

    def _arithmetic(self, e: cst.BinaryOperation) -> Kind:
        left, right = self.kind(e.left), self.kind(e.right)
        if Kind.TENSOR in (left, right):
            return Kind.TENSOR
        if isinstance(e.left, _NOT_VALUES) or isinstance(e.right, _NOT_VALUES) or Kind.NONE in (left, right):
            return Kind.UNKNOWN
        # A division, or arithmetic with a float, of values not known to be tensors is taken for a float (as
        # the lr, buffer and global-scalar fixes always did): `base_lr / 10`.
        if isinstance(e.operator, cst.Divide) or Kind.FLOAT in (left, right):
            return Kind.FLOAT
        if left in NUMBERS and right in NUMBERS and not isinstance(e.operator, cst.MatrixMultiply):
            return Kind.INT
        return Kind.UNKNOWN

    def _comparison(self, e: cst.Comparison) -> Kind:
        operands = [e.left, *(c.comparator for c in e.comparisons)]
        kinds = [self.kind(x) for x in operands]
        if any(not isinstance(c.operator, _RICH) for c in e.comparisons):
            return Kind.BOOL  # is, is not, in, not in
        if Kind.TENSOR in kinds:
            return Kind.TENSOR
        if all(k in PYTHON_KINDS or isinstance(x, cst.BaseString) for k, x in zip(kinds, operands)):
            return Kind.BOOL
        return Kind.UNKNOWN

    def _call(self, e: cst.Call) -> Kind:
        src, func = self.src, e.func
        builtin = builtin_or_math(src, func)
        qnames = src.qualified_names(func)
        if builtin is not None:
            math = any(q.startswith("math.") for q in qnames)
            if math:
                return Kind.INT if builtin in _INT_MATH else Kind.BOOL if builtin in _BOOL_MATH else Kind.FLOAT
            if builtin == "float":
                return Kind.FLOAT
            if builtin in _INT_BUILTINS or (builtin == "round" and len(e.args) == 1):
                return Kind.INT
            if builtin in _BOOL_BUILTINS:
                return Kind.BOOL
            if builtin in ("abs", "min", "max") and e.args and not any(a.star for a in e.args):
                return _same(self.kind(a.value) for a in e.args if a.keyword is None)
            return Kind.UNKNOWN
        if any(q.startswith("torch.") for q in qnames):
            return Kind.UNKNOWN if any(TORCH_NON_TENSOR.match(q) for q in qnames) else Kind.TENSOR
        if isinstance(func, cst.Attribute):
            method = func.attr.value
            if method in ("new_tensor", "new_full"):
                return Kind.TENSOR
            if method in INT_METHODS or (method == "size" and e.args):
                return Kind.INT
            if method in BOOL_METHODS:
                return Kind.BOOL
            if method in TENSOR_METHODS and not self._imported(func.value):
                return Kind.TENSOR  # methods Python numbers lack (`x.float()`), not a module's function
        return Kind.UNKNOWN

    def _imported(self, expr: cst.BaseExpression) -> bool:
        """`math.sqrt(...)`: a module's function, not a tensor method."""
        while isinstance(expr, cst.Attribute):
            expr = expr.value
        if not isinstance(expr, cst.Name):
            return False
        scope = self.src.scopes.get(expr)
        return scope is not None and any(isinstance(a, ImportAssignment) for a in scope[expr.value])

    def _name(self, name: cst.Name) -> Kind:
        bound = self._bindings(name)
        if not bound:
            return Kind.UNKNOWN
        kinds = []
        for b in bound:
            value = self._bound_value(b)
            kinds.append(self.kind(value) if value is not None else Kind.UNKNOWN)
        found = _same(kinds)
        if found is Kind.UNKNOWN and len(bound) == 1 and self._tensor_evidence(name, bound[0]):
            return Kind.TENSOR
        return found

    def _bindings(self, name: cst.Name) -> list[Assignment]:
        scope = self.src.scopes.get(name)
        if scope is None:
            return []
        try:
            bound = list(scope[name.value])
        except KeyError:
            return []
        return [b for b in bound if isinstance(b, Assignment)] if all(isinstance(b, Assignment) for b in bound) else []

    def _bound_value(self, b: Assignment) -> cst.BaseExpression | None:
        stmt = binding_statement(self.src, b)
        if isinstance(stmt, (cst.Assign, cst.AnnAssign)):
            return stmt.value
        return None if stmt is not None else unpacked_value(self.src, b.node)

    def _tensor_evidence(self, name: cst.Name, bound: Assignment) -> bool:
        """A name bound once whose uses read tensor-only attributes (`out.abs()`, `out.shape`)."""
        scope = bound.scope
        if self.src.scopes.get(name) is not scope:
            return False
        for access in scope.accesses[name.value]:
            parent = self.src.parents.get(access.node)
            if (
                isinstance(parent, cst.Attribute)
                and parent.value is access.node
                and parent.attr.value in TENSOR_EVIDENCE
            ):
                return True
        return False

    # --- the model-code reading ----------------------------------------------------------------------

    def maybe_tensor(self, e: cst.BaseExpression, exclude: Iterable[str] = ()) -> bool:
        """Likely a tensor in model code: a tensor as far as `kind` shows, or a call's result that is not a
        builtin's or a number method's (`self.fc(x)`), a parameter used as a tensor (`x[i]`, `f(x)`), an
        attribute or index of one of those. Names in `exclude` (the number being followed) are not."""
        key = (e, frozenset(exclude))
        if key not in self._maybe:
            self._maybe[key] = False
            self._maybe[key] = self._maybe_tensor(e, key[1])
        return self._maybe[key]

    def _maybe_tensor(self, e: cst.BaseExpression, exclude: frozenset[str]) -> bool:
        if isinstance(e, cst.Name):
            return e.value not in exclude and self._maybe_tensor_name(e, exclude)
        if self.is_tensor(e):
            return True
        if isinstance(e, cst.Call):
            func = e.func
            if builtin_or_math(self.src, func) or self.kind(e) in PYTHON_KINDS:
                return False
            return not (isinstance(func, cst.Attribute) and func.attr.value in NUMBER_METHODS)
        if isinstance(e, cst.Attribute):
            return e.attr.value not in NOT_TENSOR_ATTRS and self.maybe_tensor(e.value, exclude)
        if isinstance(e, cst.Subscript):
            return self.maybe_tensor(e.value, exclude)
        if isinstance(e, cst.BinaryOperation):
            return self.maybe_tensor(e.left, exclude) or self.maybe_tensor(e.right, exclude)
        if isinstance(e, cst.UnaryOperation):
            return self.maybe_tensor(e.expression, exclude)
        if isinstance(e, cst.IfExp):
            return self.maybe_tensor(e.body, exclude) or self.maybe_tensor(e.orelse, exclude)
        return False

    def _maybe_tensor_name(self, name: cst.Name, exclude: frozenset[str]) -> bool:
        if self.is_tensor(name):
            return True
        for b in self._bindings(name):
            if isinstance(b.node, cst.Param):
                if self._param_used_as_tensor(b.node):
                    return True
                continue
            stmt = binding_statement(self.src, b)
            value = getattr(stmt, "value", None) if stmt is not None else unpacked_value(self.src, b.node)
            if value is not None and self.maybe_tensor(value, exclude):
                return True
        return False

    def param_maybe_tensor(self, fn: cst.FunctionDef, name: str) -> bool:
        """A parameter of `fn` used as a tensor there (not `self`)."""
        if name == self_name(self.src, fn):
            return False
        param = next((p for p in parameters(fn) if p.name.value == name), None)
        return param is not None and self._param_used_as_tensor(param)

    def _param_used_as_tensor(self, param: cst.Param) -> bool:
        if param not in self._used_as_tensor:
            fn = self.src.enclosing(param, cst.FunctionDef)
            used = False
            if isinstance(fn, cst.FunctionDef) and param.name.value != self_name(self.src, fn):
                used = any(self._read_as_tensor(r) for r in reads(self.src, fn, param.name.value))
            self._used_as_tensor[param] = used
        return self._used_as_tensor[param]

    def _read_as_tensor(self, node: cst.Name) -> bool:
        parent = self.src.parents.get(node)
        if isinstance(parent, cst.Attribute) and parent.value is node:
            return parent.attr.value not in ("real", "imag", "is_integer", "conjugate", "hex")
        if isinstance(parent, cst.Subscript) and parent.value is node:
            return True
        if isinstance(parent, cst.Arg):
            call = self.src.parents.get(parent)
            return isinstance(call, cst.Call) and not builtin_or_math(self.src, call.func)
        return False

    # --- plain Python for sure ---------------------------------------------------------------------------

    def is_python(self, e: cst.BaseExpression) -> bool:
        """A value that is plain Python for sure (`x is None`, `self.training`, `x.dim() > 2`, a constant)."""
        if isinstance(e, (cst.Integer, cst.Float, cst.BaseString)):
            return True
        if isinstance(e, cst.Name):
            return self.kind(e) in PYTHON_KINDS
        if isinstance(e, cst.Attribute):
            return e.attr.value in PYTHON_ATTRS
        if isinstance(e, cst.Subscript):
            return self.is_python(e.value)
        if isinstance(e, cst.Call):
            # By name only: `float(t)` of a tensor is no plain-Python test.
            func = e.func
            builtin = isinstance(func, cst.Name) and not is_torch(self.src, func) and func.value in PYTHON_BUILTINS
            return builtin or (isinstance(func, cst.Attribute) and func.attr.value in PYTHON_METHODS)
        if isinstance(e, cst.Comparison):
            operands = [e.left, *(t.comparator for t in e.comparisons)]
            if any(not isinstance(t.operator, _RICH) for t in e.comparisons):
                return True
            if any(isinstance(x, cst.BaseString) or m.matches(x, m.Name("None")) for x in operands):
                return True  # `mode == "train"`, `x == None`
            return all(self.is_python(x) for x in operands)
        if isinstance(e, cst.UnaryOperation) and isinstance(e.operator, cst.Not):
            return self.is_python(e.expression)
        if isinstance(e, (cst.BooleanOperation, cst.BinaryOperation)):
            return self.is_python(e.left) and self.is_python(e.right)
        return False


_VALUES: weakref.WeakKeyDictionary[SourceFile, Values] = weakref.WeakKeyDictionary()


def values(src: SourceFile) -> Values:
    """The value analysis of a file (one per SourceFile, so every fix shares its memo)."""
    found = _VALUES.get(src)
    if found is None:
        found = _VALUES[src] = Values(src)
    return found
