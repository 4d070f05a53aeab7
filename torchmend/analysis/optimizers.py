"""From a finding to the construction of the optimizer it is about, and who may write its lr."""

from __future__ import annotations

import re

import libcst as cst
import libcst.matchers as m

from torchmend.codemods.analysis import callee, compile_target, self_attr_values
from torchmend.codemods.fixes.optimizer_lr.custom import optimizer_classdef
from torchmend.codemods.source import Context, SourceFile
from torchmend.model import Finding

OURS, OTHER, UNKNOWN, NONE = "ours", "other", "unknown", "none"


# --- names and bindings ------------------------------------------------------------------------------


def _loop_source(src: SourceFile, target: cst.CSTNode) -> cst.BaseExpression | None:
    """For a name bound by `for target in it` (or a comprehension, or unpacked from one): `it`."""
    for anc in src.ancestors(target):
        if isinstance(anc, (cst.For, cst.CompFor)):
            return anc.iter if target in set(src.nodes_in(anc.target, (cst.CSTNode,))) else None
        if not isinstance(anc, (cst.Tuple, cst.List, cst.Element, cst.StarredElement)):
            return None
    return None


def construction_of(src: SourceFile, expr: cst.BaseExpression) -> tuple[cst.Call | None, str]:
    """The `X(...)` call `expr` (a name or self.attribute) was built by, or why it cannot be found."""
    code = src.code(expr)
    if isinstance(expr, cst.Name):
        refs = src.referents(expr)
        if not refs:
            return None, f"`{code}` is not assigned in this file"
        if len(refs) > 1:
            return None, f"`{code}` is assigned more than once"
        ref = refs[0]
        if isinstance(ref, cst.Param):
            fn = src.enclosing(ref, cst.FunctionDef)
            where = f" of {fn.name.value}()" if isinstance(fn, cst.FunctionDef) else ""
            return None, f"`{code}` is a parameter{where}: the optimizer is built elsewhere"
        if isinstance(ref, (cst.Import, cst.ImportFrom)):
            return None, f"`{code}` is imported from another module"
        value = src.assigned_value(ref)
    elif isinstance(expr, cst.Attribute):
        values = self_attr_values(src, expr)
        if len(values) != 1:
            return None, (
                f"`{code}` is assigned more than once" if values else f"`{code}` is not assigned in this class"
            )
        value = values[0]
    else:
        return None, f"`{code}` is not a name torchmend can follow"
    if not isinstance(value, cst.Call):
        return None, f"`{code}` is not built by a call in this file"
    return value, ""


def optimizer_class(src: SourceFile, call: cst.Call, ctx: Context | None = None) -> str | None:
    """The optimizer's class name: a torch.optim class, or a torch.optim.Optimizer subclass of the project."""
    own = optimizer_classdef(src, call, ctx)
    if own is not None:
        return own[1].name.value
    for q in src.qualified_names(call.func):
        parts = q.split(".")
        if parts[:2] == ["torch", "optim"] and len(parts) in (3, 4) and parts[-1][:1].isupper():
            return parts[-1]
    return None


# --- which optimizer a group dict belongs to ---------------------------------------------------------


def _combine(owners: list[str]) -> str:
    kinds = set(owners) - {NONE}
    if not kinds:
        return NONE
    return kinds.pop() if len(kinds) == 1 else UNKNOWN


def _owner(src: SourceFile, expr: cst.CSTNode, ctor: cst.Call, depth: int = 0) -> str:
    """Whether `expr` is (an element of) our optimizer's param_groups, another's, maybe ours, or none."""
    if depth > 8:
        return UNKNOWN
    if isinstance(expr, cst.Attribute) and expr.attr.value == "param_groups":
        call, _ = construction_of(src, expr.value)
        if call is ctor:
            return OURS
        return OTHER if call is not None else UNKNOWN
    if isinstance(expr, cst.Subscript):
        return _owner(src, expr.value, ctor, depth + 1)
    if isinstance(expr, cst.Call):
        if isinstance(expr.func, cst.Attribute):  # opt.param_groups.copy(), ...
            return _owner(src, expr.func.value, ctor, depth + 1)
        return _combine([_owner(src, a.value, ctor, depth + 1) for a in expr.args])  # enumerate(), zip()
    if isinstance(expr, cst.Name):
        owners = []
        for ref in src.referents(expr):
            if isinstance(ref, cst.Param):
                owners.append(UNKNOWN)  # a function's argument: could be any optimizer's group
                continue
            source = src.assigned_value(ref) or _loop_source(src, ref)
            owners.append(_owner(src, source, ctor, depth + 1) if source is not None else NONE)
        return _combine(owners)
    return NONE


_GROUP_KEY = re.compile(r"param_groups\[\d+\]\[['\"](\w+)['\"]\]")


def _key(variable: str | None) -> str | None:
    """The param_groups key a guard names: `self.param_groups[0]['lr']` → 'lr'; also inside the wrappers
    torch puts around it (`___as_tensor(self.param_groups[0]['lr']).item()`, `(-1)*self.param_groups[0]['lr']`)."""
    found = _GROUP_KEY.search(variable or "")
    if found:
        return found.group(1)
    try:
        expr = cst.parse_expression(variable or "")
    except cst.ParserSyntaxError:
        return None
    if isinstance(expr, cst.Subscript) and len(expr.slice) == 1 and isinstance(expr.slice[0].slice, cst.Index):
        key = expr.slice[0].slice.value
        if isinstance(key, cst.SimpleString) and isinstance(key.evaluated_value, str):
            return key.evaluated_value
    return None


def _optimizer_at(src: SourceFile, stmt: cst.BaseStatement, ctx: Context | None = None) -> tuple[cst.Call | None, str]:
    """The construction of the optimizer the statement steps (`opt.step()`, `scaler.step(opt)`) or reads
    (`opt.param_groups`)."""
    candidates: list[cst.BaseExpression] = []
    for node in src.nodes_in(stmt, (cst.Call, cst.Attribute)):
        if (
            isinstance(node, cst.Call)
            and isinstance(node.func, cst.Attribute)
            and m.matches(node.func.attr, m.Name("step"))
        ):
            candidates.append(node.func.value)
            candidates += [a.value for a in node.args[:1] if a.keyword is None]
        elif isinstance(node, cst.Call) and isinstance(node.func, cst.Name):
            # step = torch.compile(opt.step); step()
            refs = src.referents(node.func)
            made = src.assigned_value(refs[0]) if len(refs) == 1 else None
            target = compile_target(src, made) if made is not None else None
            if isinstance(target, cst.Attribute) and m.matches(target.attr, m.Name("step")):
                candidates.append(target.value)
            else:
                # a compiled training step that calls opt.step() inside (decorated, or compiled under a name)
                found = callee(src, node.func)
                if found is not None and found.compiled_at is not None and found.src is src:
                    candidates += _stepped_in(src, found.fn)
        elif isinstance(node, cst.Attribute) and node.attr.value == "param_groups":
            candidates.append(node.value)
    if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)) and not candidates:
        # The finding names the compiled optimizer step itself (a method of a class of this file): its
        # constructions in this file are the candidates.
        return _constructions_of(src, stmt)
    if not candidates:
        # A line inside a compiled training step, e.g. where dynamo resumed after a graph break
        # (`loss.backward()`): the optimizer is the one that function steps.
        fn = src.enclosing(stmt, cst.FunctionDef)
        if isinstance(fn, cst.FunctionDef):
            candidates = _stepped_in(src, fn)
    why = "no optimizer step or param_groups on that line"
    for expr in candidates:
        call, reason = construction_of(src, expr)
        if call is not None and optimizer_class(src, call, ctx):
            return call, ""
        if call is not None:
            reason = f"`{src.code(expr)}` is built by `{src.code(call.func)}(...)`, not a torch.optim class"
        why = why if why != "no optimizer step or param_groups on that line" else reason
    return None, why


def _def_near(src: SourceFile, line: int, finding: Finding) -> cst.FunctionDef | None:
    """The compiled function's def when the line the trace gives is just above it (a blank line or a
    comment before its decorators, as Python 3.12 reports some decorated methods' first line)."""
    fn = finding.compiled_function
    if fn is None or fn.line != line:
        return None
    for node in src.nodes_in(src.module, cst.FunctionDef):
        assert isinstance(node, cst.FunctionDef)
        first = src.line_of(node.decorators[0]) if node.decorators else src.line_of(node)
        if node.name.value == fn.function and 0 <= first - line <= 2:
            return node
    return None


def _stepped_in(src: SourceFile, fn: cst.FunctionDef) -> list[cst.BaseExpression]:
    """The receivers of `X.step()` calls inside a function."""
    return [
        c.func.value
        for c in src.nodes_in(fn, cst.Call)
        if isinstance(c.func, cst.Attribute) and m.matches(c.func.attr, m.Name("step")) and not c.args
    ]


def _constructions_of(src: SourceFile, stmt: cst.FunctionDef | cst.ClassDef) -> tuple[cst.Call | None, str]:
    cls = stmt if isinstance(stmt, cst.ClassDef) else src.enclosing(stmt, cst.ClassDef)
    if not isinstance(cls, cst.ClassDef):
        return None, "the compiled function is not a method of an optimizer class"
    calls = [
        c
        for c in src.nodes_in(src.module, cst.Call)
        if isinstance(c, cst.Call) and (optimizer_classdef(src, c) or (None, None))[1] is cls
    ]
    if len(calls) != 1:
        return None, (
            f"{cls.name.value} is built {len(calls)} times in this file"
            if calls
            else f"{cls.name.value} is not built in this file"
        )
    return calls[0], ""
