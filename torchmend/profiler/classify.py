"""Which rule a graph break or a failed guard is, and the one-line reason shown with the finding.

A graph break is classified by its registry id (gbids.py) and by PyTorch's texts (the break's type and
explanation) only where it has no id or one the id table does not know; a failed guard by its text (the guard and
the variable it names): guards have no ids."""

from __future__ import annotations

import linecache
import re

from torchmend.model import Where
from torchmend.profiler.gbids import Version, rule_for_id
from torchmend.profiler.host_random import draws_host_random
from torchmend.profiler.numpy_scalars import numpy_on_numbers
from torchmend.profiler.traceparse import GraphBreak, GuardFailure, tensor_mismatch

LIBRARY = Where.LIBRARY


def classify_break(
    gb: GraphBreak, where: str, source: str = "", version: Version | None = None, path: str | None = None
) -> str:
    """`source`: the break's source line, where known (an `assert` on a tensor is a rule of its own); `version`:
    the run's torch release (None: unknown), which says what its ids mean; `path`: the break's file as this machine
    reads it (default: the break's own), whose function says where the line's names come from (TM114)."""
    code = _classify_break(gb, where, version)
    if code in ("TM103", "TM104") and re.match(r"\s*assert\b", source):
        return "TM108"
    if code in _VALUE_BREAKS and source and draws_host_random(path or gb.file, gb.line, source):
        return "TM110"
    if code in _VALUE_BREAKS and source and numpy_on_numbers(path or gb.file, gb.line):
        return "TM114"
    return code


# Breaks where a value goes back to Python or decides a branch: what a NumPy call or a host draw on the line causes.
_VALUE_BREAKS = ("TM103", "TM104", "TM111", "TM199")


def _classify_break(gb: GraphBreak, where: str, version: Version | None = None) -> str:
    by_id = rule_for_id(gb.gb_id, f"{gb.gb_type}\n{gb.explanation}", where, version)
    return by_id if by_id is not None else text_rule(gb, where)


def text_rule(gb: GraphBreak, where: str) -> str:
    """The rule PyTorch's texts say, for a break without an id the table knows (records from before the registry,
    a release newer than the table)."""
    text = f"{gb.gb_type}\n{gb.explanation}"
    if where == LIBRARY and ("graph_break()" in text or "User-inserted graph break" in text):
        return "TM901"
    if "`print`" in text or "builtin operator `print`" in text:
        return "TM101"
    if "logging" in text.lower() or "Logger" in text:
        return "TM102"
    if "requires_grad" in gb.gb_type:  # setattr() on Tensor.requires_grad, requires_grad_()
        return "TM109"
    if gb.gb_type.startswith(("Dynamic shape operator", "Data dependent operator")):
        return "TM111"  # GB0036 / GB0033: a config switch may trace it (codemods/fixes/compile_config)
    if "Data-dependent branching" in gb.gb_type or "data-dependent branching" in text.lower():
        return "TM103"
    if re.search(r"Tensor\.(item|tolist)\(\)|tensor.*(to|into) a Python (scalar|number)", text):
        return "TM104"
    if "torch.compiler.disable" in text or "Skip calling" in text or "skip" in gb.gb_type.lower():
        return "TM105"
    return "TM199"


def classify_guard(g: GuardFailure) -> str:
    var = g.variable or ""
    mismatch = tensor_mismatch(g.guard)
    if not mismatch and setting_written(g):
        return "TM209"
    if cached_tensor_attribute(g, mismatch):
        return "TM208"
    if mismatch == "size" or "size mismatch" in g.guard:
        return "TM204"
    if mismatch:
        return "TM207"
    if "param_groups" in var:
        return "TM203"
    if re.match(r"___stack\d+$", var):
        return "TM205"
    if g.guard.startswith("GLOBAL_STATE"):
        return "TM299"  # grad mode, autocast, ...: a train -> eval switch recompiles once per frame
    if re.match(r"^not\s", g.guard.strip()):
        return "TM299"  # a truthiness guard (`not self.state`: an optimizer's state created on its first step)
    if (g.hint and "nn.Module" in g.hint) or var.startswith("self.") or "_modules[" in var:
        return "TM201"
    # `var` is tidied (G['X'] -> X), so a global shows in the raw guard only.
    if re.match(r"^(G\[|.*__closure__|.*cell_contents)", var) or g.guard.startswith("G["):
        return "TM206"
    if re.match(r"^[A-Za-z_]\w*(\[\d+\])?$", var) or var.startswith(("args[", "kwargs[")):
        return "TM202"
    return "TM299"


# A tensor cached on a module (`if self.mask is None or self.mask.size(0) != n: self.mask = ...`), as torch 2.13
# words its guards: `self.mask is None`, `tensor 'self.mask' size mismatch ...`, `self._modules['p'].t.size()[0] == ...`.
_CACHED_ATTR = re.compile(r"self(?:\._modules\['\w+'\]|\.\w+)*\.\w+(?P<size>\.size\(\)\[\d+\]|\.shape\[\d+\])?")


def cached_tensor_attribute(g: GuardFailure, mismatch: str | None) -> bool:
    var = g.variable or ""
    attr = _CACHED_ATTR.fullmatch(var)
    if attr is None or "_parameters[" in var or "_buffers[" in var:
        return False
    guard = g.guard.split("#")[0].strip()
    none_check = re.fullmatch(re.escape(var) + r" is (?:not )?None", guard)
    # guard_variable drops the method: `self.mask.size()[0] == 8` guards `self.mask`
    size_check = re.match(re.escape(var) + r"(?:\.size\(\)|\.shape)\[\d+\]", guard)
    return bool(attr["size"] or size_check or none_check or mismatch in ("size", "stride"))


# A line of the project that logs through an installed wrapper: a logger's method (`logger.info(...)`, loguru's
# `logger.opt(...).debug(...)`, `self.logger.warning(...)`) or a training framework's `self.log(...)` /
# `self.log_dict(...)` (Lightning). A break inside the wrapper is this line's: TM102 at the user's line.
_LOGGING_LINE = re.compile(
    r"(?:^|[^\w.])(?:(?:self\.)?_?(?:logger|log|LOGGER|LOG)(?:\.\w+\([^()]*\))*\.\w+|self\.log(?:_dict)?)\s*\("
)


def logging_line(code: str) -> bool:
    """Whether a source line calls a logger or a framework's `self.log` (the call that reached a library break)."""
    return _LOGGING_LINE.search(code.split("#")[0]) is not None


# A setting forward writes (`self.config.problem_type = "regression"` under `if self.config.problem_type is None:`):
# a string, a flag or None assigned to the guarded attribute, in the file of the line the guard names.
_SETTING_VALUE = r"""\s*=\s*(?:[rbuf]*['"]|True\b|False\b|None\b)"""


def setting_written(g: GuardFailure, source: str | None = None) -> bool:
    """A guard on a module's (or its config's) attribute that holds a setting, not a tensor: the attribute is a
    config's (`self.config.problem_type`), or the guarded line's file assigns it a string, a flag or None.
    `source`: that file's text (read through linecache when not given)."""
    var = g.variable or ""
    if not re.fullmatch(r"self(?:\.\w+)+", var) or "_parameters" in var or "_buffers" in var:
        return False
    guard = g.guard.split("#")[0].strip()
    # `is None`, `is not None`, `== 'a string'`, `== True`: a number's guard (`== 3`) stays TM201
    if not re.fullmatch(re.escape(var) + r"""\s*(?:is(?: not)? None|[=!]= *(?:[rbu]*['"].*|True|False))""", guard):
        return False
    if ".config." in var:
        return True
    if source is None and g.site is not None:
        source = "".join(linecache.getlines(g.site.file))
    if not source:
        return False
    # every value the file gives it is a setting: `self.src_mask = None` then a mask built in forward is a cached
    # tensor (TM208), not a setting
    values = re.findall(re.escape(var) + r"\s*=(?!=)\s*([^\n]*)", source)
    return bool(values) and all(re.match(_SETTING_VALUE.replace(r"\s*=\s*", "", 1), v) for v in values)


_RAISED = re.compile(r"raised exception (?P<exc>\w+\(.*\))$")


def reason_for_break(gb: GraphBreak) -> str:
    ident = f"{gb.gb_id} " if gb.gb_id else ""
    raised = _RAISED.match(gb.context)
    if gb.gb_type == "Observed exception" and raised:
        # The explanation says only that an exception escaped; which one is the lead a person needs.
        return (
            f"{ident}{gb.gb_type}: the code raised {raised['exc']} while dynamo traced it, so the function runs "
            "eagerly; a path taken only under compile (e.g. skipped by `if ... not is_compiling()`) or an input "
            "the traced code does not expect (None, a missing key)"
        )
    return f"{ident}{gb.gb_type}: {gb.explanation}".strip()


def reason_for_guard(g: GuardFailure) -> str:
    return f"guard failed: {g.guard}"
