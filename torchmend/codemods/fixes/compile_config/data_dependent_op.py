"""TM111: a data-dependent operator traced with the capture switch PyTorch names for it (capture.py), set before
the user's compile call."""

from __future__ import annotations

from torchmend import rules
from torchmend.analysis.source import Context
from torchmend.codemods.base import Codemod, Invalid, Result, Valid
from torchmend.codemods.fixes.compile_config.capture import operator, propose_capture
from torchmend.model import Finding


class CaptureDataDependentOp(Codemod):
    """Trace a data-dependent operator with a config switch set before compiling.

    What it does:
        TM111: an operator whose output shape depends on the data (`x.nonzero()`, `torch.where(mask)`,
        `masked_select`, `unique`: GB0036), or one that reads a tensor into a number inside an operator
        (`aten._local_scalar_dense`: GB0033), reached inside compiled code. The fix sets the switch PyTorch
        names for it, `torch._dynamo.config.capture_dynamic_output_shape_ops = True` or
        `capture_scalar_outputs = True`, on the line before the script's `torch.compile(...)` /
        `model.compile()` call; one line per switch however many findings ask for it.

    Why is this bad:
        By default dynamo cannot give such an operator's output a size (or value) it does not know while
        tracing: it breaks the graph at the operator, on every call.

    Example:
        def route(x, w):
            hit = (x > 0).nonzero()
            return x[hit[:, 0]] * w

        fast = torch.compile(route)

    Fix:
        torch._dynamo.config.capture_dynamic_output_shape_ops = True
        fast = torch.compile(route)

        A loop over the rows of `mask.nonzero()` that uses each row only as an index (mixture-of-experts
        routing: `for e in hit: ... self[f"expert_{e[0]}"] ... mask[e].squeeze(0)`) becomes a loop over
        `range(n)` with a Python int index (fixes/expert_loop.py), and the selection inside it gets the switch.
        Refused when the value meets Python control flow otherwise (an `if`, `len()`, `int()`, a loop that
        uses its row as a tensor): there the switch only moves the break. The operator's own hint is in the
        finding's reason.

    Fix safety:
        The switch alone is safe: the same operators run, traced with symbolic sizes; the setting holds for
        everything compiled after it. The loop rewrite is unsafe: an index with no rows now runs too, on an
        empty selection; its parameters then get a zero gradient instead of none, which an optimizer with
        weight decay or momentum (AdamW) treats differently. Verification re-runs the script (counts and
        numerics) before anything is written.
    """

    rules = ("TM111",)
    name = "capture-data-dependent-op"
    INVALID = (
        # mixture-of-experts routing: the loop over the rows of nonzero() becomes a loop over every index
        Invalid(
            """
            import torch

            def experts(x, mask):
                hit = (mask.sum(0) > 0).nonzero()  # tm: TM111 gb_id=GB0036
                out = x * 0
                for e in hit:
                    idx = torch.where(mask[:, e[0]])[0]  # tm: TM111 gb_id=GB0036
                    out[idx] += x[idx]
                return out

            fast = torch.compile(experts)
            """,
            """
            import torch

            def experts(x, mask):
                out = x * 0
                for e in range((mask.sum(0) > 0).shape[0]):
                    idx = torch.where(mask[:, e])[0]  # tm: TM111 gb_id=GB0036
                    out[idx] += x[idx]
                return out

            torch._dynamo.config.capture_dynamic_output_shape_ops = True
            fast = torch.compile(experts)
            """,
        ),
        Invalid(
            """
            import torch

            def route(x, w):
                hit = (x > 0).nonzero()  # tm: TM111 gb_id=GB0036
                return x[hit[:, 0]] * w

            fast = torch.compile(route)
            """,
            """
            import torch

            def route(x, w):
                hit = (x > 0).nonzero()  # tm: TM111 gb_id=GB0036
                return x[hit[:, 0]] * w

            torch._dynamo.config.capture_dynamic_output_shape_ops = True
            fast = torch.compile(route)
            """,
        ),
        # two findings ask for the same switch: one line
        Invalid(
            """
            import torch as t

            def pick(x, m):
                rows = t.where(m)[0]  # tm: TM111 gb_id=GB0036
                n = x.sum().item()  # tm: TM111 gb_id=GB0033 reason=aten._local_scalar_dense
                cols = m.nonzero()  # tm: TM111 gb_id=GB0036
                return x[rows] * n + cols.sum()

            def main(x, m):
                fast = t.compile(pick)
                return fast(x, m)
            """,
            """
            import torch as t

            def pick(x, m):
                rows = t.where(m)[0]  # tm: TM111 gb_id=GB0036
                n = x.sum().item()  # tm: TM111 gb_id=GB0033 reason=aten._local_scalar_dense
                cols = m.nonzero()  # tm: TM111 gb_id=GB0036
                return x[rows] * n + cols.sum()

            def main(x, m):
                t._dynamo.config.capture_dynamic_output_shape_ops = True
                t._dynamo.config.capture_scalar_outputs = True
                fast = t.compile(pick)
                return fast(x, m)
            """,
        ),
    )
    VALID = (
        # a loop that uses its row of nonzero() as a tensor: the switch only moves the break into the loop
        Valid(
            """
            import torch

            def shift(x, mask):
                hit = mask.nonzero()  # tm: TM111 gb_id=GB0036
                for row in hit:
                    x = x + row.sum()
                return x

            fast = torch.compile(shift)
            """,
        ),
        # the number decides an `if`: still a break with the switch on
        Valid(
            """
            import torch

            def f(x):
                flag = x.any().item()  # tm: TM111 gb_id=GB0033 reason=aten._local_scalar_dense
                if flag:
                    return x * 2
                return x

            fast = torch.compile(f)
            """,
        ),
        # already set
        Valid(
            """
            import torch

            def f(x):
                return x[x.nonzero()]  # tm: TM111 gb_id=GB0036

            torch._dynamo.config.capture_dynamic_output_shape_ops = True
            fast = torch.compile(f)
            """,
        ),
        # an operator no switch traces
        Valid(
            """
            import torch

            def f(x):
                return torch.ops.mylib.count(x)  # tm: TM111 gb_id=GB0033 reason=aten.mylib_count

            fast = torch.compile(f)
            """,
        ),
    )

    def propose(self, finding: Finding, ctx: Context) -> Result:
        return propose_capture(
            finding,
            ctx,
            check_flow=True,
            no_switch=f"no config switch traces `{operator(finding) or 'this operator'}`",
            advice=rules.BY_CODE["TM111"].advice,
        )
