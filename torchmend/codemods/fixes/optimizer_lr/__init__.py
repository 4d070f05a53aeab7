"""Make an optimizer's learning rate a tensor and update it in place (TM203).

The optimizer is found from the user's `opt.step()` line (the finding itself is inside torch/optim), then
its construction `torch.optim.X(...)` in this file, then every write to its `group["lr"]` in this file:
the constructor and the writes change together, in one proposal, or not at all.

The package: locate.py finds the optimizer's construction; writes.py the writes to its lr, its param
groups and schedulers; custom.py checks an optimizer class the project defines itself.
"""

from __future__ import annotations

from typing import cast

import libcst as cst

from torchmend.analysis import values
from torchmend.analysis.custom_optimizers import default_lr, optimizer_classdef
from torchmend.analysis.optim_tables import OPTIMIZER_DEFAULT_LR
from torchmend.analysis.optimizers import def_near, optimizer_at, optimizer_class, param_group_key
from torchmend.analysis.source import Context, SourceFile
from torchmend.codemods.base import UNSAFE, Codemod, Invalid, NoFix, Proposal, Result, Valid
from torchmend.codemods.fixes.optimizer_lr.refusals import ADVICE, lr_notes, our_writes, refuse_call, refuse_class
from torchmend.codemods.fixes.optimizer_lr.writes import Swap, add_lr, as_tensor, groups_of, in_place
from torchmend.model import Finding, Where


class TensorLearningRate(Codemod):
    """Make the optimizer's learning rate a tensor, and update it in place.

    What it does:
        TM203: a compiled optimizer step (or a compiled training step that calls `opt.step()`) that recompiles
        because the learning rate is a Python float that a schedule changes.

        The optimizer is found from your `opt.step()` line (or `scaler.step(opt)`, or `step =
        torch.compile(opt.step)`, or a compiled training step that calls `opt.step()`), through its name or
        `self.<name>`, to its `torch.optim.X(...)` call in the same file — or to the construction of an optimizer
        class the project defines itself (a `torch.optim.Optimizer` subclass with its own `step`, such as a Lion- or
        Muon-style optimizer, in the same file or imported from another file of the project; also when the finding
        names that `step`). The lr argument (keyword or positional; the class's default when left out), the "lr" of
        param-group dicts the file spells out, and every write to that optimizer's `group["lr"]` in the file change
        together, in one proposal. torch.optim.lr_scheduler schedulers need no change: in torch 2.13 they write a
        tensor lr in place (`_update_param_group_val` calls fill_). Not fixed, with the reason: an optimizer built
        elsewhere (a parameter, a factory, another module) or not among the torch.optim classes checked with a
        tensor lr (LBFGS, SparseAdam, Adafactor, Muon, other libraries); an optimizer of your own whose methods need
        the lr as a Python number (`float(lr)`, `if lr ...`, `lr > 0`, `range`, `math.*`: the line is named);
        `*args`, or `**kwargs` without an explicit lr; Adam/AdamW with foreach=True but not capturable=True (they
        raise); lr writes it cannot rewrite or attribute (`group.update(lr=...)`, `**=`, a helper that takes the
        group or optimizer as a parameter); lr writes when the groups come from code it cannot read (a group's own
        float "lr" would stay a float); per-group writes or per-group schedules when several groups would share the
        one default lr tensor (torch.optim puts the same default object in every group).

    Why is this bad:
        torch.compile guards on a float hyperparameter's value (`param_groups[0]['lr'] == 0.001`), so each
        new value from a warmup or decay recompiles the step. A 0-dim tensor lr is a graph input instead:
        changing it in place (`fill_`) needs no recompile.

    Example:
        opt = torch.optim.AdamW(model.parameters(), lr=BASE_LR)
        for step in range(steps):
            for group in opt.param_groups:
                group["lr"] = BASE_LR * min(1.0, (step + 1) / WARMUP)
                group["lr"] *= decay

    Fix:
        opt = torch.optim.AdamW(model.parameters(), lr=torch.tensor(BASE_LR))
        for step in range(steps):
            for group in opt.param_groups:
                group["lr"].fill_(BASE_LR * min(1.0, (step + 1) / WARMUP))
                group["lr"].mul_(decay)

    Fix safety:
        Unsafe. The lr becomes a float32 tensor: the compiled float_lr_warmup fixture's final weights
        differ by at most 1.5e-8 (relative 1e-7) from the float run. Reading `group["lr"]` now gives that
        tensor, which changes when the lr does: use `float(group["lr"])` to log or keep a value. A
        checkpoint saved with a float lr restores a float through `load_state_dict`, on which `fill_`
        fails; another library's scheduler that assigns `group["lr"] = value` puts a float back.
    """

    rules = ("TM203",)
    causes = ("TM203",)
    name = "tensor-learning-rate"
    INVALID = (
        # the fixture's pattern: a compiled step, a hand-written warmup writing every group
        Invalid(
            """
            import torch
            BASE = 1e-2
            opt = torch.optim.AdamW(model.parameters(), lr=BASE)

            @torch.compile
            def step():
                opt.step()  # tm: TM203 where=library variable=self.param_groups[0]['lr']

            for i in range(10):
                for group in opt.param_groups:
                    group['lr'] = BASE * i / 10
                step()
            """,
            """
            import torch
            BASE = 1e-2
            opt = torch.optim.AdamW(model.parameters(), lr=torch.tensor(BASE))

            @torch.compile
            def step():
                opt.step()  # tm: TM203 where=library variable=self.param_groups[0]['lr']

            for i in range(10):
                for group in opt.param_groups:
                    group['lr'].fill_(BASE * i / 10)
                step()
            """,
        ),
        # `from torch.optim import SGD`, positional lr, an indexed write and *=, `import torch as t` reused
        Invalid(
            """
            import torch as t
            from torch.optim import SGD

            def train(model):
                opt = SGD(model.parameters(), 0.1)
                for epoch in range(3):
                    opt.param_groups[0]['lr'] = 0.1 / (epoch + 1)
                    opt.step()  # tm: TM203 where=library variable=self.param_groups[0]['lr']
                    opt.param_groups[0]['lr'] *= 0.5
            """,
            """
            import torch as t
            from torch.optim import SGD

            def train(model):
                opt = SGD(model.parameters(), t.tensor(0.1))
                for epoch in range(3):
                    opt.param_groups[0]['lr'].fill_(0.1 / (epoch + 1))
                    opt.step()  # tm: TM203 where=library variable=self.param_groups[0]['lr']
                    opt.param_groups[0]['lr'].mul_(0.5)
            """,
        ),
        # lr left at its default, an lr_scheduler (updates a tensor lr in place), no torch import yet
        Invalid(
            """
            from torch import optim

            opt = optim.Adam(
                net.parameters(),
            )
            sched = optim.lr_scheduler.StepLR(opt, 10)
            opt.step()  # tm: TM203 where=library variable=self.param_groups[0]['lr']
            """,
            """
            from torch import optim
            import torch

            opt = optim.Adam(
                net.parameters(),
                lr=torch.tensor(1e-3),
            )
            sched = optim.lr_scheduler.StepLR(opt, 10)
            opt.step()  # tm: TM203 where=library variable=self.param_groups[0]['lr']
            """,
        ),
        # a trainer class: self.opt, GradScaler.step(self.opt), integer lr made a float
        Invalid(
            """
            import torch

            class Trainer:
                def __init__(self, model):
                    self.opt = torch.optim.RMSprop(model.parameters(), lr=1, momentum=0.9)
                    self.scaler = torch.amp.GradScaler()

                def step(self, lr):
                    self.opt.param_groups[0]['lr'] = lr
                    self.scaler.step(self.opt)  # tm: TM203 where=library variable=self.param_groups[0]['lr']
            """,
            """
            import torch

            class Trainer:
                def __init__(self, model):
                    self.opt = torch.optim.RMSprop(model.parameters(), lr=torch.tensor(1.0), momentum=0.9)
                    self.scaler = torch.amp.GradScaler()

                def step(self, lr):
                    self.opt.param_groups[0]['lr'].fill_(lr)
                    self.scaler.step(self.opt)  # tm: TM203 where=library variable=self.param_groups[0]['lr']
            """,
        ),
    )
    VALID = (
        # already a tensor, written in place
        Valid(
            """
            import torch
            opt = torch.optim.Adam(m.parameters(), lr=torch.tensor(0.01))
            for g in opt.param_groups:
                g['lr'].fill_(0.02)
            opt.step()  # tm: TM203 where=library variable=self.param_groups[0]['lr']
            """,
        ),
        # the optimizer comes from elsewhere
        Valid(
            """
            def train(opt):
                opt.step()  # tm: TM203 where=library variable=self.param_groups[0]['lr']
            """,
        ),
        # Adam with foreach=True raises for a tensor lr unless capturable=True
        Valid(
            """
            import torch
            opt = torch.optim.Adam(m.parameters(), lr=0.01, foreach=True)
            opt.step()  # tm: TM203 where=library variable=self.param_groups[0]['lr']
            """,
        ),
        # a write through a helper's parameter: it may be this optimizer's group, and fill_ would be needed there
        Valid(
            """
            import torch
            opt = torch.optim.SGD(m.parameters(), lr=0.01)

            def set_lr(o, v):
                for g in o.param_groups:
                    g['lr'] = v

            set_lr(opt, 0.1)
            opt.step()  # tm: TM203 where=library variable=self.param_groups[0]['lr']
            """,
        ),
        # several groups would share the default lr tensor, and only group 0 is written
        Valid(
            """
            import torch
            opt = torch.optim.SGD([{'params': a}, {'params': b}], lr=0.01)
            opt.param_groups[0]['lr'] = 0.1
            opt.step()  # tm: TM203 where=library variable=self.param_groups[0]['lr']
            """,
        ),
        # a hyperparameter other than lr
        Valid(
            """
            import torch
            opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)
            opt.step()  # tm: TM203 where=library variable=self.param_groups[0]['momentum']
            """,
        ),
    )

    def propose(self, finding: Finding, ctx: Context) -> Result:
        key = param_group_key(finding.variable)
        if key != "lr":
            return NoFix(
                finding,
                f"only the learning rate is rewritten; the guard is on {finding.variable!r}",
                f"keep {key or 'that value'} constant between steps; Adam and AdamW also accept Tensor "
                "betas (with capturable=True or fused=True)",
            )
        # Where to start looking: the finding's own line when it is yours (a compiled step of yours, or the
        # optimizer's own step method), then the line that called the compiled function.
        places = [(finding.path, finding.line)] if finding.where == Where.PROJECT else []
        places += [(loc.path, loc.line) for loc in (finding.user_frame, finding.call_site) if loc is not None]
        if not places:
            return NoFix(finding, "no line of yours reaches this optimizer step", ADVICE)
        ctor, src, why = None, None, ""
        for path, line in places:
            if not ctx.in_project(path):
                continue
            src = ctx.file(path)
            stmt = src.statement_at(line) or def_near(src, line, finding)
            if stmt is None:
                why = why or f"no statement at line {line}"
                continue
            ctor, reason = optimizer_at(src, stmt, ctx)
            if ctor is not None:
                break
            why = why or reason
        if ctor is None or src is None:
            return NoFix(finding, f"cannot find where the optimizer is built: {why}", ADVICE)
        return self._rewrite(finding, src, ctor, ctx)

    def _rewrite(self, finding: Finding, src: SourceFile, ctor: cst.Call, ctx: Context) -> Result:
        cls = optimizer_class(src, ctor, ctx) or ""
        at = f"line {src.line_of(ctor)}"
        found = optimizer_classdef(src, ctor, ctx)
        own = found[1] if found is not None else None
        refused = refuse_class(finding, src, ctx, cls, at, found) or refuse_call(finding, src, ctor, cls, at)
        if refused is not None:
            return refused
        keywords = {a.keyword.value: a for a in ctor.args if a.keyword is not None}
        double_star = any(a.star == "**" for a in ctor.args)
        positional = [a for a in ctor.args if a.keyword is None]

        replace: dict[cst.CSTNode, cst.CSTNode] = {}
        imports: tuple = ()
        # The constructor: lr argument (or the default), then the "lr" of literal param-group dicts.
        lr_arg = keywords.get("lr") or (positional[1] if len(positional) > 1 else None)
        params = keywords["params"].value if "params" in keywords else positional[0].value
        groups = groups_of(src, params)
        group_swaps: dict[cst.CSTNode, cst.CSTNode] = {}
        for value in groups.lrs:
            if not values(src).is_tensor(value):
                group_swaps[value], imports = as_tensor(src, value)
        ctor_swaps: dict[cst.CSTNode, cst.CSTNode] = {}
        if lr_arg is not None and not values(src).is_tensor(lr_arg.value):
            ctor_swaps[lr_arg.value], imports = as_tensor(src, lr_arg.value)
        if groups.literal is not None and ctor in set(src.ancestors(groups.literal)):
            ctor_swaps.update(group_swaps)  # the groups are spelled out in the call: one rewrite of the call
        elif group_swaps:  # the groups list is built earlier, under a name
            assert groups.literal is not None
            replace[groups.literal] = cast(cst.CSTNode, groups.literal.visit(Swap(group_swaps)))  # swaps its lrs
        # One pass: node identities are lost once a tree is rebuilt.
        # _Swap replaces expressions inside the call (its lr values), never the call itself.
        new_ctor = cast(cst.Call, ctor.visit(Swap(ctor_swaps))) if ctor_swaps else ctor
        if lr_arg is None:
            default = cst.Float(OPTIMIZER_DEFAULT_LR[cls]) if own is None else default_lr(own)
            if default is None:
                return NoFix(finding, f"the optimizer call at {at} passes no lr and {cls} has no default", ADVICE)
            tensor, imports = as_tensor(src, default)
            new_ctor = add_lr(new_ctor, tensor)
        if new_ctor is not ctor:
            replace[ctor] = new_ctor

        # The writes: all of this optimizer's become in place; any other that may be its refuses the fix.
        ours = our_writes(finding, src, ctor, groups)
        if isinstance(ours, NoFix):
            return ours
        for w in ours:
            replace[w.node] = in_place(src, w)
        if not replace:
            return NoFix(finding, "the lr is already a tensor, written in place", skipped=True)

        notes = lr_notes(src, ctor, cls, double_star)
        rewrote = "the lr argument" if ctor in replace else "the lr"
        return Proposal(
            (finding,),
            finding.rule,
            src.path,
            replace=replace,
            imports=imports,
            safety=UNSAFE,
            why=f"make {rewrote} of the {cls} at line {src.line_of(ctor)} a tensor and update it in "
            "place, so a new value does not recompile the optimizer step",
            note="; ".join(notes),
            alternative="keep the lr constant inside the compiled region, or compile only the model "
            "and step the optimizer eagerly",
        )
