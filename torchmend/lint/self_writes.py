"""What forward writes on its own module: a number attribute changed (TM201), a tensor cached and rebuilt (TM208),
a setting (a string, a flag, None) written once under the `if` that reads it (TM209)."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from torchmend.analysis import Kind, self_attr_values, values
from torchmend.analysis import match as m
from torchmend.analysis.source import SourceFile
from torchmend.lint.hits import LIKELY, POSSIBLE, Hit, short
from torchmend.lint.regions import Reached


def self_write(src: SourceFile, r: Reached, node: cst.AugAssign | cst.Assign, me: str) -> Iterator[Hit]:
    """TM201 (a number attribute of the module changed in forward) and TM208 (a tensor cached on it)."""
    targets = [node.target] if isinstance(node, cst.AugAssign) else [t.target for t in node.targets]
    for target in targets:
        if not m.matches(target, m.Attribute(value=m.Name(me))):
            continue
        assert isinstance(target, cst.Attribute)
        v = values(src)
        variable = f"{me}.{target.attr.value}"
        if isinstance(node, cst.AugAssign) or _reads(src, node.value, me, target.attr.value):
            kinds = {v.kind(x) for x in self_attr_values(src, target)}
            value = node.value
            if kinds & {Kind.INT, Kind.FLOAT} and not v.is_tensor(value) and not v.maybe_tensor(value):
                reset = _reset_in(src, target, node)
                what = f"`{short(src, node)}` changes a number attribute in compiled code"
                if reset is not None:  # `self.pooling_mult = 1` in the method forward calls first: per call
                    what += f" (`{reset}()` sets it back to a constant: it may be the same on every call)"
                yield Hit("TM201", node, LIKELY if reset is None else POSSIBLE, what, variable)
            continue
        if isinstance(node, cst.Assign) and v.is_tensor(node.value):
            cache = _cache_test(src, node, me, target.attr.value)
            if cache is not None:
                yield Hit(
                    "TM208",
                    cache,
                    LIKELY,
                    f"`{variable}` is a tensor cached on the module and rebuilt in compiled code",
                    variable,
                )


def setting_written(src: SourceFile, node: cst.Assign, me: str) -> tuple[cst.If, cst.Attribute] | None:
    """`self.config.problem_type = "regression"` under `if self.config.problem_type is None:`: a setting (a string,
    a flag, None) of the module or its config that forward writes once, and the `if` that reads it (where the
    guard that then fails is: scan files the recompile there)."""
    if len(node.targets) != 1 or not _literal_setting(node.value):
        return None
    target = node.targets[0].target
    if not isinstance(target, cst.Attribute) or not _rooted_at(target, me):
        return None
    code = src.code(target)
    for anc in src.ancestors(node):
        if isinstance(anc, cst.FunctionDef):
            return None
        if isinstance(anc, cst.If) and any(src.code(a) == code for a in src.nodes_in(anc.test, cst.Attribute)):
            return anc, target
    return None


def _literal_setting(value: cst.BaseExpression) -> bool:
    if isinstance(value, (cst.SimpleString, cst.ConcatenatedString)):
        return True
    return isinstance(value, cst.Name) and value.value in ("True", "False", "None")


def _rooted_at(expr: cst.Attribute, me: str) -> bool:
    value = expr.value
    while isinstance(value, cst.Attribute):
        value = value.value
    return isinstance(value, cst.Name) and value.value == me


def _reset_in(src: SourceFile, target: cst.Attribute, node: cst.CSTNode) -> str | None:
    """The method other than `__init__` that assigns the attribute a constant (a counter reset on every call), if
    one does."""
    for value in self_attr_values(src, target):
        fn = src.enclosing(value, cst.FunctionDef)
        if value is node or not isinstance(fn, cst.FunctionDef) or fn.name.value == "__init__":
            continue
        if isinstance(value, (cst.Integer, cst.Float)) and isinstance(src.parents.get(value), cst.Assign):
            return fn.name.value
    return None


def _reads(src: SourceFile, expr: cst.CSTNode, me: str, attr: str) -> bool:
    return any(
        m.matches(a, m.Attribute(value=m.Name(me), attr=m.Name(attr))) for a in src.nodes_in(expr, cst.Attribute)
    )


def _cache_test(src: SourceFile, assign: cst.Assign, me: str, attr: str) -> cst.If | None:
    """The `if self.x is None or ...:` that guards rebuilding the cached tensor, in the same def."""
    for anc in src.ancestors(assign):
        if isinstance(anc, cst.FunctionDef):
            return None
        if isinstance(anc, cst.If) and _reads(src, anc.test, me, attr):
            return anc
    return None
