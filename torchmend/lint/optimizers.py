"""TM203 without a run: an optimizer whose step is compiled (`torch.compile(opt.step)`, or `opt.step()` inside a
compiled def) while a float learning rate is written into its `param_groups` (a hand-written schedule) or an
lr scheduler changes it. The optimizer, its construction and its writes are found by the tensor-lr codemod's own
locators (codemods/fixes/optimizer_lr), so what lint reports is what `lint --fix` can rewrite.

A schedule that writes a float lr while the step runs eagerly (nanoGPT's training loop) is not reported: an
eager step never guards on the lr."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from torchmend.analysis import match as m
from torchmend.analysis import values
from torchmend.analysis.optimizers import OURS, construction_of, lr_schedulers, lr_writes, optimizer_class
from torchmend.analysis.source import Context, SourceFile
from torchmend.lint.checks import LIKELY, Hit
from torchmend.lint.regions import CompiledStep, Reached, calls_in

VARIABLE = "self.param_groups[0]['lr']"  # what scan's guard names, and what the codemod reads the key from


def _float_lr(src: SourceFile, receiver: cst.BaseExpression, ctx: Context) -> str | None:
    """How a float lr changes for the optimizer `receiver` holds, or None when it does not (or lint cannot
    tell which optimizer it is)."""
    ctor, _ = construction_of(src, receiver)
    if ctor is None or optimizer_class(src, ctor, ctx) is None:
        return None
    v = values(src)
    for w in lr_writes(src, ctor):
        if w.owner != OURS:
            continue
        value = getattr(w.node, "value", None)
        if isinstance(w.node, cst.AugAssign) or (value is not None and not v.is_tensor(value)):
            return f"line {src.line_of(w.node)} writes a float lr into its param_groups"
    lr = next((a.value for a in ctor.args if a.keyword is not None and a.keyword.value == "lr"), None)
    schedulers = lr_schedulers(src, ctor)
    if schedulers and not (lr is not None and v.is_tensor(lr)):
        name, call = schedulers[0]
        return f"the {name} at line {src.line_of(call)} changes its float lr"
    return None


def stepped(r: Reached, ctx: Context) -> Iterator[Hit]:
    """`opt.step()` in a compiled def, for an optimizer whose float lr changes."""
    for call in calls_in(r.fn):
        if not (m.matches(call.func, m.Attribute(attr=m.Name("step"))) and not call.args):
            continue
        assert isinstance(call.func, cst.Attribute)
        how = _float_lr(r.src, call.func.value, ctx)
        if how is not None:
            yield Hit("TM203", call, LIKELY, f"the optimizer step is compiled and {how}", VARIABLE)


def compiled_step(step: CompiledStep, ctx: Context) -> Iterator[tuple[SourceFile, Hit]]:
    """`step = torch.compile(opt.step)`: at each call of `step` (where scan reports it), else at the compile."""
    src = step.src
    how = _float_lr(src, step.receiver, ctx)
    if how is None:
        return
    what = f"the optimizer step is compiled and {how}"
    calls = _calls_of_result(src, step.call)
    for node in calls or [step.call]:
        yield src, Hit("TM203", node, LIKELY, what, VARIABLE)


def _calls_of_result(src: SourceFile, compile_call: cst.Call) -> list[cst.Call]:
    """The calls of the name `torch.compile(...)`'s result is bound to."""
    parent = src.parents.get(compile_call)
    if not isinstance(parent, cst.Assign) or len(parent.targets) != 1:
        return []
    target = parent.targets[0].target
    if not isinstance(target, cst.Name):
        return []
    found = []
    for call in src.nodes_in(src.module, cst.Call):
        if isinstance(call.func, cst.Name) and call.func.value == target.value:
            refs = src.referents(call.func)
            if target in refs:
                found.append(call)
    return found
