"""The recompile a number read out of a tensor causes when a graph break carries it into the next graph (TM205):
the TM104 edit at the conversion that made it (edit.py), found from the line the guard names."""

from __future__ import annotations

import libcst as cst

from torchmend.analysis.source import Context, SourceFile
from torchmend.codemods.base import Codemod, Invalid, NoFix, Result, Valid
from torchmend.codemods.fixes.tensor_scalar.edit import already_fixed, propose_from, start_at
from torchmend.codemods.fixes.tensor_scalar.follow import CAPTURE, STACK, Analysis
from torchmend.model import Finding


class CarriedScalarTensor(Codemod):
    """Keep the number that a graph break carries into the next graph a tensor.

    What it does:
        TM205: a recompile whose guard is on `___stackN`, a Python number on the stack when the graph broke,
        when that number comes from `.item()` / `float(t)` / `int(t)` on the same line or from a local name
        assigned that way earlier in the function.

    Why is this bad:
        After the break, the graph that resumes the function gets the number as a constant and guards on its
        value; a different value next step fails the guard and recompiles (until dynamo marks it dynamic).

    Example:
        peak = out.abs().max().item()
        return out / max(peak, 1.0)

    Fix:
        peak = out.abs().max().detach()
        return out / peak.clamp(min=1.0)

    Fix safety:
        Unsafe, for the reasons given for TM104 (keep-scalar-tensor): it is the same edit, and it is merged
        with the TM104 finding at the conversion. With no break, no number crosses one and nothing recompiles.
    """

    rules = ("TM205",)
    name = "keep-carried-scalar-tensor"
    INVALID = (
        # the conversion on the line itself
        Invalid(
            """
            import torch

            def loss(pred, target):
                err = (pred - target).pow(2)
                scale = max(err.mean().item(), 1e-6)  # tm: TM205 variable=___stack1
                return err.mean() / scale
            """,
            """
            import torch

            def loss(pred, target):
                err = (pred - target).pow(2)
                scale = err.mean().detach().clamp(min=1e-6)  # tm: TM205 variable=___stack1
                return err.mean() / scale
            """,
        ),
        # the number comes from a name assigned on an earlier line
        Invalid(
            """
            import torch

            def forward(self, x):
                out = self.fc(x)
                peak = out.abs().max().item()
                return out / max(peak, 1.0)  # tm: TM205 variable=___stack0
            """,
            """
            import torch

            def forward(self, x):
                out = self.fc(x)
                peak = out.abs().max().detach()
                return out / peak.clamp(min=1.0)  # tm: TM205 variable=___stack0
            """,
        ),
    )
    VALID = (
        # the number is a Python argument, not read out of a tensor
        Valid(
            """
            import torch

            def f(x, n):
                y = x * n  # tm: TM205 variable=___stack0
                return y
            """,
        ),
    )

    def propose(self, finding: Finding, ctx: Context) -> Result:
        started = start_at(finding, ctx, "the number")
        if isinstance(started, NoFix):
            return started
        src, stmt, analysis = started
        origin = self._origin(finding, src, stmt, analysis)
        if origin is not None:
            start = analysis.conversions_in(origin)
            if start:
                return propose_from(finding, src, analysis, start)
        reads = [stmt] + [v for n in self._names(finding, src, stmt) for v in analysis.bindings(n)]
        if already_fixed(src, reads):
            return NoFix(finding, "the number at this line is already kept a tensor (`.detach()`)", skipped=True)
        return NoFix(
            finding,
            "the number carried across the graph break does not come from `.item()`, "
            "`float(tensor)` or `int(tensor)` in this function",
            "fix the graph break before this line (the recompile goes with it), or pass the number as a "
            "tensor; " + CAPTURE,
        )

    @staticmethod
    def _names(finding: Finding, src: SourceFile, stmt: cst.CSTNode) -> list[cst.Name]:
        """The names the carried number may be: the guard's own name, or (for `___stackN`) every name read."""
        names = [n for n in src.nodes_in(stmt, cst.Name) if isinstance(n, cst.Name)]
        if finding.variable and not STACK.match(finding.variable):
            names = [n for n in names if n.value == finding.variable]
        return names

    def _origin(self, finding: Finding, src: SourceFile, stmt: cst.CSTNode, analysis: Analysis) -> cst.CSTNode | None:
        """The statement of the conversion that made the number: this one, or the nearest earlier one that
        assigns a name this line reads."""
        if analysis.conversions_in(stmt) and (not finding.variable or STACK.match(finding.variable)):
            return stmt
        sources = set().union(*(analysis.sources(n) for n in self._names(finding, src, stmt)))
        line = src.line_of(stmt)
        statements = {
            s for c in sources if src.line_of(c) <= line for s in [src.statement_at(src.line_of(c))] if s is not None
        }
        return max(statements, key=src.line_of, default=None)
