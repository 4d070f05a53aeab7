"""Make an optimizer's learning rate a tensor and update it in place (TM203).

The optimizer is found from the user's `opt.step()` line (the finding itself is inside torch/optim), then
its construction `torch.optim.X(...)` in this file, then every write to its `group["lr"]` in this file:
the constructor and the writes change together, in one proposal, or not at all.
"""

from __future__ import annotations

import os
import re

import libcst as cst
import libcst.matchers as m

from torchmend.codemods.analysis import Kind, callee, values
from torchmend.codemods.base import Invalid, Valid, UNSAFE, Codemod, NoFix, Proposal, Result
from torchmend.codemods.fixes.optimizer_custom import default_lr, lr_hazards, method, optimizer_classdef
from torchmend.codemods.source import Context, SourceFile, simple_names
from torchmend.codemods.torch_ops import (
    FOREACH_NEEDS_CAPTURABLE,
    OPTIMIZER_DEFAULT_LR,
    SCHEDULER_PER_GROUP_ARGS,
)
from torchmend.model import Finding, Where

_IN_PLACE = {cst.MultiplyAssign: "mul_", cst.AddAssign: "add_", cst.SubtractAssign: "sub_",
             cst.DivideAssign: "div_"}
_ADVICE = ('build the optimizer with lr=torch.tensor(<lr>) and change it with group["lr"].fill_(<value>) '
           '(never `group["lr"] = <float>`)')

OURS, OTHER, UNKNOWN, NONE = "ours", "other", "unknown", "none"


# --- names and bindings ------------------------------------------------------------------------------


def _loop_source(src: SourceFile, target: cst.CSTNode) -> cst.BaseExpression | None:
    """For a name bound by `for target in it` (or a comprehension, or unpacked from one): `it`."""
    for anc in src.ancestors(target):
        if isinstance(anc, (cst.For, cst.CompFor)):
            return anc.iter if target in set(src.nodes_in(anc.target, cst.CSTNode)) else None
        if not isinstance(anc, (cst.Tuple, cst.List, cst.Element, cst.StarredElement)):
            return None
    return None


def _self_attr_values(src: SourceFile, attr: cst.Attribute) -> list[cst.BaseExpression]:
    """Values assigned to `self.<name>` in the class whose method reads `self.<name>`."""
    cls = src.enclosing(attr, cst.ClassDef)
    if cls is None or not isinstance(attr.value, cst.Name):
        return []
    values = []
    for target in src.nodes_in(cls, cst.Attribute):
        if (isinstance(target, cst.Attribute) and target.attr.value == attr.attr.value
                and m.matches(target.value, m.Name(attr.value.value))):
            value = src.assigned_value(target)
            if value is not None:
                values.append(value)
    return values


def _construction(src: SourceFile, expr: cst.BaseExpression) -> tuple[cst.Call | None, str]:
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
        values = _self_attr_values(src, expr)
        if len(values) != 1:
            return None, (f"`{code}` is assigned more than once" if values
                          else f"`{code}` is not assigned in this class")
        value = values[0]
    else:
        return None, f"`{code}` is not a name torchmend can follow"
    if not isinstance(value, cst.Call):
        return None, f"`{code}` is not built by a call in this file"
    return value, ""


def _optimizer_class(src: SourceFile, call: cst.Call, ctx: Context | None = None) -> str | None:
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
        call, _ = _construction(src, expr.value)
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


# --- the lr writes -----------------------------------------------------------------------------------

def _is_lr_key(sub: cst.Subscript) -> bool:
    if len(sub.slice) != 1 or not isinstance(sub.slice[0].slice, cst.Index):
        return False
    key = sub.slice[0].slice.value
    return isinstance(key, cst.SimpleString) and key.evaluated_value == "lr"


class _Write:
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


def _writes(src: SourceFile, ctor: cst.Call) -> list[_Write]:
    found: list[_Write] = []
    for sub in src.nodes_in(src.module, cst.Subscript):
        assert isinstance(sub, cst.Subscript)
        parent = src.parents.get(sub)
        if isinstance(parent, cst.AssignTarget):
            assign = src.parents[parent]
            node, fixable = assign, isinstance(assign, cst.Assign) and len(assign.targets) == 1
        elif isinstance(parent, cst.AugAssign) and parent.target is sub:
            node, fixable = parent, type(parent.operator) in _IN_PLACE
        elif isinstance(parent, (cst.AnnAssign, cst.Del)):
            node, fixable = parent, False
        elif _unpacked_into(src, sub):
            node, fixable = src.enclosing(sub, (cst.Assign, cst.For, cst.CompFor)) or parent, False
        else:
            continue  # a read
        if isinstance(sub.value, cst.Attribute) and sub.value.attr.value == "param_groups":
            owner = _owner(src, sub.value, ctor)  # opt.param_groups[i] = {...}: replaces a whole group
            if owner != NONE:
                found.append(_Write(node, None, owner, False))
            continue
        if not _is_lr_key(sub):
            continue
        owner = _owner(src, sub.value, ctor)
        if owner != NONE:
            found.append(_Write(node, sub, owner, fixable))
    for call in src.nodes_in(src.module, cst.Call):
        assert isinstance(call, cst.Call)
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value in ("update", "setdefault", "__setitem__",
                                                                    "add_param_group", "load_state_dict"):
            if func.attr.value == "load_state_dict":
                continue  # a checkpoint: reported in the note, not a write torchmend could rewrite
            mentions_lr = any((a.keyword is not None and a.keyword.value == "lr")
                              or any(isinstance(s, cst.SimpleString) and s.evaluated_value == "lr"
                                     for s in src.nodes_in(a.value, cst.SimpleString)) for a in call.args)
            if not mentions_lr:
                continue
            owner = _owner(src, func.value, ctor) if func.attr.value != "add_param_group" else (
                OURS if _construction(src, func.value)[0] is ctor else NONE)
            if owner != NONE:
                found.append(_Write(call, None, owner, False))
    return found


def _in_place(src: SourceFile, write: _Write) -> cst.CSTNode:
    """`g["lr"] = v` → `g["lr"].fill_(v)`; `g["lr"] *= f` → `g["lr"].mul_(f)` (same for + - /)."""
    node = write.node
    assert write.sub is not None
    if isinstance(node, cst.Assign):
        method, value = "fill_", node.value
    else:
        assert isinstance(node, cst.AugAssign)
        method, value = _IN_PLACE[type(node.operator)], node.value
    call = cst.Call(cst.Attribute(write.sub, cst.Name(method)), [cst.Arg(value)])
    return cst.Expr(call, semicolon=node.semicolon)


def _uniform(src: SourceFile, write: _Write) -> bool:
    """True for `for g in opt.param_groups: g["lr"] = v` with v the same for every group: writes that
    stay right when several groups share one lr tensor."""
    if not isinstance(write.node, cst.Assign) or write.sub is None or not isinstance(write.sub.value, cst.Name):
        return False
    name = write.sub.value
    refs = src.referents(name)
    if len(refs) != 1 or not isinstance(src.parents.get(refs[0]), cst.For):
        return False
    loop = src.parents[refs[0]]
    assert isinstance(loop, cst.For)
    line = src.parents.get(write.node)
    if not (isinstance(loop.iter, cst.Attribute) and loop.iter.attr.value == "param_groups"
            and line is not None and src.parents.get(line) is loop.body):
        return False
    return name.value not in simple_names(write.node.value)


# --- the constructor ---------------------------------------------------------------------------------

def _as_tensor(src: SourceFile, value: cst.BaseExpression) -> tuple[cst.BaseExpression, tuple]:
    """`torch.tensor(value)`, with a float inside: an int lr would make an int64 tensor that fill_ truncates."""
    tensor, imports = src.torch_expr("tensor")
    if isinstance(value, cst.Integer) and value.value.isdigit():
        inner: cst.BaseExpression = cst.Float(value.value + ".0")
    elif values(src).kind(value) is Kind.FLOAT:
        inner = value
    else:
        inner = cst.Call(cst.Name("float"), [cst.Arg(value)])
    return cst.Call(tensor, [cst.Arg(inner)]), imports


class _Swap(cst.CSTTransformer):
    """Replaces nodes by identity in one pass (a chain of deep_replace calls would lose the identities)."""

    def __init__(self, swaps: dict[cst.CSTNode, cst.CSTNode]) -> None:
        super().__init__()
        self.swaps = swaps

    def on_leave(self, original_node, updated_node):  # type: ignore[no-untyped-def]
        return self.swaps.get(original_node, updated_node)


def _add_lr(call: cst.Call, value: cst.BaseExpression) -> cst.Call:
    """Insert `lr=value` right after the first argument (params), in the call's own comma style."""
    args = list(call.args)
    first = args[0]
    new = cst.Arg(value, keyword=cst.Name("lr"),
                  equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")))
    if len(args) > 1:
        return call.with_changes(args=[first, new.with_changes(comma=first.comma), *args[1:]])
    if isinstance(first.comma, cst.Comma):  # `X(\n    params,\n)`: the new line looks like the first one
        sep = cst.Comma(whitespace_after=call.whitespace_before_args)
        return call.with_changes(args=[first.with_changes(comma=sep), new.with_changes(comma=first.comma)])
    sep = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    return call.with_changes(args=[first.with_changes(comma=sep), new])


class _Groups:
    """What the optimizer's params argument says about its param groups.

    kind: 'single' (parameters, one group), 'literal' (a list of group dicts this file spells out, `literal`,
    possibly bound to a name first) or 'unknown' (built where torchmend cannot see: groups may carry their
    own float "lr"). `lrs`: the "lr" entries of the literal's dicts; `defaulted`: its groups without one,
    which all get the one default lr object.
    """

    def __init__(self, kind: str, literal: cst.List | cst.Tuple | None = None,
                 lrs: list[cst.BaseExpression] | None = None, defaulted: int = 0, source: str = "") -> None:
        self.kind = kind
        self.literal = literal
        self.lrs = lrs or []
        self.defaulted = defaulted
        self.source = source

    @property
    def shared(self) -> bool:
        """Whether several groups may hold the same default lr tensor."""
        return self.kind == "unknown" or (self.kind == "literal" and self.defaulted > 1)


def _mutated(src: SourceFile, ref: cst.CSTNode) -> bool:
    """True when the list bound at `ref` is changed after it is built (`groups.append(...)`, `groups += ...`)."""
    scope = src.scopes.get(ref)
    if scope is None or not isinstance(ref, cst.Name):
        return True
    for access in scope.accesses[ref.value]:
        parent = src.parents.get(access.node)
        if isinstance(parent, cst.Attribute) or (isinstance(parent, cst.AugAssign) and parent.target is access.node):
            return True
        if isinstance(parent, cst.Subscript) and isinstance(src.parents.get(parent), (cst.AssignTarget, cst.Del)):
            return True
    return False


def _groups(src: SourceFile, params: cst.BaseExpression, depth: int = 0) -> _Groups:
    code = src.code(params)
    if depth > 4:
        return _Groups("unknown", source=code)
    if isinstance(params, cst.Name):
        refs = src.referents(params)
        value = src.assigned_value(refs[0]) if len(refs) == 1 else None
        if value is None or _mutated(src, refs[0]):
            return _Groups("unknown", source=code)
        return _groups(src, value, depth + 1)
    if isinstance(params, (cst.List, cst.Tuple)):
        values = [e.value for e in params.elements]
        if not any(isinstance(v, (cst.Dict, cst.Call, cst.Name)) for v in values):
            return _Groups("single")
        lrs: list[cst.BaseExpression] = []
        defaulted = 0
        for v in values:
            if isinstance(v, cst.Dict) and not any(isinstance(e, cst.StarredDictElement) for e in v.elements):
                found = [e.value for e in v.elements if isinstance(e.key, cst.SimpleString)  # type: ignore[union-attr]
                         and e.key.evaluated_value == "lr"]
            elif (isinstance(v, cst.Call) and src.is_qualified(v.func, "builtins.dict")
                  and not any(a.star for a in v.args)):
                found = [a.value for a in v.args if a.keyword is not None and a.keyword.value == "lr"]
            else:
                return _Groups("unknown", source=code)  # a group (or a tensor) torchmend cannot read
            lrs += found
            defaulted += not found
        return _Groups("literal", params, lrs, defaulted)
    # model.parameters(), filter(..., model.parameters()), [p for p in model.parameters() if ...]
    if not src.nodes_in(params, (cst.Dict,)) and any(
            m.matches(c.func, m.Attribute(attr=m.Name("parameters") | m.Name("named_parameters")))
            for c in src.nodes_in(params, cst.Call)):  # type: ignore[attr-defined]
        return _Groups("single")
    return _Groups("unknown", source=code)


def _schedulers(src: SourceFile, ctor: cst.Call) -> list[tuple[str, cst.Call]]:
    found = []
    for call in src.nodes_in(src.module, cst.Call):
        assert isinstance(call, cst.Call)
        names = [q for q in src.qualified_names(call.func) if q.startswith("torch.optim.lr_scheduler.")]
        if not names or not call.args:
            continue
        target = next((a.value for a in call.args if a.keyword and a.keyword.value == "optimizer"),
                      call.args[0].value if call.args[0].keyword is None else None)
        if target is not None and _construction(src, target)[0] is ctor:
            found.append((names[0].rsplit(".", 1)[1], call))
    return found


def _per_group(src: SourceFile, cls: str, call: cst.Call) -> bool:
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


def _optimizer_at(src: SourceFile, stmt: cst.BaseStatement,
                  ctx: Context | None = None) -> tuple[cst.Call | None, str]:
    """The construction of the optimizer the statement steps (`opt.step()`, `scaler.step(opt)`) or reads
    (`opt.param_groups`)."""
    candidates: list[cst.BaseExpression] = []
    for node in src.nodes_in(stmt, (cst.Call, cst.Attribute)):
        if isinstance(node, cst.Call) and m.matches(node.func, m.Attribute(attr=m.Name("step"))):
            candidates.append(node.func.value)  # type: ignore[attr-defined]
            candidates += [a.value for a in node.args[:1] if a.keyword is None]
        elif isinstance(node, cst.Call) and isinstance(node.func, cst.Name):
            # step = torch.compile(opt.step); step()
            refs = src.referents(node.func)
            made = src.assigned_value(refs[0]) if len(refs) == 1 else None
            if (isinstance(made, cst.Call) and src.is_qualified(made.func, "torch.compile") and made.args
                    and m.matches(made.args[0].value, m.Attribute(attr=m.Name("step")))):
                candidates.append(made.args[0].value.value)  # type: ignore[attr-defined]
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
        call, reason = _construction(src, expr)
        if call is not None and _optimizer_class(src, call, ctx):
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
    return [c.func.value for c in src.nodes_in(fn, cst.Call)  # type: ignore[attr-defined]
            if m.matches(c.func, m.Attribute(attr=m.Name("step"))) and not c.args]


def _constructions_of(src: SourceFile, stmt: cst.FunctionDef | cst.ClassDef) -> tuple[cst.Call | None, str]:
    cls = stmt if isinstance(stmt, cst.ClassDef) else src.enclosing(stmt, cst.ClassDef)
    if not isinstance(cls, cst.ClassDef):
        return None, "the compiled function is not a method of an optimizer class"
    calls = [c for c in src.nodes_in(src.module, cst.Call)
             if isinstance(c, cst.Call) and (optimizer_classdef(src, c) or (None, None))[1] is cls]
    if len(calls) != 1:
        return None, (f"{cls.name.value} is built {len(calls)} times in this file" if calls
                      else f"{cls.name.value} is not built in this file")
    return calls[0], ""


class TensorLearningRate(Codemod):
    """Make the optimizer's learning rate a tensor, and update it in place.

    What it does:
        TM203: a compiled optimizer step (or a compiled training step that calls `opt.step()`) that recompiles
        because the learning rate is a Python float that a schedule changes.

        The optimizer is found from your `opt.step()` line (or `scaler.step(opt)`, or `step =
        torch.compile(opt.step)`, or a compiled training step that calls `opt.step()`), through its name or
        `self.<name>`, to its `torch.optim.X(...)` call in the same file — or to the construction of an optimizer
        class the project defines itself (a `torch.optim.Optimizer` subclass with its own `step`, such as a Lion- or
        Muon-style optimizer, in the same file or imported from another file of the project; also when the finding
        names that `step`). The lr argument (keyword or positional; the class's default when left out), the "lr" of
        param-group dicts the file spells out, and every write to that optimizer's `group["lr"]` in the file change
        together, in one proposal. torch.optim.lr_scheduler schedulers need no change: in torch 2.13 they write a
        tensor lr in place (`_update_param_group_val` calls fill_). Not fixed, with the reason: an optimizer built
        elsewhere (a parameter, a factory, another module) or not among the torch.optim classes checked with a
        tensor lr (LBFGS, SparseAdam, Adafactor, Muon, other libraries); an optimizer of your own whose methods need
        the lr as a Python number (`float(lr)`, `if lr ...`, `lr > 0`, `range`, `math.*`: the line is named);
        `*args`, or `**kwargs` without an explicit lr; Adam/AdamW with foreach=True but not capturable=True (they
        raise); lr writes it cannot rewrite or attribute (`group.update(lr=...)`, `**=`, a helper that takes the
        group or optimizer as a parameter); lr writes when the groups come from code it cannot read (a group's own
        float "lr" would stay a float); per-group writes or per-group schedules when several groups would share the
        one default lr tensor (torch.optim puts the same default object in every group).

    Why is this bad:
        torch.compile guards on a float hyperparameter's value (`param_groups[0]['lr'] == 0.001`), so each
        new value from a warmup or decay recompiles the step. A 0-dim tensor lr is a graph input instead:
        changing it in place (`fill_`) needs no recompile.

    Example:
        opt = torch.optim.AdamW(model.parameters(), lr=BASE_LR)
        for step in range(steps):
            for group in opt.param_groups:
                group["lr"] = BASE_LR * min(1.0, (step + 1) / WARMUP)
                group["lr"] *= decay

    Fix:
        opt = torch.optim.AdamW(model.parameters(), lr=torch.tensor(BASE_LR))
        for step in range(steps):
            for group in opt.param_groups:
                group["lr"].fill_(BASE_LR * min(1.0, (step + 1) / WARMUP))
                group["lr"].mul_(decay)

    Fix safety:
        Unsafe. The lr becomes a float32 tensor: the compiled float_lr_warmup fixture's final weights
        differ by at most 1.5e-8 (relative 1e-7) from the float run. Reading `group["lr"]` now gives that
        tensor, which changes when the lr does: use `float(group["lr"])` to log or keep a value. A
        checkpoint saved with a float lr restores a float through `load_state_dict`, on which `fill_`
        fails; another library's scheduler that assigns `group["lr"] = value` puts a float back.
    """

    rules = ("TM203",)
    causes = ("TM203",)
    name = "tensor-learning-rate"
    INVALID = (
        # the fixture's pattern: a compiled step, a hand-written warmup writing every group
        Invalid(
            """
            import torch
            BASE = 1e-2
            opt = torch.optim.AdamW(model.parameters(), lr=BASE)

            @torch.compile
            def step():
                opt.step()  # tm: TM203 where=library variable=self.param_groups[0]['lr']

            for i in range(10):
                for group in opt.param_groups:
                    group['lr'] = BASE * i / 10
                step()
            """,
            """
            import torch
            BASE = 1e-2
            opt = torch.optim.AdamW(model.parameters(), lr=torch.tensor(BASE))

            @torch.compile
            def step():
                opt.step()  # tm: TM203 where=library variable=self.param_groups[0]['lr']

            for i in range(10):
                for group in opt.param_groups:
                    group['lr'].fill_(BASE * i / 10)
                step()
            """,
        ),
        # `from torch.optim import SGD`, positional lr, an indexed write and *=, `import torch as t` reused
        Invalid(
            """
            import torch as t
            from torch.optim import SGD

            def train(model):
                opt = SGD(model.parameters(), 0.1)
                for epoch in range(3):
                    opt.param_groups[0]['lr'] = 0.1 / (epoch + 1)
                    opt.step()  # tm: TM203 where=library variable=self.param_groups[0]['lr']
                    opt.param_groups[0]['lr'] *= 0.5
            """,
            """
            import torch as t
            from torch.optim import SGD

            def train(model):
                opt = SGD(model.parameters(), t.tensor(0.1))
                for epoch in range(3):
                    opt.param_groups[0]['lr'].fill_(0.1 / (epoch + 1))
                    opt.step()  # tm: TM203 where=library variable=self.param_groups[0]['lr']
                    opt.param_groups[0]['lr'].mul_(0.5)
            """,
        ),
        # lr left at its default, an lr_scheduler (updates a tensor lr in place), no torch import yet
        Invalid(
            """
            from torch import optim

            opt = optim.Adam(
                net.parameters(),
            )
            sched = optim.lr_scheduler.StepLR(opt, 10)
            opt.step()  # tm: TM203 where=library variable=self.param_groups[0]['lr']
            """,
            """
            from torch import optim
            import torch

            opt = optim.Adam(
                net.parameters(),
                lr=torch.tensor(1e-3),
            )
            sched = optim.lr_scheduler.StepLR(opt, 10)
            opt.step()  # tm: TM203 where=library variable=self.param_groups[0]['lr']
            """,
        ),
        # a trainer class: self.opt, GradScaler.step(self.opt), integer lr made a float
        Invalid(
            """
            import torch

            class Trainer:
                def __init__(self, model):
                    self.opt = torch.optim.RMSprop(model.parameters(), lr=1, momentum=0.9)
                    self.scaler = torch.amp.GradScaler()

                def step(self, lr):
                    self.opt.param_groups[0]['lr'] = lr
                    self.scaler.step(self.opt)  # tm: TM203 where=library variable=self.param_groups[0]['lr']
            """,
            """
            import torch

            class Trainer:
                def __init__(self, model):
                    self.opt = torch.optim.RMSprop(model.parameters(), lr=torch.tensor(1.0), momentum=0.9)
                    self.scaler = torch.amp.GradScaler()

                def step(self, lr):
                    self.opt.param_groups[0]['lr'].fill_(lr)
                    self.scaler.step(self.opt)  # tm: TM203 where=library variable=self.param_groups[0]['lr']
            """,
        ),
    )
    VALID = (
        # already a tensor, written in place
        Valid(
            """
            import torch
            opt = torch.optim.Adam(m.parameters(), lr=torch.tensor(0.01))
            for g in opt.param_groups:
                g['lr'].fill_(0.02)
            opt.step()  # tm: TM203 where=library variable=self.param_groups[0]['lr']
            """,
        ),
        # the optimizer comes from elsewhere
        Valid(
            """
            def train(opt):
                opt.step()  # tm: TM203 where=library variable=self.param_groups[0]['lr']
            """,
        ),
        # Adam with foreach=True raises for a tensor lr unless capturable=True
        Valid(
            """
            import torch
            opt = torch.optim.Adam(m.parameters(), lr=0.01, foreach=True)
            opt.step()  # tm: TM203 where=library variable=self.param_groups[0]['lr']
            """,
        ),
        # a write through a helper's parameter: it may be this optimizer's group, and fill_ would be needed there
        Valid(
            """
            import torch
            opt = torch.optim.SGD(m.parameters(), lr=0.01)

            def set_lr(o, v):
                for g in o.param_groups:
                    g['lr'] = v

            set_lr(opt, 0.1)
            opt.step()  # tm: TM203 where=library variable=self.param_groups[0]['lr']
            """,
        ),
        # several groups would share the default lr tensor, and only group 0 is written
        Valid(
            """
            import torch
            opt = torch.optim.SGD([{'params': a}, {'params': b}], lr=0.01)
            opt.param_groups[0]['lr'] = 0.1
            opt.step()  # tm: TM203 where=library variable=self.param_groups[0]['lr']
            """,
        ),
        # a hyperparameter other than lr
        Valid(
            """
            import torch
            opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)
            opt.step()  # tm: TM203 where=library variable=self.param_groups[0]['momentum']
            """,
        ),
    )

    def propose(self, finding: Finding, ctx: Context) -> Result:
        key = _key(finding.variable)
        if key != "lr":
            return NoFix(finding, f"only the learning rate is rewritten; the guard is on {finding.variable!r}",
                         f"keep {key or 'that value'} constant between steps; Adam and AdamW also accept Tensor "
                         "betas (with capturable=True or fused=True)")
        # Where to start looking: the finding's own line when it is yours (a compiled step of yours, or the
        # optimizer's own step method), then the line that called the compiled function.
        places = [(finding.path, finding.line)] if finding.where == Where.PROJECT else []
        places += [(loc.path, loc.line) for loc in (finding.user_frame, finding.call_site) if loc is not None]
        if not places:
            return NoFix(finding, "no line of yours reaches this optimizer step", _ADVICE)
        ctor, src, why = None, None, ""
        for path, line in places:
            if not ctx.in_project(path):
                continue
            src = ctx.file(path)
            stmt = src.statement_at(line) or _def_near(src, line, finding)
            if stmt is None:
                why = why or f"no statement at line {line}"
                continue
            ctor, reason = _optimizer_at(src, stmt, ctx)
            if ctor is not None:
                break
            why = why or reason
        if ctor is None or src is None:
            return NoFix(finding, f"cannot find where the optimizer is built: {why}", _ADVICE)
        return self._rewrite(finding, src, ctor, ctx)

    def _rewrite(self, finding: Finding, src: SourceFile, ctor: cst.Call, ctx: Context) -> Result:
        cls = _optimizer_class(src, ctor, ctx) or ""
        at = f"line {src.line_of(ctor)}"
        found = optimizer_classdef(src, ctor, ctx)
        own = found[1] if found is not None else None
        if found is not None and own is not None:
            own_src = found[0]
            where = "" if own_src is src else f" ({os.path.relpath(own_src.path, ctx.project_root)})"
            hazards = lr_hazards(own_src, own)
            if hazards:
                line, why = hazards[0]
                return NoFix(finding, f"{cls}'s own code needs a float lr: line {line}{where}: {why}",
                             "make that line work with a 0-dim tensor lr (tensor ops, no float()/if on it), "
                             "then rerun torchmend; or keep the lr constant while compiled")
            if method(own, "step") is None:
                return NoFix(finding, f"{cls} at {at} has no step method of its own", _ADVICE)
        elif cls not in OPTIMIZER_DEFAULT_LR:
            return NoFix(finding, f"torch.optim.{cls} at {at} is not among the optimizers checked with a tensor "
                         "lr", _ADVICE)
        keywords = {a.keyword.value: a for a in ctor.args if a.keyword is not None}
        double_star = any(a.star == "**" for a in ctor.args)
        if any(a.star == "*" for a in ctor.args) or (double_star and "lr" not in keywords):
            return NoFix(finding, f"the optimizer call at {at} passes *args or **kwargs (and no lr=): the lr may "
                         "come from there", _ADVICE)
        positional = [a for a in ctor.args if a.keyword is None]
        if not positional and "params" not in keywords:
            return NoFix(finding, f"the optimizer call at {at} has no params argument", _ADVICE)
        if cls in FOREACH_NEEDS_CAPTURABLE and "foreach" in keywords and not m.matches(
                keywords["foreach"].value, m.Name("False") | m.Name("None")) and not (
                "capturable" in keywords and m.matches(keywords["capturable"].value, m.Name("True"))):
            return NoFix(finding, f"{cls} at {at} sets foreach={src.code(keywords['foreach'].value)}: a tensor lr "
                         "then needs capturable=True (parameters on cuda, xpu, hpu or xla)", "drop foreach=True, or "
                         "add capturable=True if the parameters are on such a device, then rerun torchmend")

        replace: dict[cst.CSTNode, cst.CSTNode] = {}
        imports: tuple = ()
        # The constructor: lr argument (or the default), then the "lr" of literal param-group dicts.
        lr_arg = keywords.get("lr") or (positional[1] if len(positional) > 1 else None)
        params = keywords["params"].value if "params" in keywords else positional[0].value
        groups = _groups(src, params)
        group_swaps: dict[cst.CSTNode, cst.CSTNode] = {}
        for value in groups.lrs:
            if not values(src).is_tensor(value):
                group_swaps[value], imports = _as_tensor(src, value)
        ctor_swaps: dict[cst.CSTNode, cst.CSTNode] = {}
        if lr_arg is not None and not values(src).is_tensor(lr_arg.value):
            ctor_swaps[lr_arg.value], imports = _as_tensor(src, lr_arg.value)
        if groups.literal is not None and ctor in set(src.ancestors(groups.literal)):
            ctor_swaps.update(group_swaps)  # the groups are spelled out in the call: one rewrite of the call
        elif group_swaps:  # the groups list is built earlier, under a name
            assert groups.literal is not None
            replace[groups.literal] = groups.literal.visit(_Swap(group_swaps))
        # One pass: node identities are lost once a tree is rebuilt.
        new_ctor = ctor.visit(_Swap(ctor_swaps)) if ctor_swaps else ctor
        if lr_arg is None:
            default = cst.Float(OPTIMIZER_DEFAULT_LR[cls]) if own is None else default_lr(own)
            if default is None:
                return NoFix(finding, f"the optimizer call at {at} passes no lr and {cls} has no default", _ADVICE)
            tensor, imports = _as_tensor(src, default)
            new_ctor = _add_lr(new_ctor, tensor)  # type: ignore[arg-type]
        if new_ctor is not ctor:
            replace[ctor] = new_ctor

        # The writes: all of this optimizer's become in place; any other that may be its refuses the fix.
        writes = _writes(src, ctor)
        for w in writes:
            code = src.code(w.node).strip()
            if w.owner == OURS and not w.fixable:
                return NoFix(finding, f"line {src.line_of(w.node)} writes the lr in a way torchmend cannot "
                             f"rewrite: `{code}`", _ADVICE)
            if w.owner == UNKNOWN:
                return NoFix(finding, f"line {src.line_of(w.node)} writes an lr torchmend cannot trace to an "
                             f"optimizer (`{code}`); it may be this one, and would put a float back", _ADVICE)
        ours = [w for w in writes if w.owner == OURS]
        own_lr = 'give each group its own "lr": torch.tensor(...) in its dict, then rerun torchmend'
        if groups.kind == "unknown" and ours:
            return NoFix(finding, f"the param groups come from `{groups.source}`, which torchmend cannot read: a "
                         'group with its own float "lr" would stay a float, and fill_ would fail on it', own_lr)
        if groups.shared:
            for w in ours:
                if not _uniform(src, w):
                    return NoFix(finding, "the param groups share one lr tensor (torch.optim gives every group "
                                 f"the same default object), and line {src.line_of(w.node)} writes groups "
                                 "differently", own_lr)
            for sched_cls, sched in _schedulers(src, ctor):
                if _per_group(src, sched_cls, sched):
                    return NoFix(finding, f"the param groups may share one lr tensor, and the {sched_cls} at line "
                                 f"{src.line_of(sched)} may give them different values", own_lr)
        for w in ours:
            replace[w.node] = _in_place(src, w)
        if not replace:
            return NoFix(finding, "the lr is already a tensor, written in place", skipped=True)

        notes = ['group["lr"] is now a float32 tensor: use float(group["lr"]) to log it or keep its value']
        if any(isinstance(c, cst.Call) and m.matches(c.func, m.Attribute(attr=m.Name("load_state_dict")))
               and _construction(src, c.func.value)[0] is ctor  # type: ignore[attr-defined]
               for c in src.nodes_in(src.module, cst.Call)):
            notes.append("a checkpoint saved with a float lr restores a float (fill_ then fails): after "
                         'load_state_dict, set group["lr"] = torch.tensor(float(group["lr"])) for each group')
        if cls in FOREACH_NEEDS_CAPTURABLE and double_star:
            notes.append(f"if the **kwargs of the {cls} call set foreach=True, it raises for a tensor lr unless "
                         "capturable=True")
        if cls in FOREACH_NEEDS_CAPTURABLE:
            notes.append(f"eager {cls} steps with a tensor lr use the for-loop implementation unless "
                         "capturable=True")
        notes.append("lr writes in other files are not checked")
        rewrote = "the lr argument" if ctor in replace else "the lr"
        return Proposal((finding,), finding.rule, src.path, replace=replace, imports=imports, safety=UNSAFE,
                        why=f"make {rewrote} of the {cls} at line {src.line_of(ctor)} a tensor and update it in "
                            "place, so a new value does not recompile the optimizer step",
                        note="; ".join(notes),
                        alternative="keep the lr constant inside the compiled region, or compile only the model "
                                    "and step the optimizer eagerly")
