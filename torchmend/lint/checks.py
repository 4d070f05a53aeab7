"""What lint looks for in a def that runs compiled: each check reads one node kind through the shared analysis
(value kinds, loggers, the print and logging tests of the gate codemods) and says how sure the source makes it:
`likely` when the source shows it (a `.item()` of a tensor, `print`), `possible` when it depends on a value the
source does not pin down (a parameter that may be a tensor)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import cast

import libcst as cst

from torchmend import rules
from torchmend.analysis import (
    NUMBERS,
    Kind,
    assigned_values,
    builtin_or_math,
    is_print,
    is_torch,
    self_attr_values,
    self_name,
    values,
)
from torchmend.analysis import match as m
from torchmend.analysis.dynamo_config import reordered
from torchmend.analysis.gating import already_gated
from torchmend.analysis.loggers import logging_call
from torchmend.analysis.source import SourceFile
from torchmend.lint.dynamic import dynamic_call, masked_read, skipped_method
from torchmend.lint.gates import compile_gated, is_compiling, setting
from torchmend.lint.hits import LIKELY, POSSIBLE, Hit, short
from torchmend.lint.module_state import built_in_forward, skipped_call, state_cast
from torchmend.lint.regions import Reached
from torchmend.lint.self_writes import self_write, setting_written

_SCALAR_CONSTRUCTORS = {"torch.tensor", "torch.as_tensor", "torch.scalar_tensor"}


def nodes_in_body(fn: cst.FunctionDef) -> list[cst.CSTNode]:
    """Every node of a def's own body (not of the defs, classes and lambdas nested in it), in source order."""
    found: list[cst.CSTNode] = []

    class _All(cst.CSTVisitor):
        def on_visit(self, node: cst.CSTNode) -> bool:
            if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                return False
            found.append(node)
            return True

    for stmt in fn.body.body if isinstance(fn.body, cst.IndentedBlock) else [fn.body]:
        stmt.visit(_All())
    return found


def check(r: Reached) -> Iterator[Hit]:
    """Every hit in one compiled def; one that runs only under a setting (`if self.layerdrop > 0.0:`) is possible.
    After a graph break inside a loop dynamo runs the rest of the def eagerly ("graph break in for loop", the frame
    skipped): what follows it in the def breaks nothing, and is not reported."""
    for found in _hits(r):
        hit = _judged(r, found)
        yield hit
        if hit.rule.startswith("TM1") and hit.confidence == LIKELY and _in_loop(r, hit.node):
            return


def _absent_input(r: Reached, node: cst.CSTNode) -> cst.BaseExpression | None:
    """The test under which `node` runs only when a parameter is None, where every call that runs the def passes
    it a value (`get_masks(..., padding_mask=attention_mask)`, with `attention_mask=None` in forward: the end user's
    optional input): code under `else:` of `if padding_mask is not None:`, or under `if padding_mask is None:` that
    does not fill it in, runs only for callers whose value is None."""
    if not r.via:
        return None
    for anc in r.src.ancestors(node):
        if anc is r.fn:
            return None
        if not isinstance(anc, cst.If):
            continue
        test = anc.test
        if not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1 and isinstance(test.left, cst.Name)):
            continue
        comp = test.comparisons[0]
        if not m.matches(comp.comparator, m.Name("None")):
            continue
        name = test.left.value
        in_body = any(a is anc.body for a in r.src.ancestors(node))
        none_side = in_body if isinstance(comp.operator, cst.Is) else (not in_body and anc.orelse is not None)
        if isinstance(comp.operator, cst.Is) and _assigns(r.src, anc.body, name):
            continue  # `if x is None: x = default`: most calls run it
        if none_side and all(_passed(src, call, r.fn, name) for src, call in r.via):
            return cst.parse_expression(f"{name} is None")
    return None


def _assigns(src: SourceFile, block: cst.CSTNode, name: str) -> bool:
    return any(m.matches(t.target, m.Name(name)) for a in src.nodes_in(block, cst.Assign) for t in a.targets)


def _passed(src: SourceFile, call: cst.Call, fn: cst.FunctionDef, name: str) -> bool:
    """Whether `call` gives `fn`'s parameter `name` a value other than a literal None (by keyword or by position):
    its caller's own optional input (None only when the end user gives none), or any other expression (None only
    by accident: `get_interface(self.config._attn_implementation, ...)`)."""
    params = [p.name.value for p in fn.params.params]
    if params and params[0] in ("self", "cls") and isinstance(call.func, cst.Attribute):
        params = params[1:]
    value = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == name), None)
    if value is None:
        positional = [a.value for a in call.args if a.keyword is None and not a.star]
        index = params.index(name) if name in params else -1
        value = positional[index] if 0 <= index < len(positional) else None
    return value is not None and not m.matches(value, m.Name("None"))


def _in_loop(r: Reached, node: cst.CSTNode) -> bool:
    for anc in r.src.ancestors(node):
        if anc is r.fn:
            return False
        if isinstance(anc, (cst.For, cst.While)):
            return True
    return False


def _judged(r: Reached, hit: Hit) -> Hit:
    if hit.rule in ("TM103", "TM104") and r.src.enclosing(hit.node, cst.Assert) is not None:
        hit = replace(hit, rule="TM108")  # `assert t.max().item() <= n`: an assert's break, as scan files it
    test = setting(r.src, hit.node)
    if test is None:
        test = _absent_input(r, hit.node)
    if hit.confidence == POSSIBLE or (test is None and r.setting is None):
        return hit
    when = short(r.src, test) if test is not None else r.setting
    return replace(hit, confidence=POSSIBLE, what=f"{hit.what}, when `{when}` holds")


def _hits(r: Reached) -> Iterator[Hit]:
    src = r.src
    me = self_name(src, r.fn) if r.bound else None
    settings: set[int] = set()  # the `if`s already reported for a setting written under them (TM209)
    for node in nodes_in_body(r.fn):
        if compile_gated(src, node):
            continue
        if isinstance(node, cst.Call):
            if already_gated(src, node):
                continue
            yield from _call(src, r, node)
        elif isinstance(node, cst.Subscript) and masked_read(src, node):
            yield Hit("TM111", node, LIKELY, f"`{short(src, node)}` reads a tensor through a boolean mask")
        elif isinstance(node, (cst.If, cst.While)):
            yield from _branch(src, node, node.test, "while" if isinstance(node, cst.While) else "if")
        elif isinstance(node, cst.Assert):
            if async_assert(src, node):
                continue
            if values(src).is_tensor(node.test):
                yield Hit("TM108", node, LIKELY, f"`assert` on a tensor: `{short(src, node.test)}`")
            elif _tensor_test(src, node.test):
                yield Hit("TM108", node, POSSIBLE, f"`assert` on what may be a tensor: `{short(src, node.test)}`")
        elif isinstance(node, cst.Assign) and _sets_requires_grad(src, node):
            yield Hit("TM109", node, LIKELY, "`requires_grad = True` set on a tensor in compiled code")
        elif me is not None and isinstance(node, (cst.AugAssign, cst.Assign)):
            cast = state_cast(src, node, me) if isinstance(node, cst.Assign) else None
            if cast is not None:
                yield Hit(cast[0], node, LIKELY, cast[1])
            yield from self_write(src, r, node, me)
            if isinstance(node, cst.Assign):
                test = setting_written(src, node, me)
                if test is not None and id(test[0]) not in settings:
                    settings.add(id(test[0]))
                    variable = src.code(test[1])
                    what = f"`{variable}` is a setting written in compiled code (`{short(src, node)}`)"
                    yield Hit("TM209", test[0], LIKELY, what, variable, once=True)


ASYNC_ASSERT_FROM = (2, 13)  # measured on 2.13.0, 2.14.1, 2.15.0 (aot_eager, graphs counted by a backend)


def async_assert(src: SourceFile, node: cst.Assert) -> bool:
    """An `assert` the run's torch compiles without a break (dynamo makes it an async assert, from 2.13): its test is
    one tensor expression (`torch.isfinite(h).all()`, `h.sum() > 0`; not `not t`, not `a and b`, not `.item()`)
    and its message, if any, a plain string (an f-string that formats a tensor breaks)."""
    version = src.torch_version
    if version is None or version[:2] < ASYNC_ASSERT_FROM:
        return False
    test = node.test
    if isinstance(test, (cst.BooleanOperation, cst.UnaryOperation)):
        return False
    if any(
        m.matches(c.func, m.Attribute(attr=m.Name("item") | m.Name("tolist"))) for c in src.nodes_in(test, cst.Call)
    ):
        return False
    if any(builtin_or_math(src, c.func) in ("float", "int", "bool") for c in src.nodes_in(test, cst.Call)):
        return False
    return node.msg is None or isinstance(node.msg, (cst.SimpleString, cst.ConcatenatedString))


def _call(src: SourceFile, r: Reached, call: cst.Call) -> Iterator[Hit]:
    v = values(src)
    func = call.func
    if is_print(src, call):
        if not reordered(src, call, r.site_src):
            yield Hit("TM101", call, LIKELY, "`print(...)` in compiled code")
        return
    if any(q.startswith(rules.HOST_RANDOM_MODULES) for q in src.qualified_names(func)):
        yield Hit("TM110", call, LIKELY, f"`{short(src, func)}(...)` draws from NumPy's or Python's generator")
        return
    if logging_call(src, call):
        if reordered(src, call, r.site_src):
            return
        yield Hit("TM102", call, LIKELY, f"logging call `{short(src, func)}(...)` in compiled code")
        return
    if _framework_log(src, r, call):
        what = f"`{short(src, func)}(...)` logs through the training framework (its code breaks the graph)"
        yield Hit("TM102", call, LIKELY, what)
        return
    dynamic = dynamic_call(src, call)
    if dynamic is not None:  # scan's TM111 (GB0036, GB0033: `.tolist()` too)
        yield Hit("TM111", call, LIKELY, dynamic)
        return
    for why in skipped_method(src, call):
        yield Hit("TM105", call, LIKELY, why)
    skipped = skipped_call(src, call)
    if skipped is not None:
        yield Hit("TM105", call, LIKELY, skipped)
        return
    built = built_in_forward(src, call)
    if built is not None:
        yield Hit("TM199", call, LIKELY, built)
        return
    if isinstance(func, cst.Attribute) and func.attr.value in ("item", "tolist") and not call.args:
        receiver = func.value
        if func.attr.value == "tolist" and v.maybe_tensor(receiver):  # as likely as `.item()` of one
            yield Hit("TM111", call, LIKELY, f"`{short(src, call)}` reads a tensor into Python numbers")
        elif v.is_tensor(receiver) or v.maybe_tensor(receiver):
            yield Hit("TM104", call, LIKELY, f"`{short(src, call)}` turns a tensor into a Python number")
        return
    builtin = builtin_or_math(src, func)
    if builtin in ("float", "int", "bool") and len(call.args) == 1 and not call.args[0].star:
        arg = call.args[0].value
        if v.is_tensor(arg) and not _parameter(src, arg):
            yield Hit("TM104", call, LIKELY, f"`{short(src, call)}` turns a tensor into a Python number")
        elif v.is_tensor(arg):  # a parameter used as a tensor here may still be given a number
            yield Hit("TM104", call, POSSIBLE, f"`{short(src, call)}` may turn a tensor into a Python number")
        elif v.kind(arg) is Kind.UNKNOWN and v.maybe_tensor(arg):
            yield Hit("TM104", call, POSSIBLE, f"`{short(src, call)}` may turn a tensor into a Python number")
        return
    grad = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "requires_grad"), None)
    if grad is not None and not m.matches(grad, m.Name("False")) and is_torch(src, func):
        yield Hit("TM109", call, LIKELY, f"`{short(src, call)}` makes a tensor that requires grad in compiled code")
        return
    if src.qualified_names(func) & _SCALAR_CONSTRUCTORS and call.args and call.args[0].keyword is None:
        yield from _scalar_tensor(src, r, call, call.args[0].value)


_FRAMEWORK_LOG = ("log", "log_dict")
_FRAMEWORK_BASES = ("LightningModule",)  # lightning.pytorch / pytorch_lightning, under any import name


def _framework_log(src: SourceFile, r: Reached, call: cst.Call) -> bool:
    """`self.log(...)` / `self.log_dict(...)` in a method of a Lightning-style module (a base named
    LightningModule that the class does not override `log` of): the framework's code runs, and breaks, in the
    compiled step."""
    func = call.func
    me = self_name(src, r.fn) if r.bound else None
    if me is None or not m.matches(func, m.Attribute(value=m.Name(me))):
        return False
    assert isinstance(func, cst.Attribute)
    if func.attr.value not in _FRAMEWORK_LOG:
        return False
    cls = src.enclosing(r.fn, cst.ClassDef)
    if not isinstance(cls, cst.ClassDef):
        return False
    if not any(src.code(b.value).rsplit(".", 1)[-1] in _FRAMEWORK_BASES for b in cls.bases):
        return False
    body = cls.body.body if isinstance(cls.body, cst.IndentedBlock) else []
    return not any(isinstance(s, cst.FunctionDef) and s.name.value == func.attr.value for s in body)


def _scalar_tensor(src: SourceFile, r: Reached, call: cst.Call, arg: cst.BaseExpression) -> Iterator[Hit]:
    """`torch.tensor(x)` of a Python number inside compiled code: dynamo guards on `x` all the same, so a new
    value recompiles. Which rule depends on where `x` comes from: an argument (TM202), the module (TM201), a
    global or closure variable (TM206)."""
    v = values(src)
    if isinstance(arg, (cst.Integer, cst.Float)) or v.is_tensor(arg) or v.maybe_tensor(arg):
        return
    what = f"`{short(src, call)}` makes a tensor of a Python number inside compiled code: dynamo still guards on it"
    if isinstance(arg, cst.Attribute) and isinstance(arg.value, cst.Name) and arg.value.value == self_name(src, r.fn):
        kinds = {v.kind(x) for x in self_attr_values(src, arg)}
        if kinds & NUMBERS:
            yield Hit("TM201", call, POSSIBLE, what, src.code(arg))
        return
    if not isinstance(arg, cst.Name) or v.kind(arg) not in NUMBERS | {Kind.UNKNOWN}:
        return
    refs = src.referents(arg)
    if any(isinstance(ref, cst.Param) and src.enclosing(ref, cst.FunctionDef) is r.fn for ref in refs):
        if r.entry is None:  # a parameter of the compiled function itself: the caller's number
            yield Hit("TM202", call, POSSIBLE, what, arg.value)
        return
    if refs and all(src.enclosing(ref, cst.FunctionDef) is not r.fn for ref in refs) and v.kind(arg) in NUMBERS:
        yield Hit("TM206", call, POSSIBLE, what, arg.value)


def _branch(src: SourceFile, stmt: cst.CSTNode, test: cst.BaseExpression, keyword: str) -> Iterator[Hit]:
    v = values(src)
    if any(is_compiling(src, c) for c in src.nodes_in(test, cst.Call)):
        return
    if v.is_tensor(test) or _flag_of_tensor(src, test) or _compares_a_row(src, test):
        yield Hit("TM103", stmt, LIKELY, f"`{keyword} {short(src, test)}:` branches on a tensor's value")
    elif not v.is_python(test) and _tensor_test(src, test):
        yield Hit("TM103", stmt, POSSIBLE, f"`{keyword} {short(src, test)}:` may branch on a tensor's value")


def _compares_a_row(src: SourceFile, test: cst.BaseExpression) -> bool:
    """`if idx == self.num_experts:` where `idx` walks the rows of a tensor (`for idx in mask.nonzero():`, then
    `idx = idx[0]`): a comparison of a tensor element, a jump on the data (GB0170 on 2.11, and on 2.13-2.15 where
    dynamo then skips the loop's frame)."""
    if not isinstance(test, cst.Comparison):
        return False
    operands = [test.left, *(c.comparator for c in test.comparisons)]
    return any(isinstance(x, cst.Name) and row_of_tensor(src, x) for x in operands)


def row_of_tensor(src: SourceFile, name: cst.Name, seen: frozenset[int] = frozenset()) -> bool:
    """A name bound by `for name in <tensor>:`, or to an element of such a name (`name = name[0]`), everywhere."""
    refs = [r for r in src.referents(name) if id(r) not in seen]
    if not refs:
        return bool(seen)
    seen = seen | {id(r) for r in refs}
    v = values(src)
    for ref in refs:
        loop = src.parents.get(ref)
        if isinstance(loop, cst.For) and loop.target is ref:
            if not (v.is_tensor(loop.iter) or _rows_of(src, loop.iter)):
                return False
            continue
        value = src.assigned_value(ref)
        if not (isinstance(value, cst.Subscript) and isinstance(value.value, cst.Name)):
            return False
        if not row_of_tensor(src, value.value, seen):
            return False
    return True


def _rows_of(src: SourceFile, expr: cst.BaseExpression) -> bool:
    """`mask.nonzero()`, or a name every assignment of which is an operator of data-dependent output."""
    if isinstance(expr, cst.Call):
        return dynamic_call(src, expr) is not None
    found = assigned_values(src, expr) if isinstance(expr, cst.Name) else []
    return bool(found) and all(isinstance(x, cst.Call) and dynamic_call(src, x) is not None for x in found)


def _flag_of_tensor(src: SourceFile, test: cst.BaseExpression) -> bool:
    """`if not skip or synced:` where `skip = u < p` with `u = torch.rand([])`: a name that holds a tensor
    comparison wherever the run's configuration assigns it (the assignment under no setting, or under one the
    default configuration turns on: LayerDrop's `if self.training and self.config.layerdrop > 0.0:`)."""
    if isinstance(test, cst.BooleanOperation):
        return _flag_of_tensor(src, test.left) or _flag_of_tensor(src, test.right)
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return _flag_of_tensor(src, test.expression)
    if not isinstance(test, cst.Name):
        return False
    v = values(src)
    for ref in src.referents(test):
        value = src.assigned_value(ref)
        if isinstance(value, cst.Comparison) and any(
            v.is_tensor(x) for x in (value.left, *(c.comparator for c in value.comparisons))
        ):
            if setting(src, ref) is None:
                return True
    return False


def _parameter(src: SourceFile, expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Name) and any(isinstance(r, cst.Param) for r in src.referents(expr))


def _sets_requires_grad(src: SourceFile, node: cst.Assign) -> bool:
    return any(
        m.matches(t.target, m.Attribute(attr=m.Name("requires_grad")))
        and values(src).maybe_tensor(cast(cst.Attribute, t.target).value)
        for t in node.targets
    ) and m.matches(node.value, m.Name("True"))


def _tensor_test(src: SourceFile, test: cst.BaseExpression) -> bool:
    """A test that compares or reduces something likely a tensor (`x.sum() > 0`, `(mask == 1).any()`)."""
    v = values(src)
    if isinstance(test, cst.BooleanOperation):
        return _tensor_test(src, test.left) or _tensor_test(src, test.right)
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return _tensor_test(src, test.expression)
    if isinstance(test, cst.Name):  # `skip = u < p` under one branch, `skip = False` under the other
        return any(v.is_tensor(value) for value in assigned_values(src, test))
    if isinstance(test, cst.Comparison):
        operands = [test.left, *(c.comparator for c in test.comparisons)]
        return any(v.kind(x) is Kind.UNKNOWN and _reduced(x) and v.maybe_tensor(x) for x in operands)
    return isinstance(test, cst.Call) and _reduced(test) and v.maybe_tensor(test)


def _reduced(expr: cst.BaseExpression) -> bool:
    """A tensor method that gives one value: `.sum()`, `.any()`, `.max()` ..."""
    return m.matches(
        expr,
        m.Call(
            func=m.Attribute(
                attr=m.Name("sum")
                | m.Name("mean")
                | m.Name("any")
                | m.Name("all")
                | m.Name("max")
                | m.Name("min")
                | m.Name("norm")
                | m.Name("abs")
            )
        ),
    )
