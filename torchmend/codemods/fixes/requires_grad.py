"""Skip turning on requires_grad of a tensor while torch.compile traces (TM109)."""

from __future__ import annotations

import libcst as cst

from torchmend.analysis.dynamo_tables import IS_COMPILING
from torchmend.analysis.gating import already_gated, gate
from torchmend.analysis.source import Context, SourceFile
from torchmend.codemods.base import UNSAFE, Codemod, Invalid, NoFix, Proposal, Result, Valid
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
        or module, reported by dynamo as GB0206 "setattr() on Tensor.requires_grad", GB8985 "requires_grad_()
        intermediate leaked as output" (`return torch.zeros_like(q).requires_grad_()`) or GB0225 "tensor creation
        function with requires_grad=True" (`torch.zeros_like(x, requires_grad=self.training)`).

    Why is this bad:
        Dynamo cannot make a tensor of the graph a new autograd leaf: it breaks the graph at the line on
        every call. `requires_grad_(True)` and a factory's `requires_grad=True` break it too.

    Example:
        h = x[:, None]
        h.requires_grad = True  # so that checkpointed layers see an input that needs grad
        return self.convs(h)

    Fix:
        h = x[:, None]
        if not torch.compiler.is_compiling():
            h.requires_grad = True
        return self.convs(h)

        A fresh tensor made a leaf in an expression keeps the expression; the flag is off while compiling:
        `torch.zeros_like(q).requires_grad_(not torch.compiler.is_compiling())`,
        `torch.zeros_like(x, requires_grad=self.training and not torch.compiler.is_compiling())`. Only calls that
        make a new tensor (torch factories, `.new_*`) are rewritten so: on a computed tensor `requires_grad_(False)`
        raises.

    Fix safety:
        Unsafe. In compiled code the tensor no longer needs grad: the gradients of the parameters are the same
        (autograd reaches them through the parameters themselves; a fresh leaf passes no gradient to anything),
        but the tensor's own `.grad` stays None, and an output that depends on it only through frozen parameters,
        or a fresh leaf that was the only path of gradients to the loss, no longer needs grad: backward then
        fails ("element 0 of tensors does not require grad"), verification refuses the change and says why
        (code that relied on that, such as reentrant gradient checkpointing over frozen layers, fails to
        backpropagate). A tensor whose `.grad` the function reads is reported, not rewritten; so is
        `requires_grad = False`.
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
        Invalid(
            """
            import torch

            def empty_chunk(query):
                return torch.zeros_like(query).requires_grad_()  # tm: TM109 gb_id=GB8985
            """,
            """
            import torch

            def empty_chunk(query):
                return torch.zeros_like(query).requires_grad_(not torch.compiler.is_compiling())  # tm: TM109 gb_id=GB8985
            """,
        ),
        Invalid(
            """
            import torch
            from torch import nn

            class Decoder(nn.Module):
                def forward(self, queries):
                    targets = torch.zeros_like(queries, requires_grad=self.training)  # tm: TM109 gb_id=GB0225
                    return self.layers(targets, queries)
            """,
            """
            import torch
            from torch import nn

            class Decoder(nn.Module):
                def forward(self, queries):
                    targets = torch.zeros_like(queries, requires_grad=self.training and not torch.compiler.is_compiling())  # tm: TM109 gb_id=GB0225
                    return self.layers(targets, queries)
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
        # a computed tensor: requires_grad_(False) on it would raise, so it is reported, not rewritten
        Valid(
            """
            import torch

            def scores(q, k):
                return (q @ k.T).requires_grad_()  # tm: TM109 gb_id=GB8985
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
            return self._in_expression(finding, src, stmt)
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

    def _in_expression(self, finding: Finding, src: SourceFile, stmt: cst.BaseStatement | None) -> Result:
        """`torch.zeros_like(q).requires_grad_()` or `torch.zeros_like(x, requires_grad=v)`: a fresh tensor made a
        leaf inside an expression. The flag is switched off under compile (`requires_grad_(not is_compiling())`,
        `requires_grad=v and not is_compiling()`); dynamo accepts both, and eager code is unchanged."""
        calls = src.nodes_in(stmt, cst.Call) if stmt is not None else []
        made = [c for c in calls if isinstance(c.func, cst.Attribute) and c.func.attr.value == "requires_grad_"]
        keyword = [
            (c, a) for c in calls if _fresh(src, c) for a in c.args if a.keyword and a.keyword.value == "requires_grad"
        ]
        if not made and not keyword:
            return NoFix(finding, f"no `requires_grad` assignment at line {finding.line}", _ADVICE)
        gated = [
            c
            for c in calls
            for a in c.args
            if any(src.qualified_names(n.func) & IS_COMPILING for n in src.nodes_in(a, cst.Call))
        ]
        made = [c for c in made if c not in gated]
        keyword = [(c, a) for c, a in keyword if c not in gated]
        if not made and not keyword:
            return NoFix(finding, "the flag is already off under is_compiling()", skipped=True)
        is_compiling, imports = src.torch_expr("compiler.is_compiling")
        off = cst.UnaryOperation(cst.Not(), cst.Call(is_compiling))
        replace: dict[cst.CSTNode, cst.CSTNode] = {}
        for call in made:
            assert isinstance(call.func, cst.Attribute)
            value = call.args[0].value if call.args else None
            if not _fresh(src, call.func.value):
                return NoFix(
                    finding,
                    f"`{src.code(call)}` makes a new autograd leaf of a computed tensor inside compiled code "
                    "(PyTorch's GB8985: a requires_grad_() intermediate returned from the compiled region); only a "
                    "fresh tensor (a torch factory, `.new_*`) is rewritten: on a computed one, turning the flag off "
                    "under compile raises unless it is a leaf",
                    _LEAF_ADVICE,
                )
            if value is not None and not (isinstance(value, cst.Name) and value.value == "True"):
                return NoFix(finding, f"`{src.code(call)}` sets requires_grad to a value that is not True", _ADVICE)
            replace[call] = call.with_changes(args=[cst.Arg(off)])
        for _, arg in keyword:
            if isinstance(arg.value, cst.Name) and arg.value.value == "False":
                continue
            flag: cst.BaseExpression = off
            if not (isinstance(arg.value, cst.Name) and arg.value.value == "True"):
                left = arg.value
                if not isinstance(left, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)):
                    left = left.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
                flag = cst.BooleanOperation(left, cst.And(), off)
            replace[arg] = arg.with_changes(value=flag)
        if not replace:
            return NoFix(finding, "the tensor is made with `requires_grad=False`", _ADVICE)
        target = _assigned_name(stmt)
        fn = src.enclosing(stmt, cst.FunctionDef) if stmt is not None else None
        if (
            target
            and fn is not None
            and any(n.attr.value == "grad" and src.code(n.value) == target for n in src.nodes_in(fn, cst.Attribute))
        ):
            return NoFix(
                finding,
                f"the function reads `{target}.grad`, which needs `{target}` to require grad in compiled code too",
                _ADVICE,
            )
        if target and fn is not None and stmt is not None:
            # `v.requires_grad_(True)` on the same tensor later on (code that sets the flag twice, once for
            # torch.export): it would be the next break; gated in the same change.
            start = src.line_of(stmt)
            for later in src.nodes_in(fn, cst.SimpleStatementLine):
                switch = _switch(later.body[0]) if len(later.body) == 1 else None
                if (
                    switch is not None
                    and src.line_of(later) > start
                    and isinstance(switch[0], cst.Name)
                    and switch[0].value == target
                    and (switch[1] is None or (isinstance(switch[1], cst.Name) and switch[1].value == "True"))
                    and not already_gated(src, later)
                ):
                    replace[later], _ = gate(src, later)
        made_where = (
            "is returned"
            if isinstance(stmt, cst.SimpleStatementLine) and any(isinstance(s, cst.Return) for s in stmt.body)
            else "is used"
        )
        return Proposal(
            (finding,),
            finding.rule,
            src.path,
            replace=replace,
            imports=imports,
            safety=UNSAFE,
            why="make the fresh tensor without requires_grad while torch.compile traces (dynamo cannot make an "
            "autograd leaf in the graph), so the graph does not break; eager code is unchanged",
            note=f"under torch.compile the new tensor {made_where} without requires_grad: nothing computes a "
            "gradient from a fresh leaf, so losses and parameter gradients are unchanged where its result still meets "
            "a tensor that requires grad; its own `.grad` stays None, and where it was the only path of gradients to "
            "the loss, backward fails (verification refuses it and says so)",
            shape=OFF_UNDER_COMPILE,
        )


OFF_UNDER_COMPILE = "requires-grad-off-under-compile"

# Calls that return a new tensor nothing computed (an autograd leaf): switching requires_grad off on one is always
# allowed, on any other tensor it may raise ("you can only change requires_grad flags of leaf variables").
_FRESH_FUNCTIONS = {
    f"torch.{n}"
    for n in (
        "zeros ones empty full rand randn randint arange linspace logspace eye tensor scalar_tensor zeros_like "
        "ones_like empty_like full_like rand_like randn_like randint_like"
    ).split()
}
_FRESH_METHODS = {"new_zeros", "new_ones", "new_empty", "new_full", "new_tensor"}


def _fresh(src: SourceFile, node: cst.CSTNode) -> bool:
    """Whether `node` is a call that makes a fresh tensor: a torch factory or a `.new_*` method."""
    if not isinstance(node, cst.Call):
        return False
    if src.qualified_names(node.func) & _FRESH_FUNCTIONS:
        return True
    return isinstance(node.func, cst.Attribute) and node.func.attr.value in _FRESH_METHODS


def _assigned_name(stmt: cst.BaseStatement | None) -> str | None:
    if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1:
        small = stmt.body[0]
        if isinstance(small, cst.Assign) and len(small.targets) == 1:
            target = small.targets[0].target
            if isinstance(target, cst.Name):
                return target.value
    return None
