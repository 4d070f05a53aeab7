"""Tests that decide what runs. One that asks whether it runs compiled: lint neither checks nor follows what it
guards, since which branch dynamo takes is not for a static reading to guess (transformers' `if not is_tracing(x)
and ...:` is skipped under compile by design). One that reads a setting (`if self.layerdrop > 0.0:`): what it
guards is reported as possible, since many configurations never run it."""

from __future__ import annotations

import builtins
import weakref

import libcst as cst

from torchmend.analysis import Kind, builtin_or_math, values
from torchmend.analysis.source import SourceFile
from torchmend.lint.defaults import by_default

_GATES = ("is_compiling", "is_dynamo_compiling", "is_torchdynamo_compiling", "is_tracing", "is_fx_tracing")


def is_compiling(src: SourceFile, call: cst.Call) -> bool:
    """A call that tells compiled code from eager (`torch.compiler.is_compiling()`, transformers'
    `is_torchdynamo_compiling()` and `is_tracing(x)`); torch.jit.is_tracing() is False under dynamo."""
    names = src.qualified_names(call.func) or {src.code(call.func)}
    return any(q.rsplit(".", 1)[-1] in _GATES and q != "torch.jit.is_tracing" for q in names)


def compile_gated(src: SourceFile, node: cst.CSTNode) -> bool:
    """Inside an `if` (or a conditional expression, or an `and`/`or`) of the same def whose test asks whether it
    runs compiled: which branch dynamo takes is not for lint to guess, so neither is checked. Remembered per node,
    so a def of n nested nodes (a 600-term sum) costs n steps, not n times its depth."""
    known = _gated.setdefault(src, {})
    path: list[cst.CSTNode] = []
    answer = False
    here = node
    while True:
        if here in known:
            answer = known[here]
            break
        anc = src.parents.get(here)
        if anc is None or isinstance(anc, cst.FunctionDef):
            break
        path.append(here)
        test = anc.test if isinstance(anc, (cst.If, cst.IfExp, cst.While)) else None
        if isinstance(anc, cst.BooleanOperation):
            test = anc
        if test is not None and any(is_compiling(src, c) for c in src.nodes_in(test, cst.Call)):
            answer = True
            break
        here = anc
    for n in path:
        known[n] = answer
    return answer


_gated: weakref.WeakKeyDictionary[SourceFile, dict[cst.CSTNode, bool]] = weakref.WeakKeyDictionary()


def setting(src: SourceFile, node: cst.CSTNode) -> cst.BaseExpression | None:
    """The test that decides, within the same def, whether `node` runs, when that test reads a setting or an
    optional input rather than data: an enclosing `if`, or an earlier `if ...: return` of the def that `node` runs
    only past. A setting is a test of plain attributes and numbers (no tensor, no call but a builtin's or a
    predicate's: `is_flash_attention_requested(config)`), something other than `self.training` (which holds all
    through training), that the default configuration does not decide the way that runs `node` (defaults.py:
    `if self.config.mask_time_prob > 0:` with a default of 0.05 limits nothing). An optional input is a parameter
    that defaults to None, other than the def's first (its main input): `if pixel_values is not None:` runs only
    for the callers that pass it."""
    fn = src.enclosing(node, cst.FunctionDef)
    if not isinstance(fn, cst.FunctionDef):
        return None
    optional = _optional_params(fn)
    top: cst.CSTNode | None = None
    for anc in [node, *src.ancestors(node)]:
        if anc is fn:
            break
        if isinstance(anc, cst.IfExp) and _optional_test(anc.test, optional, cst.IsNot):
            if _within(src, node, anc.body):  # `a.tolist() if a is not None else [n] * b`
                return anc.test
        if isinstance(anc, cst.If) and node is not anc and not _within(src, node, anc.test):
            if _optional_test(anc.test, optional, cst.IsNot) and _within(src, node, anc.body):
                return anc.test
            # a setting that the default configuration sets the way that runs `node` does not make it possible
            if _setting_test(src, anc.test) and by_default(src, anc.test) is not _within(src, node, anc.body):
                return anc.test
        parent = src.parents.get(anc)
        if isinstance(parent, cst.IndentedBlock) and src.parents.get(parent) is fn:
            top = anc
    if top is None or not isinstance(fn.body, cst.IndentedBlock):
        return None
    for stmt in fn.body.body:  # `if not self.quant_mode: return x` before it: runs only when the setting is on
        if stmt is top:
            break
        if isinstance(stmt, cst.If) and stmt.orelse is None and _leaves(stmt.body):
            if _optional_test(stmt.test, optional, cst.Is):  # `if pixel_values is None: return ...`
                return _negated(stmt.test)
            if _setting_test(src, stmt.test) and by_default(src, stmt.test) is not False:
                return _negated(stmt.test)
    return None


_PREDICATE = ("is_", "has_", "use_", "should_", "_is_", "_use_")


def _setting_test(src: SourceFile, test: cst.BaseExpression) -> bool:
    attrs = [a.attr.value for a in src.nodes_in(test, cst.Attribute)]
    calls = src.nodes_in(test, cst.Call)
    predicates = [c for c in calls if _predicate(src, c)]
    return (
        bool(attrs or predicates)
        and set(attrs) != {"training"}
        and not any(builtin_or_math(src, c.func) is None and c not in predicates and not _str_test(c) for c in calls)
        and not src.nodes_in(test, cst.Subscript)
        and values(src).kind(test) is not Kind.TENSOR
    )


_STR_TESTS = ("startswith", "endswith", "isdigit", "isalpha", "lower", "upper", "strip", "removeprefix")


def _str_test(call: cst.Call) -> bool:
    """`name.startswith("paged|")`: a string method that reads a setting's text."""
    return isinstance(call.func, cst.Attribute) and call.func.attr.value in _STR_TESTS


def _predicate(src: SourceFile, call: cst.Call) -> bool:
    """`is_flash_attention_requested(config)`: a named yes/no question about settings (no tensor argument)."""
    name = src.code(call.func).rsplit(".", 1)[-1]
    v = values(src)
    return name.startswith(_PREDICATE) and not any(v.is_tensor(a.value) for a in call.args)


def _optional_params(fn: cst.FunctionDef) -> set[str]:
    """The parameters that default to None, less the def's main input (its first after self)."""
    params = [p for p in fn.params.params if p.name.value not in ("self", "cls")]
    optional = [*params[1:], *fn.params.kwonly_params]
    return {p.name.value for p in optional if isinstance(p.default, cst.Name) and p.default.value == "None"}


def _optional_test(test: cst.BaseExpression, optional: set[str], op: type[cst.BaseCompOp]) -> bool:
    """A test that only the caller's optional inputs decide. `op` IsNot (a block it guards): `x is not None`, or
    any test that reads optional parameters and nothing else (`mm.get("image") is not None`, `isinstance(mm,
    dict)`), but not a bare `x is None` (filling in a default, which most calls run); an `and` with one such
    operand, an `or` of two. `op` Is (an early `return` it guards): `x is None`."""
    if isinstance(test, cst.BooleanOperation):
        left, right = _optional_test(test.left, optional, op), _optional_test(test.right, optional, op)
        return (left or right) if isinstance(test.operator, cst.And) else (left and right)
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1 and isinstance(test.left, cst.Name):
        comp = test.comparisons[0]
        if isinstance(comp.comparator, cst.Name) and comp.comparator.value == "None":
            return isinstance(comp.operator, op) and test.left.value in optional
    if op is cst.Is:
        return False
    names = _names_read(test)
    return bool(names) and names <= optional


def _names_read(expr: cst.BaseExpression) -> set[str]:
    """The variables an expression reads: the root of each attribute chain (`mm` of `mm.get`), not a called name
    (`isinstance`), not a builtin (`dict`, `None`)."""
    found: set[str] = set()

    class _Names(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> bool:
            if not isinstance(node.func, cst.Name):
                node.func.visit(self)
            for arg in node.args:
                arg.value.visit(self)
            return False

        def visit_Attribute(self, node: cst.Attribute) -> bool:
            node.value.visit(self)
            return False

        def visit_Name(self, node: cst.Name) -> None:
            if not hasattr(builtins, node.value):
                found.add(node.value)

    expr.visit(_Names())
    return found


def _negated(test: cst.BaseExpression) -> cst.BaseExpression:
    """The test under which code past `if test: return` runs (for the finding's "when ... holds")."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return test.expression
    return cst.UnaryOperation(cst.Not(), test.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()]))


def _within(src: SourceFile, node: cst.CSTNode, expr: cst.CSTNode) -> bool:
    return node is expr or any(a is expr for a in src.ancestors(node))


def _leaves(body: cst.BaseSuite) -> bool:
    """A block that ends in `return` (one that raises only checks the call: valid calls all go on past it)."""
    stmts = body.body if isinstance(body, cst.IndentedBlock) else [body]
    last = stmts[-1] if stmts else None
    if isinstance(last, cst.SimpleStatementLine):
        return any(isinstance(s, cst.Return) for s in last.body)
    return isinstance(body, cst.SimpleStatementSuite) and any(isinstance(s, cst.Return) for s in body.body)
