"""Whether a setting's test holds in the configuration a model gets by default: `if self.config.mask_time_prob > 0
and self.training:` with `mask_time_prob: float = 0.05` in the config class, `if self._requires_grad and
self.training:` with `self._requires_grad = True` in `__init__`. Code behind such a test runs in a default training
run, so lint reports it as likely, not as possible (code only some configurations run).

A static reading, kept small: literals, `self.training` (True: a training run), attributes the class assigns
(`self.layerdrop = config.layerdrop`), config fields read through any name that holds a config (`config.x`,
`self.config.x`, `getattr(self.config, "x", default)`), `not`/`and`/`or`, comparisons and `a if c else b`. A config
field's default comes from the classes named `...Config` of the file and of the `*config*.py` files beside it
(transformers' `configuration_*.py`, a project's `config.py`), when they agree. Anything else is unknown, and an
unknown test keeps the code possible."""

from __future__ import annotations

import ast
import operator
import os
from functools import lru_cache
from typing import Any

import libcst as cst

from torchmend.analysis import self_attr_values
from torchmend.analysis.source import SourceFile


class _Unknown:
    def __repr__(self) -> str:
        return "UNKNOWN"


UNKNOWN: Any = _Unknown()
_OBJECT: Any = object()  # a value that is some object (a module built in __init__): truthy, not None
_MAX_DEPTH = 4
_COMPARE = {
    cst.LessThan: operator.lt,
    cst.GreaterThan: operator.gt,
    cst.LessThanEqual: operator.le,
    cst.GreaterThanEqual: operator.ge,
    cst.Equal: operator.eq,
    cst.NotEqual: operator.ne,
    cst.Is: operator.is_,
    cst.IsNot: operator.is_not,
}


def by_default(src: SourceFile, test: cst.BaseExpression) -> bool | None:
    """Whether `test` is true for a model built from its config's defaults, in training; None: not known."""
    value = _eval(src, test, 0)
    return None if value is UNKNOWN else bool(value)


def _eval(src: SourceFile, expr: cst.BaseExpression, depth: int) -> Any:
    if depth > _MAX_DEPTH:
        return UNKNOWN
    if isinstance(expr, (cst.Integer, cst.Float, cst.SimpleString)):
        try:
            return ast.literal_eval(expr.value)
        except (ValueError, SyntaxError):
            return UNKNOWN
    if isinstance(expr, cst.Name):
        return {"True": True, "False": False, "None": None}.get(expr.value, UNKNOWN)
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Not):
        inner = _eval(src, expr.expression, depth)
        return UNKNOWN if inner is UNKNOWN else not inner
    if isinstance(expr, cst.BooleanOperation):
        left = _eval(src, expr.left, depth)
        is_and = isinstance(expr.operator, cst.And)
        if left is not UNKNOWN and (not left if is_and else bool(left)):
            return left  # short-circuits whatever the right side is
        right = _eval(src, expr.right, depth)
        if left is UNKNOWN:
            return right if right is not UNKNOWN and (not right if is_and else bool(right)) else UNKNOWN
        return right
    if isinstance(expr, cst.Comparison) and len(expr.comparisons) == 1:
        op = _COMPARE.get(type(expr.comparisons[0].operator))
        left, right = _eval(src, expr.left, depth), _eval(src, expr.comparisons[0].comparator, depth)
        if op is None or left is UNKNOWN or right is UNKNOWN:
            return UNKNOWN
        if _OBJECT in (left, right):
            return op(left, right) if op in (operator.is_, operator.is_not) else UNKNOWN
        try:
            return op(left, right)
        except TypeError:
            return UNKNOWN
    if isinstance(expr, cst.IfExp):
        test = _eval(src, expr.test, depth)
        if test is UNKNOWN:
            return UNKNOWN
        return _eval(src, expr.body if test else expr.orelse, depth)
    if isinstance(expr, cst.Attribute):
        return _attribute(src, expr, depth)
    if isinstance(expr, cst.Call):
        return _call(src, expr, depth)
    return UNKNOWN


def _attribute(src: SourceFile, expr: cst.Attribute, depth: int) -> Any:
    code = src.code(expr)
    if code == "self.training":
        return True
    owner = src.code(expr.value).rsplit(".", 1)[-1]
    if "config" in owner.lower():  # config.x, self.config.x, self.text_config.x
        return config_default(src.path, src.text, expr.attr.value)
    if isinstance(expr.value, cst.Name) and expr.value.value == "self":
        assigned = self_attr_values(src, expr)
        in_init = [v for v in assigned if _method(src, v) == "__init__"]
        found = [_eval(src, v, depth + 1) for v in in_init or assigned]  # what __init__ sets is the default
        if found and all(f is not UNKNOWN for f in found) and all(f == found[0] for f in found):
            return found[0]
    return UNKNOWN


def _method(src: SourceFile, node: cst.CSTNode) -> str:
    fn = src.enclosing(node, cst.FunctionDef)
    return fn.name.value if isinstance(fn, cst.FunctionDef) else ""


def _call(src: SourceFile, call: cst.Call, depth: int) -> Any:
    func = src.code(call.func)
    if func == "getattr" and len(call.args) in (2, 3) and isinstance(call.args[1].value, cst.SimpleString):
        owner = src.code(call.args[0].value).rsplit(".", 1)[-1]
        name = ast.literal_eval(call.args[1].value.value)
        if "config" in owner.lower() and isinstance(name, str):
            value = config_default(src.path, src.text, name)
            if value is UNKNOWN and len(call.args) == 3:
                return _eval(src, call.args[2].value, depth)
            return value
        return UNKNOWN
    if func[:1].isupper():  # `Adapter(config)`: a module built in __init__
        return _OBJECT
    return UNKNOWN


def config_default(path: str, text: str, name: str) -> Any:
    """The default of config field `name`: one literal that every config class beside the code agrees on."""
    found = _config_fields(os.path.dirname(path), path, text).get(name, [])
    values = {repr(v) for v in found}
    return found[0] if len(values) == 1 else UNKNOWN


def _config_fields(folder: str, path: str, text: str) -> dict[str, list[Any]]:
    fields: dict[str, list[Any]] = {}
    for name, values in _fields_of_text(text).items():
        fields.setdefault(name, []).extend(values)
    for name, values in _folder_fields(folder, os.path.basename(path)).items():
        fields.setdefault(name, []).extend(values)
    return fields


@lru_cache(maxsize=256)
def _folder_fields(folder: str, skip: str) -> dict[str, list[Any]]:
    fields: dict[str, list[Any]] = {}
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return fields
    for file in names:
        if file == skip or not file.endswith(".py") or "config" not in file:
            continue
        try:
            with open(os.path.join(folder, file), encoding="utf-8") as fh:
                text = fh.read()
        except (OSError, UnicodeDecodeError):
            continue
        for name, values in _fields_of_text(text).items():
            fields.setdefault(name, []).extend(values)
    return fields


@lru_cache(maxsize=256)
def _fields_of_text(text: str) -> dict[str, list[Any]]:
    """`name: T = literal` and `name = literal` in the body of each class named `...Config`."""
    fields: dict[str, list[Any]] = {}
    if "Config" not in text:
        return fields
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return fields
    for cls in ast.walk(tree):
        if not (isinstance(cls, ast.ClassDef) and cls.name.endswith("Config")):
            continue
        for stmt in cls.body:
            target, value = None, None
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None:
                target, value = stmt.target.id, stmt.value
            elif isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
                target, value = stmt.targets[0].id, stmt.value
            if target is None or value is None:
                continue
            try:
                fields.setdefault(target, []).append(ast.literal_eval(value))
            except (ValueError, SyntaxError, TypeError):
                continue
    return fields
