"""Keep a print's (and, where the release reorders it, a logger's) output in compiled code: dynamo runs the call
after the graph (`torch._dynamo.config.reorderable_logging_functions.add(print)`, placed before the script's
compile call); gate it behind `torch.compiler.is_compiling()` (which drops the message) only where reordering
cannot work (TM101, TM102).

What each release reorders (measured with aot_eager on 2.13.0, 2.14.1 and 2.15.0; `REORDERS` below):
- `print`, on every release: arguments that are tensors, constants, strings, f-strings (a tensor formatted inside
  one, format spec included: `f"{loss:.4f}"`), `"%s" % t` and `"{}".format(t)`. Not reordered (the break stays):
  a keyword argument on 2.14+ (2.13 reorders it and silently drops it: `sep=` is lost, so it is never reordered),
  `.shape` and other non-tensor attributes, a container, `str(t)`.
- `.item()` inside the arguments: on 2.13 its own break stays; on 2.14 and 2.15 an f-string that formats
  `t.item()` with a spec (`f"{loss.item():.4f}"`) crashes dynamo (InternalTorchDynamoError: Unknown format code
  'f' for object of type 'str'). The fix writes `t.reshape(())` instead, a 0-dim tensor that formats exactly as
  the number `.item()` gave (Tensor.__format__ formats a 0-dim tensor through its item), with no break.
- A `logging.Logger` method, from 2.14: the bound method of a logger created at module level
  (`reorderable_logging_functions.add(log.info)`), called without keywords with a string or f-string and constant
  `%`-arguments; a tensor among the `%`-arguments makes dynamo trace into the logging module when the reordered
  call runs (7 of 8 breaks stay). 2.13 never reorders a Logger method (dynamo consults `ignore_logging_functions`
  only).
- A logging function (`logging.warning`) is reordered out of the graph, but dynamo then compiles the logging
  module's own frames when the reordered call runs, which break inside it (12 before, 11 after on a training
  run): logging functions are gated.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import replace
from typing import cast

import libcst as cst

from torchmend.analysis import is_print
from torchmend.analysis.dynamo_config import REORDER, REORDERS, has_member, logger_plan, reorder_member, reorder_plan
from torchmend.analysis.entry import compile_site_for
from torchmend.analysis.gating import already_gated, gate
from torchmend.analysis.loggers import logging_call
from torchmend.analysis.source import Context, SourceError, SourceFile
from torchmend.codemods.base import SAFE, UNSAFE, Codemod, Invalid, NoFix, Proposal, Result, Valid
from torchmend.codemods.dynamo_config import add_member
from torchmend.codemods.fixes.library_side import library_logger
from torchmend.model import Finding, Where


def _releases(ctx: Context, kind: str) -> bool:
    version = ctx.torch_version
    return version is None or version[:2] >= REORDERS[kind]


def _reorder(finding: Finding, ctx: Context, src: SourceFile, call: cst.Call, what: str) -> Proposal | NoFix | None:
    """Keep the message: dynamo runs the call after the graph. None when the run's torch would not reorder this
    call (then it is gated, which drops it)."""
    rewritten: cst.Call | None = None
    if what == "print":
        plan = reorder_plan(src, call)
        if plan is None or not _releases(ctx, "print"):
            return None
        member, rewritten = plan
    else:
        logger = logger_plan(src, call) if _releases(ctx, "logger") else None
        if logger is None:
            return None
        member = logger
    site = compile_site_for(finding, ctx)
    if isinstance(site, str):
        return None
    same_file = os.path.realpath(site.src.path) == os.path.realpath(src.path)
    if (rewritten is not None or what != "print") and not same_file:
        return None  # the call's rewrite and the line before the compile call must be one edit of one file
    if what != "print" and site.src.function_at(site.src.line_of(site.statement)) is None:
        first = min(src.line_of(r) for r in src.referents(cast(cst.Name, cast(cst.Attribute, call.func).value)))
        if first > src.line_of(site.statement):
            return None  # a module-level compile before the logger exists
    if has_member(site.src, REORDER, member):
        if rewritten is None:
            return NoFix(
                finding,
                f"`{member}` is already in `torch._dynamo.config.{REORDER}` ({site.src.path}); if the break is still "
                "there, dynamo could not reorder this call's arguments",
                f"gate the {what} by hand: `if not torch.compiler.is_compiling():` (its output is then not shown in "
                "compiled code)",
            )
        return Proposal(
            (finding,),
            finding.rule,
            src.path,
            replace={call: rewritten},
            safety=SAFE,
            why=f"keep the {what}: format a 0-dim tensor instead of `.item()` so dynamo can print it after the graph",
            note=_ITEM_NOTE,
        )
    proposal = add_member(
        (finding,),
        site,
        REORDER,
        member,
        why=f"keep the {what}'s output: dynamo runs `{member}(...)` after the graph instead of breaking it",
        note=f"every `{member}(...)` call in compiled code is now reordered: its output comes after the graph's "
        "work rather than in the middle of it, and a tensor changed in place after the call prints its later "
        "value" + (f"; {_ITEM_NOTE}" if rewritten is not None else ""),
        alternative="gate it instead: `if not torch.compiler.is_compiling():` (the message is then not shown in "
        "compiled code)",
        safety=SAFE,
    )
    if rewritten is not None:
        proposal = replace(proposal, replace={call: rewritten})
    return proposal


_ITEM_NOTE = (
    "`t.item()` in the message is written `t.reshape(())`: the same one-element tensor as a 0-dim tensor, which "
    "prints exactly as its number (a `.item()` left there breaks the graph on torch 2.13 and crashes dynamo's "
    "reordering on 2.14+ when formatted with a spec)"
)


def gate_or_keep(finding: Finding, ctx: Context, is_target, what: str) -> Result:
    """The output call behind the finding kept where the release reorders it (placed before the compile call),
    else gated behind is_compiling(); `is_target` tells the call (a print, a logging call), `what` names it."""
    path, line = finding.path, finding.line
    if finding.where != Where.PROJECT:  # its line is the library's: never edit it
        frame = finding.user_frame
        mine = frame is not None and ctx.in_project(frame.path) and _holds_call(ctx, frame.path, frame.line, is_target)
        if not mine:  # no call of yours reached it: the script may still reorder a library's print
            reordered = _library_reorder(finding, ctx) if what == "print" else _library_logger(finding, ctx)
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
    reordered = _reorder(finding, ctx, src, calls[0], what)  # keep the output wherever the release can
    if len(stmt.body) != 1 or not isinstance(stmt.body[0], cst.Expr) or stmt.body[0].value is not calls[0]:
        if reordered is not None:
            return reordered
        return NoFix(
            finding,
            f"the {what} call is part of a larger statement; move it to a statement of its own first",
            "gate it with `if not torch.compiler.is_compiling():` by hand",
        )
    gated, imports = gate(src, stmt)
    gating = Proposal(
        (finding,),
        finding.rule,
        src.path,
        replace={stmt: gated},
        imports=imports,
        safety=UNSAFE,
        why=f"drop the {what} while torch.compile traces, so the graph does not break ("
        + (
            f"the run's torch cannot run this {what} after the graph: {_why_not(src, calls[0], what, ctx)})"
            if reordered is None
            else f"running the {what} after the graph was refused)"
        ),
        note=f"the {what} no longer runs in compiled code: its output is gone there (it still runs when the code "
        "runs eagerly)",
    )
    if isinstance(reordered, NoFix):
        return reordered
    if isinstance(reordered, Proposal):
        if os.path.realpath(reordered.path) == os.path.realpath(src.path):  # verification refused the reordering
            return replace(reordered, fallbacks=(*reordered.fallbacks, gating))
        return reordered
    return gating


def _why_not(src: SourceFile, call: cst.Call, what: str, ctx: Context) -> str:
    """Why a message is gated rather than reordered, in the words the diff's header shows."""
    if what != "print":
        if not _releases(ctx, "logger"):
            return "a Logger method is reordered from torch 2.14"
        return (
            "only a module-level logger's method called with a string and constant arguments, in the file that "
            "compiles, is reordered"
        )
    if any(arg.keyword is not None or arg.star for arg in call.args):
        return "a keyword argument is not reordered (2.13 drops it silently)"
    return "an argument dynamo does not format (`.shape`, a container, `str()`, an `.item()` inside an expression)"


def _holds_call(ctx: Context, path: str, line: int, is_target) -> bool:
    try:
        src = ctx.file(path)
    except SourceError:
        return False
    stmt = src.statement_at(line)
    return stmt is not None and any(is_target(src, n) for n in src.nodes_in(stmt, cst.Call))


def _library_reorder(finding: Finding, ctx: Context) -> Result | None:
    """A print inside a library's code (read, never edited): reordered from the user's script."""
    return _at_library_call(finding, ctx, reorder_member, lambda src, call: _reorder(finding, ctx, src, call, "print"))


def _library_logger(finding: Finding, ctx: Context) -> Result | None:
    """A library's logger call (read, never edited): kept or made a no-op in compiled code from the user's script."""
    return _at_library_call(finding, ctx, logging_call, lambda src, call: library_logger(finding, ctx, src, call))


def _at_library_call(
    finding: Finding,
    ctx: Context,
    is_call: Callable[[SourceFile, cst.Call], object],
    fix: Callable[[SourceFile, cst.Call], Result | None],
) -> Result | None:
    """`fix` for the first call on the finding's library line that `is_call` picks; None when none (or unreadable)."""
    try:
        src = ctx.file(finding.path)
    except SourceError:
        return None
    stmt = src.statement_at(finding.line)
    calls = [n for n in src.nodes_in(stmt, cst.Call) if is_call(src, n)] if stmt is not None else []
    return fix(src, calls[0]) if calls else None


class GatePrint(Codemod):
    """Keep a print() in compiled code: dynamo prints after the graph (gated only where it cannot).

    What it does:
        TM101: a `print(...)` reached inside a torch.compile'd function or module.

    Why is this bad:
        Dynamo cannot put a print into a graph: it stops the graph before the print, runs it in Python,
        and starts a new graph after it (a graph break), every call.

    Example:
        h = torch.relu(self.fc1(x))
        print("hidden mean", h.mean())

    Fix:
        torch._dynamo.config.reorderable_logging_functions.add(print)   # before the script's torch.compile(...)

        The output is kept: dynamo runs the print after the graph instead of breaking it. It takes arguments
        that are tensors, constants and strings (f-strings formatting a tensor included); an `.item()` formatted in
        the message is written `t.reshape(())` (a 0-dim tensor prints as its number: the same text, and no break;
        on torch 2.14+ `f"{t.item():.4f}"` under reordering crashes dynamo). Where torch cannot reorder the print
        (a keyword such as `sep=`, `.shape`, a container, `str(t)`, an `.item()` inside an expression) or no
        compile call is found, it is gated, and the change says why:

        if not torch.compiler.is_compiling():
            print("hidden mean", h.mean())

    Fix safety:
        Safe when reordered: the message still appears, after the graph's work rather than in the middle of
        it (a tensor changed in place after the print shows its later value). Unsafe when gated: the message is
        no longer printed in compiled code. A reordering that verification refuses falls back to the gate.
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
        # a compiled loss print is kept: dynamo prints it after the graph; `.item()` becomes a 0-dim tensor
        Invalid(
            """
            import torch

            def step(x):
                loss = (x * 2).pow(2).mean()
                print(f"loss {loss.item():.4f}")  # tm: TM101
                return loss

            fast = torch.compile(step)
            """,
            """
            import torch

            def step(x):
                loss = (x * 2).pow(2).mean()
                print(f"loss {loss.reshape(()):.4f}")  # tm: TM101
                return loss

            torch._dynamo.config.reorderable_logging_functions.add(print)
            fast = torch.compile(step)
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
        result = gate_or_keep(finding, ctx, is_print, "print")
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
