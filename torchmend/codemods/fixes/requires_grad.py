"""Skip turning on requires_grad of a tensor while torch.compile traces (TM109)."""

from __future__ import annotations

import libcst as cst

from torchmend.codemods.base import UNSAFE, Codemod, Invalid, NoFix, Proposal, Result, Valid
from torchmend.codemods.gating import already_gated, gate
from torchmend.codemods.source import Context
from torchmend.model import Finding, Where

_ADVICE = (
    "set requires_grad on the tensor before it enters the compiled function (in the training loop), or gate "
    "the line with `if not torch.compiler.is_compiling():`"
)

_LEAF_ADVICE = (
    "if the caller only needs its values, return it without requires_grad_() (or `.detach()` it); if the "
    "caller needs its gradient, create the tensor outside the compiled region (in the training loop) and pass it "
    "in, or use the gradient inside the compiled function"
)


def _switch(small: cst.BaseSmallStatement) -> tuple[cst.BaseExpression, cst.BaseExpression | None] | None:
    """`t.requires_grad = v` or `t.requires_grad_(v)`: (t, v); v is None for `requires_grad_()` (True)."""
    if isinstance(small, cst.Assign) and len(small.targets) == 1:
        target = small.targets[0].target
        if isinstance(target, cst.Attribute) and target.attr.value == "requires_grad":
            return target.value, small.value
    if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
        call = small.value
        if isinstance(call.func, cst.Attribute) and call.func.attr.value == "requires_grad_":
            return call.func.value, call.args[0].value if call.args else None
    return None


class GateRequiresGrad(Codemod):
    """Skip `t.requires_grad = True` in compiled code.

    What it does:
        TM109: `t.requires_grad = True` (or `t.requires_grad_()`) on a tensor inside a torch.compile'd function
        or module, reported by dynamo as GB0206 "setattr() on Tensor.requires_grad" (or GB8985 "requires_grad_()
        intermediate leaked as output"). A leaf made and returned in one expression
        (`return torch.zeros_like(q).requires_grad_()`) is reported with what to write instead, not rewritten.

    Why is this bad:
        Dynamo cannot make a tensor of the graph a new autograd leaf: it breaks the graph at the line on
        every call. `requires_grad_(True)` breaks it too.

    Example:
        h = x[:, None]
        h.requires_grad = True  # so that checkpointed layers see an input that needs grad
        return self.convs(h)

    Fix:
        h = x[:, None]
        if not torch.compiler.is_compiling():
            h.requires_grad = True
        return self.convs(h)

    Fix safety:
        Unsafe. In compiled code the tensor no longer needs grad: the gradients of the parameters are the same
        (autograd reaches them through the parameters themselves), but the tensor's own `.grad` stays None, and
        an output that depends on it only through frozen parameters no longer needs grad (code that relied on
        that, such as reentrant gradient checkpointing over frozen layers, fails to backpropagate). A tensor
        whose `.grad` the function reads is reported, not rewritten; so is `requires_grad = False`.
    """

    rules = ("TM109",)
    name = "gate-requires-grad"
    INVALID = (
        Invalid(
            """
            import torch
            from torch import nn

            class FrontEnd(nn.Module):
                def forward(self, wave):
                    h = wave[:, None]
                    if self.training:
                        h.requires_grad = True  # tm: TM109
                    return self.conv(h)
            """,
            """
            import torch
            from torch import nn

            class FrontEnd(nn.Module):
                def forward(self, wave):
                    h = wave[:, None]
                    if self.training:
                        if not torch.compiler.is_compiling():
                            h.requires_grad = True  # tm: TM109
                    return self.conv(h)
            """,
        ),
    )
    VALID = (
        # turning it off: skipping that under compile would change what gets gradients
        Valid(
            """
            import torch

            def f(x):
                x.requires_grad = False  # tm: TM109
                return x * 2
            """,
        ),
        Valid(
            """
            import torch

            def f(x):
                if not torch.compiler.is_compiling():
                    x.requires_grad_()  # tm: TM109
                return x * 2
            """,
        ),
    )

    def propose(self, finding: Finding, ctx: Context) -> Result:
        if finding.where != Where.PROJECT:
            return NoFix(finding, f"the line is in {finding.file}, outside your project", _ADVICE)
        src = ctx.file(finding.path)
        stmt = src.statement_at(finding.line)
        switches = (
            [(s, w) for s in stmt.body if (w := _switch(s)) is not None]
            if isinstance(stmt, cst.SimpleStatementLine)
            else []
        )
        if not switches:
            made = [
                c
                for c in (src.nodes_in(stmt, cst.Call) if stmt is not None else [])
                if isinstance(c.func, cst.Attribute) and c.func.attr.value == "requires_grad_"
            ]
            if made:  # `return torch.zeros_like(q).requires_grad_()`: a new leaf made and used in one expression
                return NoFix(
                    finding,
                    f"`{src.code(made[0])}` makes a new autograd leaf inside compiled code and it leaves the "
                    "compiled function (PyTorch's GB8985: a requires_grad_() intermediate returned from the compiled "
                    "region); skipping requires_grad_() under compile would change whether the output needs grad",
                    _LEAF_ADVICE,
                )
            return NoFix(finding, f"no `requires_grad` assignment at line {finding.line}", _ADVICE)
        assert isinstance(stmt, cst.SimpleStatementLine)
        if len(stmt.body) != 1:
            return NoFix(finding, "the line holds several statements; put the assignment on a line of its own", _ADVICE)
        tensor, value = switches[0][1]
        if not (value is None or (isinstance(value, cst.Name) and value.value == "True")):
            return NoFix(
                finding,
                f"the line sets requires_grad to `{src.code(value)}`; skipping that under compile could give "
                "gradients to a tensor that should have none",
                "stop the gradient with `t = t.detach()` instead",
            )
        if already_gated(src, stmt):
            return NoFix(finding, "the line is already gated by is_compiling()", skipped=True)
        name = src.code(tensor)
        fn = src.enclosing(stmt, cst.FunctionDef)
        reads_grad = fn is not None and any(
            n.attr.value == "grad" and src.code(n.value) == name for n in src.nodes_in(fn, cst.Attribute)
        )
        if reads_grad:
            return NoFix(
                finding,
                f"the function reads `{name}.grad`, which needs `{name}` to require grad in compiled code too",
                _ADVICE,
            )
        notes = [
            f"under torch.compile `{name}` no longer requires grad: parameter gradients are unchanged, "
            f"but `{name}.grad` stays None and outputs reached from it only through frozen parameters do not "
            "require grad"
        ]
        params = {p.name.value for p in fn.params.params} if fn is not None else set()
        if isinstance(tensor, cst.Name) and tensor.value in params:
            notes.append(f"`{name}` is an argument: a caller that reads its .grad gets None under compile")
        gated, imports = gate(src, stmt)
        return Proposal(
            (finding,),
            finding.rule,
            src.path,
            replace={stmt: gated},
            imports=imports,
            safety=UNSAFE,
            why="skip making the tensor an autograd leaf while torch.compile traces (dynamo cannot), so the "
            "graph does not break",
            note="; ".join(notes),
        )
