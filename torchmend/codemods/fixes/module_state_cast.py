"""Cast a module's buffer into a local in forward instead of assigning the cast back to the module (TM199, GB4841)."""

from __future__ import annotations

import libcst as cst

from torchmend import rules
from torchmend.analysis.source import Context, SourceFile
from torchmend.codemods.base import SAFE, UNSAFE, Codemod, Invalid, NoFix, Proposal, Result, Valid
from torchmend.model import Finding, Where

# Tensor and Module methods that give the same values in another dtype or on another device.
_CASTS = frozenset({"to", "float", "half", "double", "bfloat16", "type", "cuda", "cpu"})

_BUFFER_ADVICE = (
    "a tensor is assigned to a module attribute inside forward (`self.buf = ...`): nn.Module.__setattr__ then "
    "re-registers the buffer, which dynamo cannot trace; keep the new tensor in a local variable, or move the "
    "assignment out of forward (cast the model once, before torch.compile)"
)


def _other(finding: Finding) -> NoFix:
    """What every other TM199 gets: the advice of its GB id (and library function) when there is one, else the rule's."""
    rule = rules.BY_CODE["TM199"]
    advice = rules.gb_advice(finding.gb_id, finding.function)
    if advice:
        return NoFix(finding, f"no source-level fix for TM199 ({rule.name}, PyTorch's {finding.gb_id})", advice)
    return NoFix(finding, f"no source-level fix for TM199 ({rule.name})", rule.advice)


def _self_attr(node: cst.BaseExpression) -> str | None:
    """`self.name` -> "name"."""
    if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == "self":
        return node.attr.value
    return None


def buffer_cast(finding: Finding, ctx: Context) -> Result | None:
    """The fix of a break inside `nn.Module.register_buffer` reached from a line of the project (the buffer cast
    assigned back in forward), whatever the break's GB id: GB4841 on torch 2.13, GB0170 (data-dependent
    branching at `if persistent:`, which TM103 files) on 2.11. None when the break is not there."""
    frame = finding.user_frame
    if finding.where == Where.PROJECT or finding.function != "register_buffer" or frame is None:
        return None
    src = ctx.file(frame.path)
    return BufferCastToLocal._rewrite(finding, src, src.statement_at(frame.line))


class BufferCastToLocal(Codemod):
    """Keep a buffer's cast in a local variable instead of assigning it back to the module in forward.

    What it does:
        TM199 (a graph break of no other rule), one shape of it, dispatched on its GB id: PyTorch's GB4841
        "Unsupported python_type() call" inside `nn.Module.register_buffer`, reached from a statement of forward
        that assigns a buffer its own cast, `self.table = self.table.to(device=x.device, dtype=x.dtype)` (or
        `.float()`, `.half()`, `.cuda()` ...).

    Why is this bad:
        Assigning a tensor to a name the module holds as a buffer goes through nn.Module.__setattr__, which
        registers the buffer again; dynamo cannot trace that and breaks the graph there on every call.

    Example:
        self.table = self.table.to(device=x.device, dtype=x.dtype)
        h = x + self.table[:n]

    Fix:
        table = self.table.to(device=x.device, dtype=x.dtype)
        h = x + table[:n]

    Fix safety:
        Safe when nothing else in the class reads the attribute: forward computes with the same values, cast on
        every call instead of once (a cast to what the tensor already is returns it unchanged). Unsafe when another
        method reads it: it now finds the buffer as it was, in its old dtype or device. Offered only when the
        assignment is a statement of forward's own block (not inside an `if` or a loop) and forward assigns the
        attribute nowhere else; every later read of `self.<name>` in forward reads the local.
    """

    gb_ids = ("GB4841",)
    name = "cast-buffer-to-local"
    INVALID = (
        Invalid(
            """
            import torch
            from torch import nn

            class Embed(nn.Module):
                def forward(self, ids):
                    x = self.tok(ids)
                    self.table = self.table.to(device=x.device, dtype=x.dtype)  # tm: TM199 gb_id=GB4841 where=library function=register_buffer
                    return x + self.table[: ids.shape[1]]
            """,
            """
            import torch
            from torch import nn

            class Embed(nn.Module):
                def forward(self, ids):
                    x = self.tok(ids)
                    table = self.table.to(device=x.device, dtype=x.dtype)  # tm: TM199 gb_id=GB4841 where=library function=register_buffer
                    return x + table[: ids.shape[1]]
            """,
        ),
    )
    VALID = (
        # the assignment sits in an `if`: later reads may see either tensor
        Valid(
            """
            import torch
            from torch import nn

            class Embed(nn.Module):
                def forward(self, x):
                    if x.is_cuda:
                        self.table = self.table.cuda()  # tm: TM199 gb_id=GB4841 where=library function=register_buffer
                    return x + self.table
            """,
        ),
    )

    def propose(self, finding: Finding, ctx: Context) -> Result:
        if finding.gb_id != "GB4841":
            return _other(finding)
        return buffer_cast(finding, ctx) or _other(finding)

    @staticmethod
    def _rewrite(finding: Finding, src: SourceFile, stmt: cst.BaseStatement | None) -> Result:
        shape = "`self.name = self.name.<cast>(...)`"
        if not (
            isinstance(stmt, cst.SimpleStatementLine)
            and len(stmt.body) == 1
            and isinstance(stmt.body[0], cst.Assign)
            and len(stmt.body[0].targets) == 1
        ):
            return NoFix(finding, f"the line is not {shape}", _BUFFER_ADVICE)
        assign = stmt.body[0]
        attr = _self_attr(assign.targets[0].target)
        value = assign.value
        if not (
            attr is not None
            and isinstance(value, cst.Call)
            and isinstance(value.func, cst.Attribute)
            and value.func.attr.value in _CASTS
            and _self_attr(value.func.value) == attr
        ):
            return NoFix(finding, f"the line is not {shape}", _BUFFER_ADVICE)
        fn = src.enclosing(stmt, cst.FunctionDef)
        if fn is None or not isinstance(fn.body, cst.IndentedBlock) or stmt not in fn.body.body:
            return NoFix(
                finding,
                "the assignment is not a statement of the function's own block (it sits in an if or a loop)",
                _BUFFER_ADVICE,
            )
        reads = [
            n for n in src.nodes_in(fn, cst.Attribute) if _self_attr(n) == attr and n is not assign.targets[0].target
        ]
        targets = [t.target for a in src.nodes_in(fn, cst.Assign) if a is not assign for t in a.targets]
        targets += [a.target for a in src.nodes_in(fn, cst.AugAssign)]
        targets += [a.target for a in src.nodes_in(fn, cst.AnnAssign)]
        writes = [t for t in targets if _self_attr(t) == attr]
        if writes:
            return NoFix(finding, f"forward assigns `self.{attr}` more than once", _BUFFER_ADVICE)
        attrs = {id(a.attr) for a in src.nodes_in(fn, cst.Attribute)}
        names = {n.value for n in src.nodes_in(fn, cst.Name) if id(n) not in attrs}
        local = next(n for n in (attr.lstrip("_") or attr, f"{attr}_cast", f"{attr}_local") if n not in names)
        start = src.line_of(stmt)
        later = [n for n in reads if src.line_of(n) > start]
        replace: dict[cst.CSTNode, cst.CSTNode] = {n: cst.Name(local) for n in later}
        replace[assign.targets[0].target] = cst.Name(local)
        cls = src.enclosing(fn, cst.ClassDef)
        assigned = (
            {id(t.target) for a in src.nodes_in(cls, cst.Assign) for t in a.targets} if cls is not None else set()
        )
        elsewhere = cls is not None and any(
            _self_attr(n) == attr and id(n) not in assigned and src.enclosing(n, cst.FunctionDef) is not fn
            for n in src.nodes_in(cls, cst.Attribute)
        )
        note = f"the module's `{attr}` keeps its own dtype and device; forward casts it on every call"
        if elsewhere:
            note += f", and the other methods of the class that read `self.{attr}` find it uncast"
        return Proposal(
            (finding,),
            finding.rule,
            src.path,
            replace=replace,
            safety=UNSAFE if elsewhere else SAFE,
            why="keep the cast buffer in a local instead of registering it on the module again in forward "
            "(dynamo cannot trace nn.Module.__setattr__ of a buffer), so the graph does not break",
            note=note,
        )
