"""Gate a logging call in compiled code, or keep it (dynamo logs it after the graph) where the release reorders it
(TM102): the logging half of the output fix, gate_output.py (whose docstring says what each release reorders)."""

from __future__ import annotations

import libcst as cst

from torchmend.analysis.loggers import logging_call
from torchmend.analysis.source import Context, SourceFile
from torchmend.analysis.torch_ops import LOG_METHODS
from torchmend.codemods.base import Codemod, Invalid, Result, Valid
from torchmend.codemods.fixes.gate_output import gate_or_keep
from torchmend.model import Finding


def _is_log(src: SourceFile, call: cst.Call) -> bool:
    """A logger's method, whatever its name (the logger told by how it is bound: analysis/loggers.py), or a
    logging function; else, as before, a LOG_METHODS name on anything but torch (`torch.log(x)`)."""
    if logging_call(src, call):
        return True
    func = call.func
    if not isinstance(func, cst.Attribute) or func.attr.value not in LOG_METHODS:
        return False
    return not src.is_qualified(func, *(f"torch.{n}" for n in LOG_METHODS))


class GateLogging(Codemod):
    """Gate a logging call in compiled code (kept, after the graph, where the release reorders it).

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
        module, where the breaks are reported) is gated at your line. From torch 2.14 a method of a logger bound
        at module level, called with a string or f-string and constant arguments, in the file that compiles, is
        kept instead: `torch._dynamo.config.reorderable_logging_functions.add(log.info)` before the compile call
        (2.13 never reorders a Logger method; a tensor among the `%`-arguments makes dynamo trace the logging
        module when the call runs, so that form is gated).

        A logger call inside an installed library (site-packages, never edited; transformers'
        `logger.warning_once(...)`) is handled from the script, before its compile call, for that library
        module's logger only: kept from torch 2.14 where the arguments allow
        (`reorderable_logging_functions.add(transformers.models.x.modeling_x.logger.warning_once)`), else made a
        no-op in compiled code (`torch._dynamo.config.ignore_logging_functions.add(...)`, torch 2.13+).

    Fix safety:
        Unsafe when gated or ignored: the record is no longer logged from compiled code (it still is when the
        code runs eagerly). Safe when reordered: the record is logged after the graph's work.
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
        return gate_or_keep(finding, ctx, _is_log, "logging")
