"""Keep a number read out of a tensor (`.item()`, `float(t)`, `int(t)`) a tensor when it only feeds tensor
math (TM104), and fix the recompile that the same number causes when it is carried across the break (TM205).

Both rules share one analysis (follow.py): from the conversion, follow the value through arithmetic,
`max`/`min` and local names until it meets a tensor; refuse as soon as some use needs a real Python number.
TM104 and TM205 at the same conversion get the very same edit (edit.py), so the engine merges them into one
proposal. This module is the codemod of TM104; carried.py is TM205's.
"""

from __future__ import annotations

import libcst as cst

from torchmend.analysis.source import Context
from torchmend.codemods.base import Codemod, Invalid, NoFix, Result, Valid
from torchmend.codemods.fixes.compile_config.capture import capture_scalars_in_library
from torchmend.codemods.fixes.tensor_scalar.edit import already_fixed, propose_from, start_at
from torchmend.codemods.fixes.tensor_scalar.follow import CAPTURE
from torchmend.model import Finding, Where


class KeepScalarTensor(Codemod):
    """Keep `.item()` / `float(t)` / `int(t)` a tensor when the number only feeds tensor math.

    What it does:
        TM104: a tensor turned into a Python number (`.item()`, `float(t)`, `int(t)`) inside compiled code,
        where the number only goes back into tensor arithmetic (directly, through `max`/`min`, or through a
        local name).

    Why is this bad:
        Dynamo cannot trace a Python number read out of a tensor (capture_scalar_outputs is off by default):
        it ends the graph before `.item()`, runs it in Python, and starts a new graph after it. The number
        then enters the next graph as a constant, so each new value can recompile it as well (TM205).

    Example:
        scale = max(err.mean().item(), 1e-6)
        return err.mean() / scale

    Fix:
        scale = err.mean().detach().clamp(min=1e-6)
        return err.mean() / scale

    Fix safety:
        Unsafe. `.detach()` keeps the gradients as they were (`.item()` detached too), but results can differ
        in the last bit: on CUDA, dividing by a Python number runs as a multiplication by its reciprocal, a
        float32 number meeting float16/bfloat16 tensors is now rounded to their dtype first, and arithmetic
        done on the number before it meets a tensor ran in float64 and now runs in the tensor's dtype (on CPU,
        where the number meets a tensor directly, the values matched bit for bit). `clamp`/`torch.maximum`
        propagate NaN where `max`/`min` might not, `int(t)` becomes `t.long()`, and a CUDA value mixed with
        CPU tensors now raises. Nothing is proposed when a use needs
        a real Python number (an `if`, a comparison, print/format, range(), an index or shape, a return to
        callers torchmend cannot see): set `torch._dynamo.config.capture_scalar_outputs = True` instead.
        A conversion inside an installed library (never edited) gets that switch before the script's compile
        call (safe), unless the library's own code then meets the number with Python control flow.
    """

    rules = ("TM104",)
    name = "keep-scalar-tensor"
    INVALID = (
        # the example: max(number, eps) becomes clamp(min=eps), detached
        Invalid(
            """
            import torch

            def loss(pred, target):
                err = (pred - target).pow(2)
                scale = max(err.mean().item(), 1e-6)  # tm: TM104
                return err.mean() / scale
            """,
            """
            import torch

            def loss(pred, target):
                err = (pred - target).pow(2)
                scale = err.mean().detach().clamp(min=1e-6)  # tm: TM104
                return err.mean() / scale
            """,
        ),
        # followed through a name: both lines change
        Invalid(
            """
            import torch

            def forward(self, x):
                out = self.fc(x)
                peak = out.abs().max().item()  # tm: TM104
                return out / max(peak, 1.0)
            """,
            """
            import torch

            def forward(self, x):
                out = self.fc(x)
                peak = out.abs().max().detach()  # tm: TM104
                return out / peak.clamp(min=1.0)
            """,
        ),
        # both operands come from tensors: torch.maximum, in the file's spelling of torch
        Invalid(
            """
            import torch as t

            def f(x, y):
                return x / max(x.sum().item(), y.sum().item())  # tm: TM104
            """,
            """
            import torch as t

            def f(x, y):
                return x / t.maximum(x.sum().detach(), y.sum().detach())  # tm: TM104
            """,
        ),
        # float(t) and min(): float32 kept, clamp(max=...)
        Invalid(
            """
            import torch

            def f(x):
                ratio = min(float(x.norm()), 5.0)  # tm: TM104
                return x * ratio
            """,
            """
            import torch

            def f(x):
                ratio = x.norm().detach().float().clamp(max=5.0)  # tm: TM104
                return x * ratio
            """,
        ),
    )
    VALID = (
        # an `if` needs a real bool
        Valid(
            """
            import torch

            def f(x):
                if x.sum().item() > 0:  # tm: TM104
                    x = x * 2
                return x
            """,
        ),
        # a shape needs a Python int
        Valid(
            """
            import torch

            def f(x, mask):
                n = int(mask.sum())  # tm: TM104
                return x.new_zeros(n) + 1
            """,
        ),
        # already fixed
        Valid(
            """
            import torch

            def f(x):
                scale = x.abs().max().detach()  # tm: TM104
                return x / scale
            """,
        ),
        # a bare `.item()` is there to wait for the GPU, not for its value
        Valid(
            """
            import torch

            def f(x):
                y = x * 2
                y.sum().item()  # tm: TM104
                return y
            """,
        ),
    )

    def propose(self, finding: Finding, ctx: Context) -> Result:
        if finding.where != Where.PROJECT:  # a library's `.item()`: the switch, from the script
            return capture_scalars_in_library(finding, ctx)
        started = start_at(finding, ctx, "the conversion")
        if isinstance(started, NoFix):
            return started
        src, stmt, analysis = started
        start = analysis.conversions_in(stmt)
        if start:
            return propose_from(finding, src, analysis, start)
        if already_fixed(src, [stmt]):
            return NoFix(finding, "the value at this line is already kept a tensor (`.detach()`)", skipped=True)
        if any(
            isinstance(c, cst.Call) and isinstance(c.func, cst.Attribute) and c.func.attr.value == "tolist"
            for c in src.nodes_in(stmt, cst.Call)
        ):
            return NoFix(
                finding,
                "`.tolist()` makes Python numbers for every element; keep the work on the tensor "
                "or move it out of the compiled code",
                CAPTURE,
            )
        return NoFix(
            finding,
            f"no `.item()`, `float(tensor)` or `int(tensor)` torchmend can tell apart at line {finding.line}",
            CAPTURE,
        )
