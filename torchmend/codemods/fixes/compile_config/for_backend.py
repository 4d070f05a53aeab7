"""TM106: a function the backend gave up on, compiled with the capture switch it lacked (capture.py), set before the
user's compile call."""

from __future__ import annotations

from torchmend import rules
from torchmend.analysis.source import Context
from torchmend.codemods.base import Codemod, Invalid, Result, Valid
from torchmend.codemods.fixes.compile_config.capture import operator, propose_capture
from torchmend.model import Finding


class CaptureForBackend(Codemod):
    """Let the backend compile a function it gave up on, when a config switch is what it lacked.

    What it does:
        TM106: a compiled function that dynamo gave up on: the backend compiler raised while compiling its
        graph ("WON'T CONVERT"), so no graph is kept and the function runs eagerly on every call. The finding
        sits at the line the backend failed on. When the backend failed on an operator whose output shape or
        value depends on the data (`aten.nonzero`, `aten._local_scalar_dense`), the fix sets
        `torch._dynamo.config.capture_dynamic_output_shape_ops = True` (or `capture_scalar_outputs = True`)
        on the line before the script's `torch.compile(...)` / `model.compile()` call.

    Why is this bad:
        Nothing of the function is compiled, silently: the run looks normal but the speed-up never comes. When
        the detection backend (`--backend`) is not the script's own, the scan hands the failing graph to the
        script's backend too and says whether the two disagree.

    Example:
        def mask_hidden(h, m):          # m: a boolean mask; h[m] = ... is aten.nonzero under AOTAutograd
            h[m] = 0.0
            return h

        model = torch.compile(model)

    Fix:
        torch._dynamo.config.capture_dynamic_output_shape_ops = True
        model = torch.compile(model)

        For any other failure (a 0-d tensor used as an index: `aten._local_scalar_dense` from
        `self.alphas_cumprod[timestep]`) change the line the backend failed on: index with
        `timestep.view(1)` or `index_select`, or pass a Python int where that is what the code means.

    Fix safety:
        Safe for the switch: the same operators run, traced with symbolic sizes, and verification re-runs the
        script before anything is written. A hand fix that indexes with a one-element tensor returns a
        one-element tensor, not a 0-d one: check the shapes broadcasting gives downstream.
    """

    rules = ("TM106",)
    name = "capture-for-backend"
    INVALID = (
        Invalid(
            """
            import torch

            def mask_hidden(h, m):
                h[m] = 0.0
                return h  # tm: TM106 reason=failed_with_aten.nonzero.default

            def main(h, m):
                fast = torch.compile(mask_hidden)
                return fast(h, m)
            """,
            """
            import torch

            def mask_hidden(h, m):
                h[m] = 0.0
                return h  # tm: TM106 reason=failed_with_aten.nonzero.default

            def main(h, m):
                torch._dynamo.config.capture_dynamic_output_shape_ops = True
                fast = torch.compile(mask_hidden)
                return fast(h, m)
            """,
        ),
    )
    VALID = (
        Valid(
            """
            import torch

            def step(x, table):
                return table[x]  # tm: TM106 reason=failed_with_aten.index_put

            fast = torch.compile(step)
            """,
        ),
    )

    def propose(self, finding: Finding, ctx: Context) -> Result:
        return propose_capture(
            finding,
            ctx,
            check_flow=False,
            no_switch=f"the backend failed on `{operator(finding) or 'an operator'}`, which no config switch traces",
            advice=rules.BY_CODE["TM106"].advice,
        )
