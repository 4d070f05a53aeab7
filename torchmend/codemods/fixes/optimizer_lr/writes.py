"""The writes to an optimizer's lr (`group["lr"] = ...`), its param groups and schedulers, and the edits."""

from __future__ import annotations

from typing import cast

import libcst as cst
import libcst.matchers as m

from torchmend.codemods.analysis import Kind, values
from torchmend.codemods.fixes.optimizer_lr.locate import NONE, OURS, _owner, construction_of
from torchmend.codemods.source import SourceFile, simple_names
from torchmend.codemods.torch_ops import SCHEDULER_PER_GROUP_ARGS

_IN_PLACE = {cst.MultiplyAssign: "mul_", cst.AddAssign: "add_", cst.SubtractAssign: "sub_", cst.DivideAssign: "div_"}


# --- the lr writes -----------------------------------------------------------------------------------


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
            node, fixable = parent, type(parent.operator) in _IN_PLACE
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


def _in_place(src: SourceFile, write: LrWrite) -> cst.CSTNode:
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


def _uniform(src: SourceFile, write: LrWrite) -> bool:
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
    if not (
        isinstance(loop.iter, cst.Attribute)
        and loop.iter.attr.value == "param_groups"
        and line is not None
        and src.parents.get(line) is loop.body
    ):
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

    def on_leave(self, original_node, updated_node):
        return self.swaps.get(original_node, updated_node)


def _add_lr(call: cst.Call, value: cst.BaseExpression) -> cst.Call:
    """Insert `lr=value` right after the first argument (params), in the call's own comma style."""
    args = list(call.args)
    first = args[0]
    new = cst.Arg(
        value, keyword=cst.Name("lr"), equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace(""))
    )
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

    def __init__(
        self,
        kind: str,
        literal: cst.List | cst.Tuple | None = None,
        lrs: list[cst.BaseExpression] | None = None,
        defaulted: int = 0,
        source: str = "",
    ) -> None:
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
                found = [
                    e.value
                    for e in v.elements
                    if isinstance(e, cst.DictElement)  # none is starred (above)
                    and isinstance(e.key, cst.SimpleString)
                    and e.key.evaluated_value == "lr"
                ]
            elif (
                isinstance(v, cst.Call)
                and src.is_qualified(v.func, "builtins.dict")
                and not any(a.star for a in v.args)
            ):
                found = [a.value for a in v.args if a.keyword is not None and a.keyword.value == "lr"]
            else:
                return _Groups("unknown", source=code)  # a group (or a tensor) torchmend cannot read
            lrs += found
            defaulted += not found
        return _Groups("literal", params, lrs, defaulted)
    # model.parameters(), filter(..., model.parameters()), [p for p in model.parameters() if ...]
    if not src.nodes_in(params, (cst.Dict,)) and any(
        m.matches(c.func, m.Attribute(attr=m.Name("parameters") | m.Name("named_parameters")))
        for c in src.nodes_in(params, cst.Call)
    ):
        return _Groups("single")
    return _Groups("unknown", source=code)


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
