"""Whether a graph break's line computes with NumPy on Python numbers (TM114): `np.ceil(np.log(L))` where
`B, L, D = x.shape`.

Dynamo traces a NumPy call as torch operations on 0-dim tensors, so arithmetic that eagerly stays on Python ints
(a sequence length, a head count) becomes tensors whose value has to come back to Python: GB0208 (a torch.* op
returned a non-Tensor) on torch 2.13, GB0033 (`aten._local_scalar_dense`) where the value is `int()`ed later,
GB0170 where a comprehension branches on `np.arange(L)`'s elements. The break may sit on the line that uses the
value (`k = min(int(k), L)`), so names read there are followed to their earlier bindings in the same function.

Read with `ast` from the file's text (the profiler does not parse with libcst); the codemod checks every leaf again
on its own parse before it rewrites anything. Pure apart from linecache.
"""

from __future__ import annotations

import ast
import linecache
from functools import lru_cache
from typing import TypeVar

# What a Python number is built from: shapes and sizes, counts, literals, module attributes (`self.factor`).
_NUMBER_METHODS = frozenset({"size", "numel", "dim", "nelement", "ndimension"})
_NUMBER_ATTRS = frozenset({"shape", "ndim"})
_NUMBER_BUILTINS = frozenset({"len", "int", "float", "round", "abs", "min", "max"})
_SCALAR_METHODS = frozenset({"astype", "item"})  # NumPy's own casts of its scalar results
_SHAPE = object()  # an element of `B, L, D = x.shape`
_N = TypeVar("_N", bound=ast.stmt)


def numpy_on_numbers(path: str, line: int, text: str | None = None) -> bool:
    """Whether the statement at `line` of `path` (or the bindings before it, in its function, of the names it
    reads) calls NumPy (not its random generator: TM110) with Python numbers only. `text`: the file's source (read
    through linecache when not given)."""
    if text is None:
        text = "".join(linecache.getlines(path))
    if "numpy" not in text:
        return False
    return _Parsed.of(text).on_numbers(line)


class _Parsed:
    def __init__(self, tree: ast.Module) -> None:
        self.aliases = {
            a.asname or a.name
            for n in ast.walk(tree)
            if isinstance(n, ast.Import)
            for a in n.names
            if a.name == "numpy"
        }
        self.functions = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
        self.tree = tree
        self.bound: dict[str, list[tuple[int, object]]] = {}  # name -> (line, value) in the function looked at

    @staticmethod
    @lru_cache(maxsize=32)
    def of(text: str) -> _Parsed:
        try:
            return _Parsed(ast.parse(text))
        except (SyntaxError, ValueError):
            return _Parsed(ast.Module(body=[], type_ignores=[]))

    def on_numbers(self, line: int) -> bool:
        if not self.aliases:
            return False
        fn = _innermost(self.functions, line)
        stmt = _innermost([s for s in ast.walk(fn or self.tree) if isinstance(s, ast.stmt)], line)
        if stmt is None:
            return False
        self.bound = _bindings(fn) if fn is not None else {}
        return any(self._numpy_call(c) and self._on_numbers(c) for c in self._calls_behind(stmt, line, set()))

    def _calls_behind(self, stmt: ast.stmt, line: int, seen: set[str]) -> list[ast.Call]:
        """The calls of the statement's own expressions, and of the bindings before `line` of the names it reads."""
        exprs = _header(stmt)
        calls = [c for e in exprs for c in ast.walk(e) if isinstance(c, ast.Call)]
        for e in exprs:
            for name in (n.id for n in ast.walk(e) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)):
                if name in seen:
                    continue
                seen.add(name)
                for at, value in self.bound.get(name, []):
                    if at < line and isinstance(value, ast.expr):
                        calls += [c for c in ast.walk(value) if isinstance(c, ast.Call)]
        return calls

    def _numpy_call(self, call: ast.Call) -> bool:
        parts = _dotted(call.func)
        return len(parts) >= 2 and parts[0] in self.aliases and parts[1] != "random"

    def _on_numbers(self, call: ast.Call) -> bool:
        values = [*call.args, *(k.value for k in call.keywords)]
        return bool(values) and all(self._number(v, set()) for v in values)

    def _number(self, e: ast.expr, seen: set[str]) -> bool:
        if isinstance(e, ast.Constant):
            return isinstance(e.value, (int, float)) and not isinstance(e.value, complex)
        if isinstance(e, ast.Name):
            return self._number_name(e.id, seen)
        if isinstance(e, ast.Attribute):
            return e.attr in _NUMBER_ATTRS or (isinstance(e.value, ast.Name) and e.value.id == "self")
        if isinstance(e, ast.Subscript):
            return self._shape_like(e.value, seen)
        if isinstance(e, (ast.BinOp, ast.UnaryOp, ast.Tuple, ast.IfExp)):
            parts = [x for x in ast.iter_child_nodes(e) if isinstance(x, ast.expr)]
            return all(self._number(x, seen) for x in parts if not isinstance(e, ast.IfExp) or x is not e.test)
        if isinstance(e, ast.Call):
            return self._number_call(e, seen)
        return False

    def _number_call(self, e: ast.Call, seen: set[str]) -> bool:
        func = e.func
        if isinstance(func, ast.Attribute) and func.attr in _NUMBER_METHODS:
            return True  # x.size(1), x.numel()
        if isinstance(func, ast.Attribute) and func.attr in _SCALAR_METHODS and isinstance(func.value, ast.Call):
            return self._number_call(func.value, seen)  # `np.ceil(n).astype(int).item()`: NumPy's own cast
        args = [*e.args, *(k.value for k in e.keywords)]
        if isinstance(func, ast.Name) and func.id in _NUMBER_BUILTINS or _dotted(func)[:1] == ["math"]:
            return bool(args) and all(self._number(a, seen) for a in args)
        return self._numpy_call(e) and self._on_numbers(e)

    def _shape_like(self, e: ast.expr, seen: set[str]) -> bool:
        """`x.shape`, `x.size()` (indexed, a number; sliced, a tuple of numbers), or a name bound to one."""
        if isinstance(e, ast.Attribute) and e.attr == "shape":
            return True
        if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and e.func.attr == "size" and not e.args:
            return True
        return isinstance(e, ast.Name) and self._number_name(e.id, seen)

    def _number_name(self, name: str, seen: set[str]) -> bool:
        values = self.bound.get(name, [])
        if not values or name in seen:
            return False  # a parameter, a loop variable or a global: not known to be a number
        seen = seen | {name}
        return all(v is _SHAPE or (isinstance(v, ast.expr) and self._number(v, seen)) for _, v in values)


def _innermost(nodes: list[_N], line: int) -> _N | None:
    covering = [n for n in nodes if n.lineno <= line <= (n.end_lineno or n.lineno)]
    return max(covering, key=lambda n: (n.lineno, -(n.end_lineno or n.lineno)), default=None)


def _header(stmt: ast.stmt) -> list[ast.expr]:
    """The expressions of a statement itself: a compound statement's header, not its body."""
    if isinstance(stmt, (ast.For, ast.AsyncFor)):
        return [stmt.iter]
    if isinstance(stmt, (ast.If, ast.While)):
        return [stmt.test]
    if isinstance(stmt, (ast.With, ast.AsyncWith)):
        return [i.context_expr for i in stmt.items]
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Try)):
        return []
    return [n for n in ast.iter_child_nodes(stmt) if isinstance(n, ast.expr)]


def _bindings(fn: ast.AST) -> dict[str, list[tuple[int, object]]]:
    """Each name the function binds, with the value of each binding: an expression, `_SHAPE` for an element of a
    tuple unpacked from `.shape` / `.size()`, None for anything else (a parameter, a loop target, `+=`)."""
    bound: dict[str, list[tuple[int, object]]] = {}
    args = getattr(fn, "args", None)
    if args is not None:
        for a in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
            if a is not None:
                bound.setdefault(a.arg, []).append((0, None))
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                _bind(bound, target, node.value, node.lineno)
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            _bind(bound, node.target, node.value, node.lineno)
        elif isinstance(node, (ast.AugAssign, ast.For, ast.AsyncFor, ast.comprehension, ast.NamedExpr, ast.withitem)):
            held = getattr(node, "target", None) or getattr(node, "optional_vars", None)
            for n in ast.walk(held) if held is not None else ():
                if isinstance(n, ast.Name):
                    bound.setdefault(n.id, []).append((getattr(node, "lineno", 0), None))
    return bound


def _bind(bound: dict[str, list[tuple[int, object]]], target: ast.expr, value: ast.expr, line: int) -> None:
    if isinstance(target, ast.Name):
        bound.setdefault(target.id, []).append((line, value))
    elif isinstance(target, (ast.Tuple, ast.List)):
        shape = _unpacks_shape(value)
        for element in target.elts:
            if isinstance(element, ast.Name):
                bound.setdefault(element.id, []).append((line, _SHAPE if shape else None))


def _unpacks_shape(value: ast.expr) -> bool:
    """`x.shape`, `x.size()`, or a slice of one (`x.shape[:2]`)."""
    if isinstance(value, ast.Subscript) and isinstance(value.slice, ast.Slice):
        value = value.value
    if isinstance(value, ast.Attribute):
        return value.attr == "shape"
    return isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr == "size"


def _dotted(e: ast.expr) -> list[str]:
    parts: list[str] = []
    while isinstance(e, ast.Attribute):
        parts.append(e.attr)
        e = e.value
    if isinstance(e, ast.Name):
        parts.append(e.id)
        return parts[::-1]
    return []
