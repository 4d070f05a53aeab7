"""Gate print() and logging calls in compiled code behind `torch.compiler.is_compiling()` (TM101, TM102); keep a
print's output instead, where gating cannot reach it, by letting dynamo print after the graph
(`torch._dynamo.config.reorderable_logging_functions.add(print)`, placed before the script's compile call).

What torch 2.13 reorders (checked on the installed release): plain functions only (`types.FunctionType` or a
builtin), called with tensors, constants or strings (f-strings included) and no keyword arguments (a `sep=` is
silently dropped). A `logging.Logger` method (`logger.warning`, transformers' `warning_once`) is never
reordered: dynamo consults only `ignore_logging_functions` for those, which drops the message as a gate does.
A logging function (`logging.warning`) is reordered out of the graph, but dynamo then compiles the logging
module's own frames when the reordered call runs, which break inside it: in a training run the breaks stay
(12 before, 11 after), so logging calls are gated, not reordered.
"""

from __future__ import annotations

import libcst as cst
from libcst.helpers import get_full_name_for_node

from torchmend.codemods.analysis import is_print
from torchmend.codemods.analysis.entry import compile_site_for
from torchmend.codemods.analysis.loggers import logging_call
from torchmend.codemods.base import SAFE, UNSAFE, Codemod, Invalid, NoFix, Proposal, Result, Valid
from torchmend.codemods.fixes.compile_config.settings import add_member, has_member
from torchmend.codemods.gating import already_gated, gate
from torchmend.codemods.source import Context, SourceError, SourceFile
from torchmend.codemods.torch_ops import LOG_METHODS, NOT_TENSOR_ATTRS
from torchmend.model import Finding, Where

REORDER = "reorderable_logging_functions"
_CONTAINERS = (cst.List, cst.Tuple, cst.Dict, cst.Set, cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)


def _is_log(src: SourceFile, call: cst.Call) -> bool:
    """A logger's method, whatever its name (the logger told by how it is bound: analysis/loggers.py), or a
    logging function; else, as before, a LOG_METHODS name on anything but torch (`torch.log(x)`)."""
    if logging_call(src, call):
        return True
    func = call.func
    if not isinstance(func, cst.Attribute) or func.attr.value not in LOG_METHODS:
        return False
    return not src.is_qualified(func, *(f"torch.{n}" for n in LOG_METHODS))


def _reorder_member(src: SourceFile, call: cst.Call) -> str | None:
    """What to add to reorderable_logging_functions for this call (`print`), or None when torch would not
    reorder it: not a print, keyword or starred arguments, or an argument that is not a tensor, a constant or
    a string (a container, `x.shape`)."""
    if not is_print(src, call):
        return None
    member = "print"
    for arg in call.args:
        value = arg.value
        if arg.keyword is not None or arg.star or isinstance(value, _CONTAINERS):
            return None
        if isinstance(value, cst.Attribute) and value.attr.value in NOT_TENSOR_ATTRS:
            return None
        if isinstance(value, cst.Call) and get_full_name_for_node(value.func) in ("str", "repr", "len"):
            return None
    return member


def _reorder(finding: Finding, ctx: Context, src: SourceFile, call: cst.Call, what: str) -> Result | None:
    """Keep the message: dynamo prints it after the graph. None when torch would not reorder this call."""
    member = _reorder_member(src, call)
    if member is None:
        return None
    site = compile_site_for(finding, ctx)
    if isinstance(site, str):
        return None
    if has_member(site.src, REORDER, member):
        return NoFix(
            finding,
            f"`{member}` is already in `torch._dynamo.config.{REORDER}` ({site.src.path}); if the break is still "
            "there, dynamo could not reorder this call's arguments",
            f"gate the {what} by hand: `if not torch.compiler.is_compiling():`",
        )
    return add_member(
        (finding,),
        site,
        REORDER,
        member,
        why=f"let dynamo run the {what} after the graph instead of breaking it: the message still appears",
        note=f"every `{member}(...)` call in compiled code is now reordered: its output comes after the graph's "
        "work rather than in the middle of it, and a tensor changed in place after the call prints its later "
        "value",
        alternative="gate it instead: `if not torch.compiler.is_compiling():` (the message is then not shown in "
        "compiled code)",
        safety=SAFE,
    )


def _gate(finding: Finding, ctx: Context, is_target, what: str) -> Result:
    path, line = finding.path, finding.line
    if finding.where != Where.PROJECT:  # its line is the library's: never edit it
        frame = finding.user_frame
        mine = frame is not None and ctx.in_project(frame.path) and _holds_call(ctx, frame.path, frame.line, is_target)
        if not mine:  # no call of yours reached it: the script may still reorder a library's print
            reordered = _library_reorder(finding, ctx)
            if reordered is not None:
                return reordered
            return NoFix(
                finding,
                f"the {what} call is inside a library ({finding.file}:{finding.line}), which torchmend does not edit",
                "let dynamo move it out of the graph: add the function to "
                "`torch._dynamo.config.reorderable_logging_functions` before compiling (the message still "
                "appears; torch 2.13 does this for print, not for Logger methods), or raise that library "
                "logger's level so it does not log",
            )
        assert frame is not None
        path, line = frame.path, frame.line  # your call that dynamo followed into the library (logging.warning)
    src = ctx.file(path)
    stmt = src.statement_at(line)
    if not isinstance(stmt, cst.SimpleStatementLine):
        return NoFix(finding, f"no {what} statement at line {line}")
    calls = [n for n in src.nodes_in(stmt, cst.Call) if is_target(src, n)]
    if not calls:
        return NoFix(finding, f"no {what} call at line {line}")
    if already_gated(src, stmt):
        return NoFix(finding, f"the {what} call is already gated by is_compiling()", skipped=True)
    if len(stmt.body) != 1 or not isinstance(stmt.body[0], cst.Expr) or stmt.body[0].value is not calls[0]:
        reordered = _reorder(finding, ctx, src, calls[0], what)  # a print inside an expression can still be kept
        if reordered is not None:
            return reordered
        return NoFix(
            finding,
            f"the {what} call is part of a larger statement; move it to a statement of its own first",
            "gate it with `if not torch.compiler.is_compiling():` by hand",
        )
    gated, imports = gate(src, stmt)
    return Proposal(
        (finding,),
        finding.rule,
        src.path,
        replace={stmt: gated},
        imports=imports,
        safety=UNSAFE,
        why=f"skip the {what} while torch.compile traces, so the graph does not break",
        note=f"the {what} no longer runs in compiled code (it still runs when the code runs eagerly)",
    )


def _holds_call(ctx: Context, path: str, line: int, is_target) -> bool:
    try:
        src = ctx.file(path)
    except SourceError:
        return False
    stmt = src.statement_at(line)
    return stmt is not None and any(is_target(src, n) for n in src.nodes_in(stmt, cst.Call))


def _library_reorder(finding: Finding, ctx: Context) -> Result | None:
    """A print inside a library's code (read, never edited): reordered from the user's script."""
    try:
        src = ctx.file(finding.path)
    except SourceError:
        return None
    stmt = src.statement_at(finding.line)
    calls = [n for n in src.nodes_in(stmt, cst.Call) if _reorder_member(src, n)] if stmt is not None else []
    return _reorder(finding, ctx, src, calls[0], "print") if calls else None


class GatePrint(Codemod):
    """Gate a print() in compiled code.

    What it does:
        TM101: a `print(...)` reached inside a torch.compile'd function or module.

    Why is this bad:
        Dynamo cannot put a print into a graph: it stops the graph before the print, runs it in Python,
        and starts a new graph after it (a graph break), every call.

    Example:
        h = torch.relu(self.fc1(x))
        print("hidden mean", h.mean())

    Fix:
        if not torch.compiler.is_compiling():
            print("hidden mean", h.mean())

        Where a gate cannot reach the print (inside a library's code, or inside an expression such as
        `debug and print(...)`), the output is kept instead: `torch._dynamo.config.reorderable_logging_functions.add(
        print)` goes right before the script's `torch.compile(...)` call, and dynamo prints after the graph.
        torch 2.13 reorders a print whose arguments are tensors, constants or strings, without keywords.

    Fix safety:
        Unsafe when gated: the message is no longer printed in compiled code. To keep it, PyTorch can print
        after the graph instead: `torch._dynamo.config.reorderable_logging_functions.add(print)` at start-up.
        Safe when reordered: the message still appears, after the graph's work rather than in the middle of
        it (a tensor changed in place after the print shows its later value).
    """

    rules = ("TM101",)
    name = "gate-print"
    INVALID = (
        Invalid(
            """
            import torch

            def f(x):
                y = x * 2
                print('y', y)  # tm: TM101
                return y
            """,
            """
            import torch

            def f(x):
                y = x * 2
                if not torch.compiler.is_compiling():
                    print('y', y)  # tm: TM101
                return y
            """,
        ),
        # torch imported under another name; no import added
        Invalid(
            """
            import torch as t

            def f(x):
                # debug
                print(x)  # tm: TM101
                return x
            """,
            """
            import torch as t

            def f(x):
                # debug
                if not t.compiler.is_compiling():
                    print(x)  # tm: TM101
                return x
            """,
        ),
        # no torch import at all: one is added
        Invalid(
            """
            def f(x):
                print(
                    'x',
                    x,
                )  # tm: TM101
                return x
            """,
            """
            import torch

            def f(x):
                if not torch.compiler.is_compiling():
                    print(
                        'x',
                        x,
                    )  # tm: TM101
                return x
            """,
        ),
        # a print inside an expression cannot be gated: dynamo prints it after the graph instead
        Invalid(
            """
            import torch

            def f(x, debug=True):
                y = x * 2
                debug and print('y', y)  # tm: TM101
                return y

            fast = torch.compile(f)
            """,
            """
            import torch

            def f(x, debug=True):
                y = x * 2
                debug and print('y', y)  # tm: TM101
                return y

            torch._dynamo.config.reorderable_logging_functions.add(print)
            fast = torch.compile(f)
            """,
        ),
    )
    VALID = (
        Valid(
            """
            import torch

            def f(x):
                if not torch.compiler.is_compiling():
                    print(x)  # tm: TM101
                return x
            """,
        ),
        Valid(
            """
            def f(x):
                y = print(x) or x  # tm: TM101
                return y
            """,
        ),
    )

    def propose(self, finding: Finding, ctx: Context) -> Result:
        result = _gate(finding, ctx, is_print, "print")
        if isinstance(result, Proposal):
            from dataclasses import replace

            return replace(
                result,
                alternative="keep the output: call "
                "`torch._dynamo.config.reorderable_logging_functions.add(print)` once at start-up; "
                "dynamo then prints after the graph runs (arguments must be tensors, constants or "
                "strings)",
            )
        return result


class GateLogging(Codemod):
    """Gate a logging call in compiled code.

    What it does:
        TM102: a `logger.info(...)`, `logging.warning(...)` or other logging call reached inside a
        torch.compile'd function or module. The logger is told by how its name is bound, whatever the method:
        `logging.getLogger(...)`, a library's `get_logger(...)` (transformers' `logging.get_logger(__name__)`,
        whose loggers also have `warning_once`, `info_once`, `warning_advice`), a module-level `logger` /
        `log`, `self.logger`.

    Why is this bad:
        Dynamo does not trace logging.Logger methods: each call ends the graph, runs in Python, and starts
        a new graph after it (a graph break), every call.

    Example:
        log.info("forward on batch of %d", x.shape[0])

    Fix:
        if not torch.compiler.is_compiling():
            log.info("forward on batch of %d", x.shape[0])

        A call of yours that dynamo followed into a library (`logging.warning(...)`, traced into the logging
        module, where the breaks are reported) is gated at your line. Reordering
        (`torch._dynamo.config.reorderable_logging_functions`) would keep the message, but torch 2.13 never
        reorders a Logger method, and a reordered `logging.warning` still breaks inside the logging module when
        it runs.

    Fix safety:
        Unsafe: the record is no longer logged from compiled code (it still is when the code runs eagerly).
    """

    rules = ("TM102",)
    name = "gate-logging"
    INVALID = (
        Invalid(
            """
            import logging
            import torch
            log = logging.getLogger(__name__)

            def f(x):
                log.info('shape %s', x.shape)  # tm: TM102
                return x
            """,
            """
            import logging
            import torch
            log = logging.getLogger(__name__)

            def f(x):
                if not torch.compiler.is_compiling():
                    log.info('shape %s', x.shape)  # tm: TM102
                return x
            """,
        ),
        Invalid(
            """
            import logging
            import torch

            def f(x):
                logging.warning('big')  # tm: TM102
                return x
            """,
            """
            import logging
            import torch

            def f(x):
                if not torch.compiler.is_compiling():
                    logging.warning('big')  # tm: TM102
                return x
            """,
        ),
        # a library's logger, bound by its get_logger, with a method the library patched onto Logger
        Invalid(
            """
            import torch
            from ...utils import logging
            logger = logging.get_logger(__name__)

            def pad(x, window):
                if x.shape[-1] % window:
                    logger.warning_once(  # tm: TM102
                        f"padded to a multiple of {window}"
                    )
                return x
            """,
            """
            import torch
            from ...utils import logging
            logger = logging.get_logger(__name__)

            def pad(x, window):
                if x.shape[-1] % window:
                    if not torch.compiler.is_compiling():
                        logger.warning_once(  # tm: TM102
                            f"padded to a multiple of {window}"
                        )
                return x
            """,
        ),
    )
    VALID = (
        Valid(
            """
            import logging
            import torch
            log = logging.getLogger(__name__)

            def f(x):
                if not torch.compiler.is_compiling():
                    log.info('x')  # tm: TM102
                return x
            """,
        ),
    )

    def propose(self, finding: Finding, ctx: Context) -> Result:
        return _gate(finding, ctx, _is_log, "logging")
