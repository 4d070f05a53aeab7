"""Why an optimizer cannot take a tensor lr (its class, its construction, the writes of its lr), and what the user
should know when it can: the checks of the tensor-lr fix (optimizer_lr/__init__.py)."""

from __future__ import annotations

import os

import libcst as cst

from torchmend.analysis import match as m
from torchmend.analysis.custom_optimizers import lr_hazards, method
from torchmend.analysis.optim_tables import FOREACH_NEEDS_CAPTURABLE, OPTIMIZER_DEFAULT_LR
from torchmend.analysis.optimizers import OURS, UNKNOWN, LrWrite, construction_of, lr_schedulers, lr_writes, per_group
from torchmend.analysis.source import Context, SourceFile
from torchmend.codemods.base import NoFix
from torchmend.codemods.fixes.optimizer_lr.writes import Groups, uniform
from torchmend.model import Finding

ADVICE = (
    'build the optimizer with lr=torch.tensor(<lr>) and change it with group["lr"].fill_(<value>) '
    '(never `group["lr"] = <float>`)'
)


def refuse_class(
    finding: Finding,
    src: SourceFile,
    ctx: Context,
    cls: str,
    at: str,
    found: tuple[SourceFile, cst.ClassDef | None] | None,
) -> NoFix | None:
    """Why the optimizer's class rules a tensor lr out: its own code needs a float, it has no step of its own, or it
    is a torch.optim class not checked with a tensor lr."""
    own = found[1] if found is not None else None
    if found is not None and own is not None:
        own_src = found[0]
        where = "" if own_src is src else f" ({os.path.relpath(own_src.path, ctx.project_root)})"
        hazards = lr_hazards(own_src, own)
        if hazards:
            line, why = hazards[0]
            return NoFix(
                finding,
                f"{cls}'s own code needs a float lr: line {line}{where}: {why}",
                "make that line work with a 0-dim tensor lr (tensor ops, no float()/if on it), "
                "then rerun torchmend; or keep the lr constant while compiled",
            )
        if method(own, "step") is None:
            return NoFix(finding, f"{cls} at {at} has no step method of its own", ADVICE)
    elif cls not in OPTIMIZER_DEFAULT_LR:
        return NoFix(finding, f"torch.optim.{cls} at {at} is not among the optimizers checked with a tensor lr", ADVICE)
    return None


def refuse_call(finding: Finding, src: SourceFile, ctor: cst.Call, cls: str, at: str) -> NoFix | None:
    """Why the optimizer's construction rules a tensor lr out (*args, no params, foreach without capturable)."""
    keywords = {a.keyword.value: a for a in ctor.args if a.keyword is not None}
    double_star = any(a.star == "**" for a in ctor.args)
    if any(a.star == "*" for a in ctor.args) or (double_star and "lr" not in keywords):
        return NoFix(
            finding,
            f"the optimizer call at {at} passes *args or **kwargs (and no lr=): the lr may come from there",
            ADVICE,
        )
    positional = [a for a in ctor.args if a.keyword is None]
    if not positional and "params" not in keywords:
        return NoFix(finding, f"the optimizer call at {at} has no params argument", ADVICE)
    if (
        cls in FOREACH_NEEDS_CAPTURABLE
        and "foreach" in keywords
        and not m.matches(keywords["foreach"].value, m.Name("False") | m.Name("None"))
        and not ("capturable" in keywords and m.matches(keywords["capturable"].value, m.Name("True")))
    ):
        return NoFix(
            finding,
            f"{cls} at {at} sets foreach={src.code(keywords['foreach'].value)}: a tensor lr "
            "then needs capturable=True (parameters on cuda, xpu, hpu or xla)",
            "drop foreach=True, or add capturable=True if the parameters are on such a device, then rerun torchmend",
        )
    return None


def our_writes(finding: Finding, src: SourceFile, ctor: cst.Call, groups: Groups) -> list[LrWrite] | NoFix:
    """This optimizer's lr writes (each to become in place), or why one of them, or one that may be its, rules the
    fix out."""
    writes = lr_writes(src, ctor)
    for w in writes:
        code = src.code(w.node).strip()
        if w.owner == OURS and not w.fixable:
            return NoFix(
                finding,
                f"line {src.line_of(w.node)} writes the lr in a way torchmend cannot rewrite: `{code}`",
                ADVICE,
            )
        if w.owner == UNKNOWN:
            return NoFix(
                finding,
                f"line {src.line_of(w.node)} writes an lr torchmend cannot trace to an "
                f"optimizer (`{code}`); it may be this one, and would put a float back",
                ADVICE,
            )
    ours = [w for w in writes if w.owner == OURS]
    own_lr = 'give each group its own "lr": torch.tensor(...) in its dict, then rerun torchmend'
    if groups.kind == "unknown" and ours:
        return NoFix(
            finding,
            f"the param groups come from `{groups.source}`, which torchmend cannot read: a "
            'group with its own float "lr" would stay a float, and fill_ would fail on it',
            own_lr,
        )
    if groups.shared:
        for w in ours:
            if not uniform(src, w):
                return NoFix(
                    finding,
                    "the param groups share one lr tensor (torch.optim gives every group "
                    f"the same default object), and line {src.line_of(w.node)} writes groups "
                    "differently",
                    own_lr,
                )
        for sched_cls, sched in lr_schedulers(src, ctor):
            if per_group(src, sched_cls, sched):
                return NoFix(
                    finding,
                    f"the param groups may share one lr tensor, and the {sched_cls} at line "
                    f"{src.line_of(sched)} may give them different values",
                    own_lr,
                )
    return ours


def lr_notes(src: SourceFile, ctor: cst.Call, cls: str, double_star: bool) -> list[str]:
    """What the user should know about a tensor lr in this program."""
    notes = ['group["lr"] is now a float32 tensor: use float(group["lr"]) to log it or keep its value']
    if any(
        isinstance(c.func, cst.Attribute)
        and m.matches(c.func.attr, m.Name("load_state_dict"))
        and construction_of(src, c.func.value)[0] is ctor
        for c in src.nodes_in(src.module, cst.Call)
    ):
        notes.append(
            "a checkpoint saved with a float lr restores a float (fill_ then fails): after "
            'load_state_dict, set group["lr"] = torch.tensor(float(group["lr"])) for each group'
        )
    if cls in FOREACH_NEEDS_CAPTURABLE and double_star:
        notes.append(
            f"if the **kwargs of the {cls} call set foreach=True, it raises for a tensor lr unless capturable=True"
        )
    if cls in FOREACH_NEEDS_CAPTURABLE:
        notes.append(f"eager {cls} steps with a tensor lr use the for-loop implementation unless capturable=True")
    notes.append("lr writes in other files are not checked")
    return notes
