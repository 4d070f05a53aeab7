"""From a finding to the construction of the optimizer it is about, who may write its lr, the writes of its lr
(`group["lr"] = ...`) and its schedulers: the optimizer locator codemods (optimizer_lr) and lint share."""

from __future__ import annotations

import re
from typing import cast

import libcst as cst

from torchmend.analysis import callee, compile_target, self_attr_values
from torchmend.analysis import match as m
from torchmend.analysis.custom_optimizers import optimizer_classdef
from torchmend.analysis.optim_tables import SCHEDULER_PER_GROUP_ARGS
from torchmend.analysis.source import Context, SourceFile
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


def param_group_key(variable: str | None) -> str | None:
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


def optimizer_at(src: SourceFile, stmt: cst.BaseStatement, ctx: Context | None = None) -> tuple[cst.Call | None, str]:
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
    reasons = []  # why each candidate is not an optimizer: the first is said
    for expr in candidates:
        call, reason = construction_of(src, expr)
        if call is not None and optimizer_class(src, call, ctx):
            return call, ""
        if call is not None:
            reason = f"`{src.code(expr)}` is built by `{src.code(call.func)}(...)`, not a torch.optim class"
        reasons.append(reason)
    return None, reasons[0] if reasons else "no optimizer step or param_groups on that line"


def def_near(src: SourceFile, line: int, finding: Finding) -> cst.FunctionDef | None:
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


IN_PLACE = {cst.MultiplyAssign: "mul_", cst.AddAssign: "add_", cst.SubtractAssign: "sub_", cst.DivideAssign: "div_"}


def _is_lr_key(sub: cst.Subscript) -> bool:
    if len(sub.slice) != 1 or not isinstance(sub.slice[0].slice, cst.Index):
        return False
    key = sub.slice[0].slice.value
    return isinstance(key, cst.SimpleString) and key.evaluated_value == "lr"


class LrWrite:
    """A statement or call that writes an optimizer's lr (`group["lr"] = ...`, `group.update(lr=...)`)."""

    def __init__(self, node: cst.CSTNode, sub: cst.Subscript | None, owner: str, fixable: bool) -> None:
        self.node = node  # the small statement (Assign / AugAssign) or the call that writes
        self.sub = sub  # the `group["lr"]` target
        self.owner = owner
        self.fixable = fixable


def _unpacked_into(src: SourceFile, sub: cst.Subscript) -> bool:
    """True for a target inside an unpacking: `a, g["lr"] = ...`, `for g["lr"], b in ...`."""
    node: cst.CSTNode = sub
    for anc in src.ancestors(sub):
        if isinstance(anc, (cst.AssignTarget, cst.For, cst.CompFor)):
            return isinstance(node, (cst.Tuple, cst.List)) and getattr(anc, "target", None) is node
        if not isinstance(anc, (cst.Tuple, cst.List, cst.Element, cst.StarredElement)):
            return False
        node = anc
    return False


def lr_writes(src: SourceFile, ctor: cst.Call) -> list[LrWrite]:
    """The file's writes of an lr that may reach the optimizer `ctor` builds, each with `owner` (OURS when it is
    surely that optimizer's) and `fixable` (whether the codemod can rewrite it in place)."""
    found: list[LrWrite] = []
    for sub in src.nodes_in(src.module, cst.Subscript):
        assert isinstance(sub, cst.Subscript)
        parent = src.parents.get(sub)
        if isinstance(parent, cst.AssignTarget):
            assign = src.parents[parent]
            node, fixable = assign, isinstance(assign, cst.Assign) and len(assign.targets) == 1
        elif isinstance(parent, cst.AugAssign) and parent.target is sub:
            node, fixable = parent, type(parent.operator) in IN_PLACE
        elif isinstance(parent, (cst.AnnAssign, cst.Del)):
            node, fixable = parent, False
        elif _unpacked_into(src, sub):
            # Inside an unpacking, so within an Assign, For or CompFor: never None.
            node, fixable = cast(cst.CSTNode, src.enclosing(sub, (cst.Assign, cst.For, cst.CompFor)) or parent), False
        else:
            continue  # a read
        if isinstance(sub.value, cst.Attribute) and sub.value.attr.value == "param_groups":
            owner = _owner(src, sub.value, ctor)  # opt.param_groups[i] = {...}: replaces a whole group
            if owner != NONE:
                found.append(LrWrite(node, None, owner, False))
            continue
        if not _is_lr_key(sub):
            continue
        owner = _owner(src, sub.value, ctor)
        if owner != NONE:
            found.append(LrWrite(node, sub, owner, fixable))
    for call in src.nodes_in(src.module, cst.Call):
        assert isinstance(call, cst.Call)
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value in (
            "update",
            "setdefault",
            "__setitem__",
            "add_param_group",
            "load_state_dict",
        ):
            if func.attr.value == "load_state_dict":
                continue  # a checkpoint: reported in the note, not a write torchmend could rewrite
            mentions_lr = any(
                (a.keyword is not None and a.keyword.value == "lr")
                or any(
                    isinstance(s, cst.SimpleString) and s.evaluated_value == "lr"
                    for s in src.nodes_in(a.value, cst.SimpleString)
                )
                for a in call.args
            )
            if not mentions_lr:
                continue
            owner = (
                _owner(src, func.value, ctor)
                if func.attr.value != "add_param_group"
                else (OURS if construction_of(src, func.value)[0] is ctor else NONE)
            )
            if owner != NONE:
                found.append(LrWrite(call, None, owner, False))
    return found


def lr_schedulers(src: SourceFile, ctor: cst.Call) -> list[tuple[str, cst.Call]]:
    """The torch.optim.lr_scheduler constructions over the optimizer `ctor` builds: (class name, call)."""
    found = []
    for call in src.nodes_in(src.module, cst.Call):
        assert isinstance(call, cst.Call)
        names = [q for q in src.qualified_names(call.func) if q.startswith("torch.optim.lr_scheduler.")]
        if not names or not call.args:
            continue
        target = next(
            (a.value for a in call.args if a.keyword and a.keyword.value == "optimizer"),
            call.args[0].value if call.args[0].keyword is None else None,
        )
        if target is not None and construction_of(src, target)[0] is ctor:
            found.append((names[0].rsplit(".", 1)[1], call))
    return found


def per_group(src: SourceFile, cls: str, call: cst.Call) -> bool:
    """True when the scheduler gives the param groups different values (a list of lambdas, of max_lr...)."""
    for name, pos in SCHEDULER_PER_GROUP_ARGS.get(cls, ()):
        kw = [a.value for a in call.args if a.keyword is not None and a.keyword.value == name]
        positional = [a.value for a in call.args if a.keyword is None]
        value = kw[0] if kw else (positional[pos] if pos < len(positional) else None)
        if isinstance(value, cst.Name):
            refs = src.referents(value)
            value = (src.assigned_value(refs[0]) if len(refs) == 1 else None) or value
        if isinstance(value, (cst.List, cst.Tuple, cst.ListComp)):
            return True
        if isinstance(value, cst.Name) and not isinstance(next(iter(src.referents(value)), None), cst.FunctionDef):
            return True  # a name torchmend cannot see through: it may be a list
    return False
