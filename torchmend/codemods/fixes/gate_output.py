"""Gate print() and logging calls in compiled code behind `torch.compiler.is_compiling()` (TM101, TM102)."""

from __future__ import annotations

import libcst as cst

from torchmend.codemods.base import UNSAFE, Codemod, Invalid, NoFix, Proposal, Result, Valid
from torchmend.codemods.source import Context, SourceFile
from torchmend.codemods.torch_ops import IS_COMPILING, LOG_METHODS
from torchmend.model import Finding, Where


def _is_print(src: SourceFile, call: cst.Call) -> bool:
    return isinstance(call.func, cst.Name) and (
        src.is_qualified(call.func, "builtins.print")
        or (call.func.value == "print" and not src.qualified_names(call.func))
    )


def _is_log(src: SourceFile, call: cst.Call) -> bool:
    func = call.func
    if not isinstance(func, cst.Attribute) or func.attr.value not in LOG_METHODS:
        return False
    # logging.info(...) / log.info(...) / self.logger.info(...): a logger method or the logging module's helper.
    return src.is_qualified(func, *(f"logging.{n}" for n in LOG_METHODS)) or not src.is_qualified(
        func, *(f"torch.{n}" for n in LOG_METHODS)
    )


def _already_gated(src: SourceFile, stmt: cst.CSTNode) -> bool:
    for anc in src.ancestors(stmt):
        if isinstance(anc, cst.If):
            for call in src.nodes_in(anc.test, cst.Call):
                if src.qualified_names(call.func) & IS_COMPILING:
                    return True
        if isinstance(anc, cst.FunctionDef):
            return False
    return False


def _gate(finding: Finding, ctx: Context, is_target, what: str) -> Result:
    if finding.where != Where.PROJECT:  # its line is the library's: never look it up in a file of yours
        return NoFix(
            finding,
            f"the {what} call is inside a library ({finding.file}:{finding.line}), which torchmend does not edit",
            "let dynamo move it out of the graph: add the function to "
            "`torch._dynamo.config.reorderable_logging_functions` before compiling (the message still appears), "
            "or raise that library logger's level so it does not log",
        )
    src = ctx.file(finding.path)
    stmt = src.statement_at(finding.line)
    if not isinstance(stmt, cst.SimpleStatementLine):
        return NoFix(finding, f"no {what} statement at line {finding.line}")
    calls = [n for n in src.nodes_in(stmt, cst.Call) if is_target(src, n)]
    if not calls:
        return NoFix(finding, f"no {what} call at line {finding.line}")
    if _already_gated(src, stmt):
        return NoFix(finding, f"the {what} call is already gated by is_compiling()", skipped=True)
    if len(stmt.body) != 1 or not isinstance(stmt.body[0], cst.Expr) or stmt.body[0].value is not calls[0]:
        return NoFix(
            finding,
            f"the {what} call is part of a larger statement; move it to a statement of its own first",
            "gate it with `if not torch.compiler.is_compiling():` by hand",
        )
    is_compiling, imports = src.torch_expr("compiler.is_compiling")
    gated = cst.If(
        test=cst.UnaryOperation(cst.Not(), cst.Call(is_compiling)),
        body=cst.IndentedBlock([stmt.with_changes(leading_lines=[])]),
        leading_lines=stmt.leading_lines,
    )
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

    Fix safety:
        Unsafe: the message is no longer printed in compiled code. To keep it, PyTorch can print after the
        graph instead: `torch._dynamo.config.reorderable_logging_functions.add(print)` at start-up (the
        arguments must be tensors, constants or strings).
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
        result = _gate(finding, ctx, _is_print, "print")
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
        torch.compile'd function or module.

    Why is this bad:
        Dynamo does not trace logging.Logger methods: each call ends the graph, runs in Python, and starts
        a new graph after it (a graph break), every call.

    Example:
        log.info("forward on batch of %d", x.shape[0])

    Fix:
        if not torch.compiler.is_compiling():
            log.info("forward on batch of %d", x.shape[0])

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
