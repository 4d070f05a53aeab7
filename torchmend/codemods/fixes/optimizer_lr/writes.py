"""The edits of the writes to an optimizer's lr (found by analysis/optimizers.py) and its param groups."""

from __future__ import annotations

import libcst as cst

from torchmend.analysis import Kind, values
from torchmend.analysis import match as m
from torchmend.analysis.optimizers import IN_PLACE, LrWrite
from torchmend.analysis.source import SourceFile, simple_names


def in_place(src: SourceFile, write: LrWrite) -> cst.CSTNode:
    """`g["lr"] = v` → `g["lr"].fill_(v)`; `g["lr"] *= f` → `g["lr"].mul_(f)` (same for + - /)."""
    node = write.node
    assert write.sub is not None
    if isinstance(node, cst.Assign):
        method, value = "fill_", node.value
    else:
        assert isinstance(node, cst.AugAssign)
        method, value = IN_PLACE[type(node.operator)], node.value
    call = cst.Call(cst.Attribute(write.sub, cst.Name(method)), [cst.Arg(value)])
    return cst.Expr(call, semicolon=node.semicolon)


def uniform(src: SourceFile, write: LrWrite) -> bool:
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


def as_tensor(src: SourceFile, value: cst.BaseExpression) -> tuple[cst.BaseExpression, tuple]:
    """`torch.tensor(value)`, with a float inside: an int lr would make an int64 tensor that fill_ truncates."""
    tensor, imports = src.torch_expr("tensor")
    if isinstance(value, cst.Integer) and value.value.isdigit():
        inner: cst.BaseExpression = cst.Float(value.value + ".0")
    elif values(src).kind(value) is Kind.FLOAT:
        inner = value
    else:
        inner = cst.Call(cst.Name("float"), [cst.Arg(value)])
    return cst.Call(tensor, [cst.Arg(inner)]), imports


class Swap(cst.CSTTransformer):
    """Replaces nodes by identity in one pass (a chain of deep_replace calls would lose the identities)."""

    def __init__(self, swaps: dict[cst.CSTNode, cst.CSTNode]) -> None:
        super().__init__()
        self.swaps = swaps

    def on_leave(self, original_node, updated_node):
        return self.swaps.get(original_node, updated_node)


def add_lr(call: cst.Call, value: cst.BaseExpression) -> cst.Call:
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


class Groups:
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


def groups_of(src: SourceFile, params: cst.BaseExpression, depth: int = 0) -> Groups:
    code = src.code(params)
    if depth > 4:
        return Groups("unknown", source=code)
    if isinstance(params, cst.Name):
        refs = src.referents(params)
        value = src.assigned_value(refs[0]) if len(refs) == 1 else None
        if value is None or _mutated(src, refs[0]):
            return Groups("unknown", source=code)
        return groups_of(src, value, depth + 1)
    if isinstance(params, (cst.List, cst.Tuple)):
        values = [e.value for e in params.elements]
        if not any(isinstance(v, (cst.Dict, cst.Call, cst.Name)) for v in values):
            return Groups("single")
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
                return Groups("unknown", source=code)  # a group (or a tensor) torchmend cannot read
            lrs += found
            defaulted += not found
        return Groups("literal", params, lrs, defaulted)
    # model.parameters(), filter(..., model.parameters()), [p for p in model.parameters() if ...]
    if not src.nodes_in(params, (cst.Dict,)) and any(
        m.matches(c.func, m.Attribute(attr=m.Name("parameters") | m.Name("named_parameters")))
        for c in src.nodes_in(params, cst.Call)
    ):
        return Groups("single")
    return Groups("unknown", source=code)
