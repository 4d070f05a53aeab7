"""The capture switches placed right before the user's compile call, when the break's own GB id (or the operator a
backend failed on) says a switch is the remedy: `capture_dynamic_output_shape_ops` for operators whose output
shape depends on the data (`nonzero`, GB0036), `capture_scalar_outputs` for operators that read a tensor into a
number (`.item()` inside an op, GB0033). Refused where the switch would only move the break: the value then
meets Python control flow (flow.py). Shared by the fixes of TM111 and TM106 (data_dependent_op.py,
for_backend.py) and, for a `.item()` inside a library, by those of TM104 and TM108."""

from __future__ import annotations

import re

from torchmend.analysis.dynamo_config import has_switch
from torchmend.analysis.dynamo_tables import DYNAMIC_SHAPE_OPS, SCALAR_OUTPUT_OPS
from torchmend.analysis.entry import compile_site_for
from torchmend.analysis.source import Context, SourceError
from torchmend.codemods.base import SAFE, NoFix, Result
from torchmend.codemods.dynamo_config import switch_on
from torchmend.codemods.fixes.compile_config.flow import scalar_moves, shape_moves
from torchmend.codemods.fixes.expert_loop import propose_expert_loop
from torchmend.model import Finding, Where

DYNAMIC, SCALAR = "capture_dynamic_output_shape_ops", "capture_scalar_outputs"
_OP = re.compile(r"aten\.(\w+)")
_NOTE = {
    DYNAMIC: "the setting holds for everything compiled after this line: each data-dependent size becomes a "
    "symbolic size in the graph; a later shape check on it (an `if`, a view) can still break or raise; code "
    "compiled with data-dependent sizes can run slower than the eager code it replaces (Wav2Vec2's SpecAugment "
    "masking: steady step 3.2x on CPU), so judge speed with --repeat 3",
    SCALAR: "the setting holds for everything compiled after this line: each `.item()` becomes a symbolic "
    "number in the graph; Python control flow on it still breaks",
}


def operator(finding: Finding) -> str | None:
    """The aten operator the finding's reason names (`aten.nonzero` gives `nonzero`), if any."""
    op = _OP.search(finding.reason or "")
    return op.group(1) if op else None


def _option(finding: Finding) -> str | None:
    """The switch the finding's GB id or operator asks for."""
    op = operator(finding)
    if "meta kernel" in (finding.reason or ""):
        return None  # "Dynamic shape operator (no meta kernel)": the switch is on and does not help
    if finding.gb_id == "GB0036" or op in DYNAMIC_SHAPE_OPS:
        return DYNAMIC
    if finding.gb_id == "GB0124" or op in SCALAR_OUTPUT_OPS:
        return SCALAR
    return None


def propose_capture(finding: Finding, ctx: Context, check_flow: bool, no_switch: str, advice: str) -> Result:
    """The switch the finding asks for (or, for `for e in mask.nonzero():` in the project, the loop rewritten to
    `for e in range(n):`); where no switch traces its operator, a NoFix saying `no_switch` with `advice`.
    `check_flow`: refuse where the value meets Python control flow after it is made (flow.py)."""
    option = _option(finding)
    if option == DYNAMIC and finding.where == Where.PROJECT:
        loop = propose_expert_loop(finding, ctx)  # `for e in mask.nonzero():` becomes `for e in range(n):`
        if loop is not None:
            return loop
    if option is None:
        return NoFix(finding, no_switch, advice)
    return _propose(finding, ctx, option, check_flow=check_flow)


def capture_scalars_in_library(finding: Finding, ctx: Context) -> Result:
    """A `.item()` inside a library (TM104, an assert on one: TM108), which torchmend never edits: the end user's
    remedy, `capture_scalar_outputs = True` before the script's compile call, unless the library's own code then
    meets the number with Python control flow (read from its source), where the switch only moves the break."""
    return _propose(finding, ctx, SCALAR, check_flow=True, library_flow=True)


def _propose(finding: Finding, ctx: Context, option: str, check_flow: bool, library_flow: bool = False) -> Result:
    if check_flow and (finding.where == Where.PROJECT or library_flow):
        try:
            src = ctx.file(finding.path)
        except SourceError:
            return NoFix(finding, f"cannot read {finding.file}", f"set `torch._dynamo.config.{option} = True`")
        stmt = src.statement_at(finding.line)
        moved = None if stmt is None else (shape_moves if option == DYNAMIC else scalar_moves)(src, stmt)
        if moved:
            return NoFix(
                finding,
                f"`{option} = True` would only move the break: {moved}, and Python needs the real value there",
                "keep the work on tensors (a mask instead of the indices; `torch.where` instead of an `if`), or "
                "loop over a fixed range and mask inside it",
            )
    site = compile_site_for(finding, ctx)
    if isinstance(site, str):
        return NoFix(finding, site, f"set `torch._dynamo.config.{option} = True` before compiling")
    if has_switch(site.src, option):
        return NoFix(
            finding,
            f"{site.src.path} already sets `torch._dynamo.config.{option}`; the break is not about that setting",
        )
    return switch_on(
        (finding,),
        site,
        option,
        why=f"let dynamo trace the operator: `torch._dynamo.config.{option} = True` before compiling",
        note=_NOTE[option],
        safety=SAFE,
    )
