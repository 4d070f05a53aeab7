"""Keep a number read out of a tensor (`.item()`, `float(t)`, `int(t)`) a tensor when it only feeds tensor
math (TM104), and fix the recompile that the same number causes when it is carried across the break (TM205).

Both rules share one analysis (follow.py): from the conversion, follow the value through arithmetic,
`max`/`min` and local names until it meets a tensor; refuse as soon as some use needs a real Python number.
TM104 and TM205 at the same conversion get the very same edit, so the engine merges them into one proposal.
"""

from __future__ import annotations

import libcst as cst

from torchmend.analysis import is_compiled
from torchmend.analysis.source import Context, SourceFile
from torchmend.codemods.base import UNSAFE, Codemod, Invalid, NoFix, Proposal, Refuse, Result, Valid
from torchmend.codemods.fixes.compile_config.capture import capture_scalars_in_library
from torchmend.codemods.fixes.tensor_scalar.follow import CAPTURE, CONVERSIONS, STACK, Analysis, Plan
from torchmend.model import Finding, Where

# --- shared by both codemods ------------------------------------------------------------------------------


def _note(plan: Plan) -> str:
    parts = [
        "the number becomes a 0-dim tensor, detached from autograd as `.item()` was, so gradients do not "
        "change; results can differ in the last bit: on CUDA, `x / number` runs as `x * (1/number)` and a "
        "float32 number meeting float16/bfloat16 tensors is now rounded to their dtype first (on CPU the "
        "values matched bit for bit in torchmend's checks)"
    ]
    if plan.number_math:
        parts.append(
            "arithmetic done on the number before it meets a tensor now runs in the tensor's dtype "
            "instead of Python's float64"
        )
    if plan.minmax:
        parts.append(
            "max()/min() became clamp()/torch.maximum()/torch.minimum(), which return NaN when the "
            "tensor is NaN where Python's max/min could drop it"
        )
    if any(k == "int" for k in plan.conversions.values()):
        parts.append("int(t) became t.long() (it truncates as int() did); a NaN or inf no longer raises")
    if plan.returns:
        parts.append(f"`{plan.fn.name.value}` now returns a 0-dim tensor instead of a Python number")
    parts.append("the tensor stays on its device: a CUDA value mixed with CPU tensors raises where the number did not")
    return "; ".join(parts) + "."


def _propose_from(finding: Finding, src: SourceFile, analysis: Analysis, start: list[cst.Call]) -> Result:
    try:
        plan = analysis.plan(start)
        replace_, imports = analysis.replacements(plan)
    except Refuse as e:
        return NoFix(finding, f"{e}; torchmend keeps the number a tensor only when every use is tensor math", CAPTURE)
    first = min(plan.conversions, key=analysis._order)
    kind = plan.conversions[first]
    why = (
        f"keep `{src.code(first).strip()}` a tensor (`{CONVERSIONS[kind]}`), so dynamo does not break the "
        "graph to make a Python number"
    )
    return Proposal(
        (finding,),
        finding.rule,
        src.path,
        why=why,
        safety=UNSAFE,
        replace=replace_,
        imports=imports,
        note=_note(plan),
        alternative="keep the Python number and let dynamo trace it: "
        "`torch._dynamo.config.capture_scalar_outputs = True` before compiling",
    )


def _start(finding: Finding, ctx: Context, what: str) -> tuple[SourceFile, cst.CSTNode, Analysis] | NoFix:
    if finding.where != Where.PROJECT:
        return NoFix(finding, f"{what} happens inside a library, which torchmend does not edit", CAPTURE)
    src = ctx.file(finding.path)
    stmt = src.statement_at(finding.line)
    if stmt is None:
        return NoFix(finding, f"no statement at line {finding.line}")
    fn = src.enclosing(stmt, cst.FunctionDef)
    if not isinstance(fn, cst.FunctionDef):
        return NoFix(finding, f"line {finding.line} is not inside a function", CAPTURE)
    return src, stmt, Analysis(src, fn, is_compiled(src, fn))


def _already_fixed(src: SourceFile, nodes: list[cst.CSTNode]) -> bool:
    return any(
        isinstance(c, cst.Call) and isinstance(c.func, cst.Attribute) and c.func.attr.value == "detach"
        for n in nodes
        for c in src.nodes_in(n, cst.Call)
    )


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
        started = _start(finding, ctx, "the conversion")
        if isinstance(started, NoFix):
            return started
        src, stmt, analysis = started
        start = analysis.conversions_in(stmt)
        if start:
            return _propose_from(finding, src, analysis, start)
        if _already_fixed(src, [stmt]):
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
        started = _start(finding, ctx, "the number")
        if isinstance(started, NoFix):
            return started
        src, stmt, analysis = started
        origin = self._origin(finding, src, stmt, analysis)
        if origin is not None:
            start = analysis.conversions_in(origin)
            if start:
                return _propose_from(finding, src, analysis, start)
        reads = [stmt] + [v for n in self._names(finding, src, stmt) for v in analysis.bindings(n)]
        if _already_fixed(src, reads):
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
