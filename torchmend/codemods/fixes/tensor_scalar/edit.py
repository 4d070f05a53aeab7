"""The one edit TM104 (keep-scalar-tensor) and TM205 (keep-carried-scalar-tensor) share: where it starts (the
function around the finding), whether the value is kept a tensor already, and the proposal with its safety note."""

from __future__ import annotations

import libcst as cst

from torchmend.analysis import is_compiled
from torchmend.analysis.source import Context, SourceFile
from torchmend.codemods.base import UNSAFE, NoFix, Proposal, Refuse, Result
from torchmend.codemods.fixes.tensor_scalar.follow import CAPTURE, CONVERSIONS, Analysis, Plan
from torchmend.model import Finding, Where


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


def propose_from(finding: Finding, src: SourceFile, analysis: Analysis, start: list[cst.Call]) -> Result:
    """The edit that keeps the numbers made by the conversions `start` tensors, or why it cannot."""
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


def start_at(finding: Finding, ctx: Context, what: str) -> tuple[SourceFile, cst.CSTNode, Analysis] | NoFix:
    """The finding's file, its statement and the analysis of the function around it; or why there is none."""
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


def already_fixed(src: SourceFile, nodes: list[cst.CSTNode]) -> bool:
    """Whether the value is kept a tensor already: a `.detach()` in one of `nodes`, as the edit writes it."""
    return any(
        isinstance(c, cst.Call) and isinstance(c.func, cst.Attribute) and c.func.attr.value == "detach"
        for n in nodes
        for c in src.nodes_in(n, cst.Call)
    )
