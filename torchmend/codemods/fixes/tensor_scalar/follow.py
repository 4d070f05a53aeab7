"""From a conversion (`.item()`, `float(t)`, `int(t)`), follow the number through the function until it meets
a tensor, and plan the edit that keeps it a tensor; refuse (`Refuse`) where a use needs a Python number."""

from __future__ import annotations

import collections
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import cast

import libcst as cst
from libcst.metadata import Assignment, FunctionScope

from torchmend.analysis import NUMBERS, values
from torchmend.analysis import match as m
from torchmend.analysis.source import SourceFile
from torchmend.analysis.torch_ops import OPERAND_METHODS
from torchmend.codemods.base import Refuse

CAPTURE = (
    "if the Python number is really needed, let dynamo trace it instead: set "
    "`torch._dynamo.config.capture_scalar_outputs = True` before compiling (`.item()` then stays in the "
    "graph as a symbolic number; an `if` or a shape that depends on it still breaks or specializes)"
)

_ARITH = (cst.Add, cst.Subtract, cst.Multiply, cst.Divide, cst.FloorDivide, cst.Modulo, cst.Power)
STACK = re.compile(r"^___stack\d+$")
CONVERSIONS = {"item": ".detach()", "float": ".detach().float()", "int": ".detach().long()"}
_FORMATTERS = {"print", "str", "repr", "format"}
_AddConversion = Callable[[cst.Call], None]


def _builtin(src: SourceFile, call: cst.Call, *names: str) -> str | None:
    """The name of the builtin `call` calls, if it is one of `names` (and not shadowed)."""
    func = call.func
    if not isinstance(func, cst.Name) or func.value not in names:
        return None
    qnames = src.qualified_names(func)
    return func.value if (f"builtins.{func.value}" in qnames or not qnames) else None


def _atom(expr: cst.BaseExpression) -> cst.BaseExpression:
    """`expr`, parenthesised when a method call on it needs it (`(a * 2).clamp(...)`)."""
    if isinstance(expr, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)) or expr.lpar:
        return expr
    return expr.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


def _method(value: cst.BaseExpression, name: str, args: tuple[cst.Arg, ...] = ()) -> cst.Call:
    return cst.Call(cst.Attribute(_atom(value), cst.Name(name)), args)


def _kwarg(name: str, value: cst.BaseExpression) -> cst.Arg:
    return cst.Arg(
        value, keyword=cst.Name(name), equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace(""))
    )


@dataclass
class Plan:
    """What one fix changes: the conversions, the max/min calls, and what the user must know about it."""

    fn: cst.FunctionDef
    conversions: dict[cst.Call, str] = field(default_factory=dict)  # call -> item | float | int
    minmax: dict[cst.Call, str] = field(default_factory=dict)  # call -> max | min
    tainted: set[cst.CSTNode] = field(default_factory=set)  # expressions that become tensors
    number_math: bool = False  # Python arithmetic on the number before it met a tensor
    returns: bool = False  # the compiled function now returns a tensor
    pending: dict[cst.BaseExpression, str] = field(default_factory=dict)  # values of followed names -> name


class Analysis:
    """Follows numbers out of tensors through one function; raises Refuse when a use needs a number."""

    def __init__(self, src: SourceFile, fn: cst.FunctionDef, compiled: bool) -> None:
        self.src = src
        self.fn = fn
        self.compiled = compiled
        self.scope = src.scopes.get(fn.body)

    # --- what a value is ----------------------------------------------------------------------------

    def conversion(self, call: cst.Call) -> str | None:
        """'item', 'float' or 'int' when `call` turns a tensor into a Python number."""
        if isinstance(call.func, cst.Attribute) and call.func.attr.value == "item" and not call.args:
            return "item"
        kind = _builtin(self.src, call, "float", "int")
        if (
            kind
            and len(call.args) == 1
            and not call.args[0].keyword
            and not call.args[0].star
            and not self._is_number(call.args[0].value)
        ):
            return kind
        return None

    def _is_number(self, expr: cst.BaseExpression) -> bool:
        """Surely a Python number already (a literal, a size, a len()), or a string."""
        return isinstance(expr, cst.BaseString) or values(self.src).kind(expr) in NUMBERS

    def tensor_of(self, call: cst.Call, kind: str) -> cst.BaseExpression:
        """The tensor a conversion reads (`int(t.item())` reads `t`)."""
        if kind == "item":
            assert isinstance(call.func, cst.Attribute)
            return call.func.value
        arg = call.args[0].value
        if isinstance(arg, cst.Call) and self.conversion(arg) == "item":
            return self.tensor_of(arg, "item")
        return arg

    def conversions_in(self, stmt: cst.CSTNode) -> list[cst.Call]:
        """The conversions in a statement (a compound statement's header only), outermost ones: in
        `int(t.item())` the `int`. `float(x)`/`int(x)` count only when `x` is surely a tensor or when
        nothing else on the statement converts (the break at this line proves it converts a tensor)."""
        roots: list[cst.CSTNode] = [stmt]
        if isinstance(stmt, (cst.If, cst.While)):
            roots = [stmt.test]
        elif isinstance(stmt, cst.For):
            roots = [stmt.iter]
        elif isinstance(stmt, cst.With):
            roots = list(stmt.items)
        elif isinstance(stmt, cst.BaseCompoundStatement):
            roots = []
        calls = [c for r in roots for c in self.src.nodes_in(r, cst.Call) if isinstance(c, cst.Call)]
        found = [c for c in calls if self.conversion(c)]
        outer = [c for c in found if not self._inside_conversion(c)]
        sure = [c for c in outer if self.sure_conversion(c)]
        return sure if sure else (outer if len(outer) == 1 else [])

    def sure_conversion(self, call: cst.Call) -> bool:
        """A conversion of something that is surely a tensor: `.item()`, or float()/int() of a tensor."""
        kind = self.conversion(call)
        return kind == "item" or (kind is not None and self.is_tensor(self.tensor_of(call, kind)))

    def _inside_conversion(self, call: cst.Call) -> bool:
        parent = self.src.parents.get(call)
        if isinstance(parent, cst.Arg):
            outer = self.src.parents[parent]
            return isinstance(outer, cst.Call) and self.conversion(outer) in ("float", "int")
        return False

    def bindings(self, name: cst.Name) -> list[cst.BaseExpression]:
        """The values a function-local name is assigned (`x = value`), when every binding of it is such a plain
        assignment; else none (a parameter, a loop target, `x += ...`, an import)."""
        scope = self.src.scopes.get(name)
        if scope is not self.scope or scope is None:
            return []
        values = []
        for bound in scope[name.value]:
            value = self._assigned_value(bound.node) if isinstance(bound, Assignment) and bound.scope is scope else None
            if value is None:
                return []
            values.append(value)
        return values

    def _assigned_value(self, target: cst.CSTNode) -> cst.BaseExpression | None:
        parent = self.src.parents.get(target)
        if isinstance(parent, cst.AssignTarget):
            assign = self.src.parents[parent]
            if isinstance(assign, cst.Assign) and len(assign.targets) == 1:
                return assign.value
        if isinstance(parent, cst.AnnAssign) and parent.target is target:
            return parent.value
        return None

    def is_tensor(self, expr: cst.BaseExpression) -> bool:
        """Surely not a Python number before the rewrite (a tensor), judging by the source alone."""
        return values(self.src).is_tensor(expr)

    def sources(self, expr: cst.BaseExpression, seen: set[cst.CSTNode] | None = None) -> set[cst.Call]:
        """The conversions a number is computed from (through arithmetic, max/min and local names)."""
        seen = set() if seen is None else seen
        if expr in seen:
            return set()
        seen.add(expr)
        if isinstance(expr, cst.Call):
            if self.sure_conversion(expr):
                return {expr}
            if _builtin(self.src, expr, "max", "min", "abs"):
                return set().union(*(self.sources(a.value, seen) for a in expr.args))
            return set()
        if isinstance(expr, cst.BinaryOperation):
            return self.sources(expr.left, seen) | self.sources(expr.right, seen)
        if isinstance(expr, cst.UnaryOperation):
            return self.sources(expr.expression, seen)
        if isinstance(expr, cst.Name):
            return set().union(*(self.sources(v, seen) for v in self.bindings(expr)))
        return set()

    # --- where the value goes -----------------------------------------------------------------------

    def plan(self, start: list[cst.Call]) -> Plan:
        plan = Plan(self.fn)
        work: list[cst.CSTNode] = []

        def add_conversion(call: cst.Call) -> None:
            if call not in plan.conversions:
                plan.conversions[call] = self.conversion(call) or ""
                plan.tainted.add(call)
                work.append(call)

        for call in start:
            add_conversion(call)
        while work:
            node = work.pop(0)
            for nxt in self._follow(node, plan, add_conversion):
                if nxt not in plan.tainted:
                    plan.tainted.add(nxt)
                    work.append(nxt)
        for value, name in plan.pending.items():
            if value not in plan.tainted:  # `scale = 1.0` beside `scale = t.item()`: a number in some paths
                raise Refuse(
                    f"`{name}` is also assigned `{self.src.code(value).strip()}` at "
                    f"{self._where(value)}, which stays a Python number"
                )
        return plan

    def _order(self, node: cst.CSTNode) -> tuple[int, int]:
        start = self.src.positions[node].start
        return start.line, start.column

    def _where(self, node: cst.CSTNode) -> str:
        return f"line {self.src.line_of(node)}"

    def _what(self, node: cst.CSTNode) -> str:
        code = self.src.code(node).strip()
        return f"`{code}`" if len(code) <= 40 and "\n" not in code else "the number"

    def _follow(self, node: cst.CSTNode, plan: Plan, add_conversion: _AddConversion) -> list[cst.CSTNode]:
        """The expressions that become tensors because `node` does; raises Refuse on a use that needs a number."""
        parent = self.src.parents[node]
        what, where = self._what(node), self._where(node)
        if isinstance(parent, cst.BinaryOperation):
            other = parent.right if parent.left is node else parent.left
            if not isinstance(parent.operator, _ARITH):
                raise Refuse(f"{what} is used in a bitwise or matrix operation at {where}")
            if isinstance(parent.operator, cst.Modulo) and isinstance(other, cst.BaseString):
                raise Refuse(f"{what} is formatted into a string at {where}")
            if self.is_tensor(other):
                return []  # it already met a tensor here: the result was a tensor before, too
            plan.number_math = True  # Python arithmetic (float64) before it meets a tensor
            return [parent]
        if isinstance(parent, cst.UnaryOperation):
            if isinstance(parent.operator, (cst.Minus, cst.Plus)):
                return [parent]
            raise Refuse(f"{what} is used as a bool (`not`) at {where}")
        if isinstance(parent, cst.Arg):
            return self._follow_argument(node, parent, plan, add_conversion)
        if (
            isinstance(parent, cst.AnnAssign)
            and parent.value is node
            and m.matches(parent.annotation.annotation, m.Name("float") | m.Name("int"))
        ):
            raise Refuse(
                f"{what} is stored in a name annotated `{self.src.code(parent.annotation.annotation)}` at {where}"
            )
        if isinstance(parent, (cst.Assign, cst.AnnAssign)) and parent.value is node:
            return self._follow_name(node, parent, plan)
        if isinstance(parent, cst.AugAssign):
            if isinstance(parent.target, cst.Name) and self.is_tensor(parent.target):
                return []
            raise Refuse(
                f"{what} is accumulated into `{self.src.code(parent.target)}` at {where}, which "
                "would turn that into a tensor"
            )
        if isinstance(parent, cst.Return):
            if self.compiled:
                plan.returns = True
                return []
            raise Refuse(
                f"{what} is returned from `{self.fn.name.value}` at {where}, and torchmend cannot "
                "see whether its callers need a Python number"
            )
        if isinstance(parent, cst.Expr):  # a bare `t.item()`: no value to keep, and it may be there to sync
            raise Refuse(
                f"the value of {what} is not used at {where} (a bare `.item()` is often there to wait for the GPU)"
            )
        if isinstance(parent, (cst.If, cst.While, cst.IfExp, cst.Assert, cst.BooleanOperation)):
            raise Refuse(f"{what} is tested as a bool (`if`, `while`, `and`/`or`) at {where}")
        if isinstance(parent, (cst.Comparison, cst.ComparisonTarget)):
            raise Refuse(f"{what} is compared at {where}")
        if isinstance(parent, cst.FormattedStringExpression):
            raise Refuse(f"{what} is formatted into an f-string at {where}")
        if isinstance(parent, (cst.Index, cst.Slice, cst.SubscriptElement)):
            raise Refuse(f"{what} is used as an index or slice at {where}")
        if isinstance(parent, cst.Subscript):
            raise Refuse(f"{what} is indexed at {where}")
        if isinstance(parent, (cst.DictElement, cst.Element, cst.StarredElement, cst.StarredDictElement)):
            raise Refuse(f"{what} is put into a list, tuple, set or dict at {where}")
        if isinstance(parent, cst.Attribute):
            raise Refuse(f"`.{parent.attr.value}` is read on {what} at {where}")
        raise Refuse(f"{what} is used at {where} in a way torchmend cannot follow")

    def _follow_argument(
        self, node: cst.CSTNode, arg: cst.Arg, plan: Plan, add_conversion: _AddConversion
    ) -> list[cst.CSTNode]:
        call = self.src.parents[arg]
        what, where = self._what(node), self._where(node)
        if not isinstance(call, cst.Call):
            raise Refuse(f"{what} is used at {where} in a way torchmend cannot follow")
        minmax = _builtin(self.src, call, "max", "min")
        if minmax:
            if len(call.args) != 2 or any(a.keyword or a.star for a in call.args):
                raise Refuse(f"{what} is passed to a {minmax}() of other than two plain arguments at {where}")
            plan.minmax[call] = minmax
            for other in call.args:
                if other is not arg:
                    for source in self.sources(other.value):
                        add_conversion(source)
            return [call]
        if _builtin(self.src, call, "abs"):
            return [call]
        func = call.func
        if (
            isinstance(func, cst.Attribute)
            and func.attr.value in OPERAND_METHODS
            and not arg.star
            and self.is_tensor(func.value)
        ):
            return []
        if self.src.is_qualified(func, *(f"torch.{n}" for n in OPERAND_METHODS)) and not arg.star:
            return []  # torch.clamp(x, max=v), torch.maximum(x, v): tensors are welcome, the result is one
        name = self.src.code(func).strip()
        if _builtin(self.src, call, *_FORMATTERS) or name.split(".")[-1] in {
            "debug",
            "info",
            "warning",
            "error",
            "log",
            "format",
        }:
            raise Refuse(f"{what} is printed, logged or formatted at {where}")
        if _builtin(self.src, call, "float", "int", "bool", "round"):
            raise Refuse(f"{what} is converted again with {name}() at {where}")
        raise Refuse(f"{what} is passed to `{name}()` at {where}, which may need a Python number")

    def _follow_name(self, node: cst.CSTNode, assign: cst.Assign | cst.AnnAssign, plan: Plan) -> list[cst.CSTNode]:
        where = self._where(node)
        targets = [t.target for t in assign.targets] if isinstance(assign, cst.Assign) else [assign.target]
        if len(targets) != 1 or not isinstance(targets[0], cst.Name):
            code = " = ".join(self.src.code(t).strip() for t in targets)
            raise Refuse(
                f"the number is stored in `{code}` at {where} (torchmend follows it only through a local name)"
            )
        target = targets[0]
        name = target.value
        scope = self.src.scopes.get(target)
        if scope is not self.scope or not isinstance(scope, FunctionScope):
            raise Refuse(f"`{name}` is not a local name of `{self.fn.name.value}` ({where})")
        values = self.bindings(target)
        if not values:
            raise Refuse(
                f"`{name}` is also bound another way than `{name} = ...` in `{self.fn.name.value}` "
                "(a parameter, a loop variable, `+=`), so it could stay a Python number"
            )
        for value in values:  # every value must become a tensor too: checked once the flow is complete
            plan.pending.setdefault(value, name)
        for inner in {self.src.scopes.get(n) for n in self.src.nodes_in(self.fn.body, cst.Name)}:
            if inner is not None and inner is not scope and inner.accesses[name] and not inner.assignments[name]:
                raise Refuse(f"`{name}` is used inside a nested function, lambda or comprehension")
        # in source order: libcst's accesses are a set hashed by id, so which use refused first was left to chance
        return sorted((a.node for a in scope.accesses[name]), key=self._order)

    # --- the rewrite --------------------------------------------------------------------------------

    def replacements(self, plan: Plan) -> tuple[dict[cst.CSTNode, cst.CSTNode], tuple[tuple[str, str | None], ...]]:
        """The outermost edited expressions, each rebuilt with every edit inside it; and the imports needed."""
        edited = set(plan.conversions) | set(plan.minmax)
        imports: list[tuple[str, str | None]] = []
        analysis = self

        class _Rewrite(cst.CSTTransformer):
            def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
                if original in plan.conversions:
                    new = analysis._converted(original, updated, plan.conversions[original])
                elif original in plan.minmax:
                    new = analysis._clamped(original, updated, plan, imports)
                else:
                    return updated
                if _comments(updated) - _comments(new):
                    raise Refuse(
                        f"the call at {analysis._where(original)} holds a comment the rewrite would "
                        "drop; move the comment, or rewrite the call by hand"
                    )
                return new

        out: dict[cst.CSTNode, cst.CSTNode] = {}
        for node in sorted(edited, key=self._order):
            if not any(a in edited for a in self.src.ancestors(node)):
                out[node] = cast(cst.CSTNode, node.visit(_Rewrite()))  # _Rewrite replaces calls, never removes
        return out, tuple(dict.fromkeys(imports))

    def _converted(self, original: cst.Call, updated: cst.Call, kind: str) -> cst.BaseExpression:
        if kind == "item":
            assert isinstance(updated.func, cst.Attribute)
            return updated.with_changes(func=updated.func.with_changes(attr=cst.Name("detach")))
        arg = updated.args[0].value
        # _Rewrite only turns calls into calls: the updated argument is a Call, so the original one is.
        if isinstance(arg, cst.Call) and self.conversion(cast(cst.Call, original.args[0].value)) == "item":
            assert isinstance(arg.func, cst.Attribute)
            arg = arg.func.value  # int(t.item()) reads t
        detached = _method(arg, "detach")
        kept = _method(detached, "float" if kind == "float" else "long")
        return kept.with_changes(lpar=updated.lpar, rpar=updated.rpar)

    def _clamped(
        self, original: cst.Call, updated: cst.Call, plan: Plan, imports: list[tuple[str, str | None]]
    ) -> cst.BaseExpression:
        kind = plan.minmax[original]
        tensors = [a.value in plan.tainted or self.is_tensor(a.value) for a in original.args]
        if all(tensors):
            func, needed = self.src.torch_expr("maximum" if kind == "max" else "minimum")
            imports.extend(needed)
            return updated.with_changes(func=func)
        value, bound = (0, 1) if original.args[0].value in plan.tainted else (1, 0)
        # max(v, c) is v clamped from below (clamp(min=c)); min(v, c) from above.
        keyword = "min" if kind == "max" else "max"
        first, last = updated.args
        # Keep the layout of a call over several lines, and the comment after its first argument.
        lead = updated.whitespace_before_args
        if (
            value == 0
            and isinstance(first.comma, cst.Comma)
            and not _comments(lead)
            and isinstance(first.comma.whitespace_after, cst.ParenthesizedWhitespace)
        ):
            lead = first.comma.whitespace_after
        # The first of two arguments has its comma (only a last argument may lack one).
        comma = first.comma if value == 1 and _comments(cast(cst.Comma, first.comma)) else last.comma
        arg = _kwarg(keyword, updated.args[bound].value).with_changes(
            comma=comma, whitespace_after_arg=last.whitespace_after_arg
        )
        clamp = cst.Call(
            cst.Attribute(_atom(updated.args[value].value), cst.Name("clamp")), [arg], whitespace_before_args=lead
        )
        return clamp.with_changes(lpar=updated.lpar, rpar=updated.rpar)


def _comments(node: cst.CSTNode) -> collections.Counter[str]:
    found: collections.Counter[str] = collections.Counter()

    class _V(cst.CSTVisitor):
        def visit_Comment(self, c: cst.Comment) -> None:
            found[c.value] += 1

    node.visit(_V())
    return found
