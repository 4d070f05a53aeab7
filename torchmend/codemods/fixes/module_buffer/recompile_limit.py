"""The recompile limit reached on a guard on an int/float attribute of an nn.Module (TM250): the TM201 edit, which
makes the attribute a buffer, with the stopgap of raising the limit as the alternative."""

from __future__ import annotations

from dataclasses import replace

from torchmend.analysis.source import Context
from torchmend.codemods.base import Codemod, Invalid, Proposal, Result, Valid
from torchmend.codemods.fixes.module_buffer.locate import STOPGAP, propose_buffer
from torchmend.model import Finding


class RecompileLimitModuleScalar(Codemod):
    """Fix the module attribute behind a recompile limit by making it a buffer.

    What it does:
        TM250: a compiled function hit the recompile limit, and the guard that kept failing is on an
        int/float attribute of an nn.Module (`self.calls == 7`).

    Why is this bad:
        Each new value of the attribute failed a guard and compiled a new graph; after the limit (8 by
        default) dynamo stops compiling the function and runs it eagerly from then on.

    Example:
        def forward(self, x):  # recompile limit reached; last guard: self.calls == 7
            self.calls += 1
            return self.fc(x)

    Fix:
        self.register_buffer("calls", torch.tensor(0), persistent=False)  # in __init__
        self.calls.add_(1)  # in forward

    Fix safety:
        Unsafe: the same edit as for TM201, with the same caveats (the two findings share one proposal).
        When the failing guard is not on a module attribute, nothing is proposed: the finding names the
        guard, and torch._dynamo.config.recompile_limit can be raised as a stopgap.
    """

    rules = ("TM250",)
    name = "recompile-limit-module-scalar"
    INVALID = (
        Invalid(
            """
            import torch
            from torch import nn


            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.calls = 0

                def forward(self, x):  # tm: TM250 variable=self.calls
                    self.calls += 1
                    return x
            """,
            """
            import torch
            from torch import nn


            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.register_buffer("calls", torch.tensor(0), persistent=False)

                def forward(self, x):  # tm: TM250 variable=self.calls
                    self.calls.add_(1)
                    return x
            """,
        ),
    )
    VALID = (
        # the guard is on an argument, not on module state: advice only
        Valid(
            """
            import torch


            def f(x, scale):  # tm: TM250 variable=scale
                return x * scale
            """,
        ),
    )

    def propose(self, finding: Finding, ctx: Context) -> Result:
        result = propose_buffer(finding, ctx)
        if isinstance(result, Proposal):
            stopgap = STOPGAP.replace("as a stopgap, ", "as a stopgap only, ")
            return replace(
                result,
                alternative=f"{result.alternative}; or, {stopgap}"
                if result.alternative
                else stopgap[0].upper() + stopgap[1:],
            )
        return result
