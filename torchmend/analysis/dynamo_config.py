"""What a file's `torch._dynamo.config` lines already set (`has_switch`, `has_member`), and which print and logger
calls dynamo reorders out of the graph once they are in `reorderable_logging_functions` (`reordered`): what the
compile-config and output fixes write against, and what lint reads (no break where a call is reordered).
Why each form is or is not reordered, release by release, is in codemods/fixes/gate_output.py's docstring."""

from __future__ import annotations

import libcst as cst
from libcst.helpers import get_full_name_for_node

from torchmend.analysis import is_print
from torchmend.analysis.loggers import is_logging_module, logging_call
from torchmend.analysis.source import SourceFile
from torchmend.analysis.torch_ops import LOG_METHODS, NOT_TENSOR_ATTRS

CONFIG = "_dynamo.config"


def _config_target(src: SourceFile, node: cst.BaseExpression) -> str | None:
    """`torch._dynamo.config.X` (any spelling of torch) -> `X`."""
    name = get_full_name_for_node(node) or ""
    for q in src.qualified_names(node) | {name}:
        head, _, option = q.rpartition(".")
        if head.endswith(CONFIG) and head.split(".")[0] in ("torch", src.torch_alias or "torch"):
            return option
    return None


def has_switch(src: SourceFile, option: str) -> bool:
    """The file already sets `torch._dynamo.config.<option> = ...`."""
    for assign in src.nodes_in(src.module, cst.Assign):
        for t in assign.targets:
            if _config_target(src, t.target) == option:
                return True
    return False


def has_member(src: SourceFile, option: str, member: str) -> bool:
    """The file already does `torch._dynamo.config.<option>.add(<member>)`."""
    for call in src.nodes_in(src.module, cst.Call):
        func = call.func
        if (
            isinstance(func, cst.Attribute)
            and func.attr.value == "add"
            and _config_target(src, func.value) == option
            and call.args
            and get_full_name_for_node(call.args[0].value) == member
        ):
            return True
    return False


REORDER = "reorderable_logging_functions"


_CONTAINERS = (cst.List, cst.Tuple, cst.Dict, cst.Set, cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)


# The first release each kind of call is reordered on (gate_output.py's docstring).
REORDERS = {"print": (2, 11), "logger": (2, 14)}


_NO_FORMAT = ("str", "repr", "len", "float", "int", "bool")


def _is_item(node: cst.BaseExpression) -> bool:
    return (
        isinstance(node, cst.Call)
        and not node.args
        and isinstance(node.func, cst.Attribute)
        and node.func.attr.value == "item"
    )


def _as_0dim(node: cst.Call) -> cst.Call:
    """`t.item()` -> `t.reshape(())`: the same one-element tensor as a 0-dim tensor, which formats as its item."""
    assert isinstance(node.func, cst.Attribute)
    return node.with_changes(
        func=node.func.with_changes(attr=cst.Name("reshape")),
        args=[cst.Arg(cst.Tuple([], lpar=[cst.LeftParen()], rpar=[cst.RightParen()]))],
    )


class _Items(cst.CSTTransformer):
    """`.item()` where dynamo may format the tensor itself: a formatted value of an f-string, or a whole
    argument (written `f"{t.reshape(())}"`, the text print gave the number). Any other `.item()` is left for the
    caller to refuse."""

    def __init__(self, top: tuple[cst.BaseExpression, ...]) -> None:
        self.top = top
        self.changed = 0

    def leave_FormattedStringExpression(
        self, original: cst.FormattedStringExpression, updated: cst.FormattedStringExpression
    ) -> cst.FormattedStringExpression:
        if _is_item(updated.expression):
            self.changed += 1
            assert isinstance(updated.expression, cst.Call)
            return updated.with_changes(expression=_as_0dim(updated.expression))
        return updated

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        if any(original is t for t in self.top) and _is_item(updated):
            self.changed += 1
            return cst.FormattedString([cst.FormattedStringExpression(_as_0dim(updated))], start='f"', end='"')
        return updated


def _unreorderable(src: SourceFile, value: cst.BaseExpression) -> bool:
    """An argument torch would not reorder (a container, `t.shape`, `str(t)`), or whose `.item()` is left inside
    it (its own break on 2.13, a crash on 2.14+)."""
    if isinstance(value, _CONTAINERS):
        return True
    whole = [value]
    if isinstance(value, cst.FormattedString):
        whole += [p.expression for p in value.parts if isinstance(p, cst.FormattedStringExpression)]
    if any(isinstance(v, cst.Attribute) and v.attr.value in NOT_TENSOR_ATTRS for v in whole):
        return True
    for node in _calls_under(value):
        name = get_full_name_for_node(node.func) or ""
        if name in _NO_FORMAT or _is_item(node) or name.endswith(".tolist"):
            return True
    return False


def _calls_under(node: cst.CSTNode) -> list[cst.Call]:
    found: list[cst.Call] = []

    class _Collect(cst.CSTVisitor):
        def visit_Call(self, call: cst.Call) -> None:
            found.append(call)

    node.visit(_Collect())
    return found


def reorder_plan(src: SourceFile, call: cst.Call) -> tuple[str, cst.Call | None] | None:
    """What to add to reorderable_logging_functions for this print (`print`) and the call rewritten so dynamo can
    format it (None: as it is), or None when torch would not reorder it."""
    if not is_print(src, call):
        return None
    if any(arg.keyword is not None or arg.star for arg in call.args):
        return None
    tops = tuple(arg.value for arg in call.args)
    items = _Items(tops)
    rewritten = call.visit(items)
    assert isinstance(rewritten, cst.Call)
    if any(_unreorderable(src, arg.value) for arg in rewritten.args):
        return None
    return "print", (rewritten if items.changed else None)


def reorder_member(src: SourceFile, call: cst.Call) -> str | None:
    plan = reorder_plan(src, call)
    return plan[0] if plan is not None and plan[1] is None else None


def reordered(src: SourceFile, call: cst.Call, site: SourceFile) -> bool:
    """The compiling file `site` already lets dynamo run this print or logger call after the graph, and the call's
    arguments are ones dynamo reorders (lint: no break there)."""
    if reorder_member(src, call) is not None:
        return has_member(site, REORDER, "print")
    member = logger_plan(src, call)
    version = src.torch_version
    return (
        member is not None
        and (version is None or version[:2] >= REORDERS["logger"])
        and has_member(site, REORDER, member)
    )


def logger_plan(src: SourceFile, call: cst.Call) -> str | None:
    """`log.info` when this is a call of a Logger method on a logger bound at module level of this file, with no
    keywords, a string or f-string message and constant `%`-arguments (2.14+ reorders that); else None."""
    func = call.func
    if not isinstance(func, cst.Attribute) or func.attr.value not in LOG_METHODS - {"log", "exception"}:
        return None
    if not isinstance(func.value, cst.Name) or not logging_call(src, call) or is_logging_module(src, func.value):
        return None
    refs = src.referents(func.value)
    if not refs or any(src.function_at(src.line_of(r)) is not None for r in refs):
        return None
    if not call.args or any(a.keyword is not None or a.star for a in call.args):
        return None
    msg, *rest = (a.value for a in call.args)
    if not isinstance(msg, (cst.SimpleString, cst.FormattedString, cst.ConcatenatedString)):
        return None
    if isinstance(msg, cst.FormattedString) and any(
        _unreorderable(src, p.expression) for p in msg.parts if isinstance(p, cst.FormattedStringExpression)
    ):
        return None
    if not all(isinstance(v, (cst.SimpleString, cst.Integer, cst.Float)) for v in rest):
        return None
    return f"{func.value.value}.{func.attr.value}"
