"""Which expressions hold a logger, told by how the name is bound rather than by the method called on it:
`logging.getLogger(...)`, a library's `get_logger(...)` (transformers' `logging.get_logger(__name__)`), a
module-level `logger` / `log`, `self.logger`. Any method of a logger counts (`warning_once`, `info_once`,
`warning_advice`, `log`, `exception`, ...): libraries patch their own onto `logging.Logger`."""

from __future__ import annotations

import libcst as cst
from libcst.helpers import get_full_name_for_node

from torchmend.analysis.calls import self_attr_values
from torchmend.analysis.source import SourceFile
from torchmend.analysis.torch_ops import LOG_METHODS

# Functions that return a logger: logging.getLogger, and the get_logger of transformers, diffusers, accelerate,
# datasets, ... (each a thin wrapper over logging.getLogger).
LOGGER_FACTORIES = frozenset({"getLogger", "get_logger", "getChild"})
# Names that hold a logger by convention when the binding cannot be seen (imported, a parameter, a global
# set elsewhere).
LOGGER_NAMES = frozenset({"logger", "log", "_logger", "_log", "LOGGER", "LOG", "logging_logger"})


def _last_part(expr: cst.BaseExpression) -> str:
    name = get_full_name_for_node(expr) or ""
    return name.rsplit(".", 1)[-1]


def is_logging_module(src: SourceFile, expr: cst.BaseExpression) -> bool:
    """The standard library's `logging` module itself (`logging.warning(...)` calls a module function)."""
    return isinstance(expr, (cst.Name, cst.Attribute)) and src.is_qualified(expr, "logging")


def is_logger(src: SourceFile, expr: cst.BaseExpression, depth: int = 0) -> bool:
    """Whether `expr` holds a logging.Logger, judged by how it was bound."""
    if depth > 4:
        return False
    if isinstance(expr, cst.Call):
        func = expr.func
        if _last_part(func) in LOGGER_FACTORIES:
            return True
        return False
    if isinstance(expr, cst.Attribute):
        if get_full_name_for_node(expr) == "logging.root" or src.is_qualified(expr, "logging.root"):
            return True
        if isinstance(expr.value, cst.Name) and expr.value.value in ("self", "cls"):
            bound = self_attr_values(src, expr)
            if bound:
                return any(is_logger(src, v, depth + 1) for v in bound)
        return expr.attr.value in LOGGER_NAMES
    if isinstance(expr, cst.Name):
        refs = src.referents(expr)
        if not refs:
            return expr.value in LOGGER_NAMES
        for ref in refs:
            value = src.assigned_value(ref)
            if value is not None:
                if is_logger(src, value, depth + 1):
                    return True
            elif expr.value in LOGGER_NAMES:  # imported, a parameter, bound by `with`/`for`: trust the name
                return True
    return False


def logging_call(src: SourceFile, call: cst.Call) -> bool:
    """A call that logs: any method of a logger (`logger.warning_once(...)`), or one of the logging
    module's own functions (`logging.warning(...)`)."""
    func = call.func
    if not isinstance(func, cst.Attribute):
        return False
    if is_logging_module(src, func.value):
        return func.attr.value in LOG_METHODS
    if src.is_qualified(func, *(f"torch.{n}" for n in LOG_METHODS)):  # torch.log(x) is no logger
        return False
    return is_logger(src, func.value)
