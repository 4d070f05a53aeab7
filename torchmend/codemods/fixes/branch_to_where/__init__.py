"""Rewrite an `if` on a tensor into torch.where (or torch.cond) so the graph does not break (TM103).

The package: test.py reads the test (Python part, tensor mask) and what computing a branch not taken risks;
align.py turns branches into aligned operations; where.py builds the torch.where statements; cond.py the
torch.cond functions.
"""

from __future__ import annotations

import libcst as cst

from torchmend.analysis import values
from torchmend.analysis.source import Context, SourceFile
from torchmend.codemods.base import SAFE, UNSAFE, Codemod, Invalid, NoFix, Proposal, Result, Valid
from torchmend.codemods.fixes.branch_to_where.align import chain_start, in_place, next_statement
from torchmend.codemods.fixes.branch_to_where.cond import cond_fix
from torchmend.codemods.fixes.branch_to_where.condition import (
    ASSERT_ADVICE,
    COND_ADVICE,
    WHILE_ADVICE,
    NeedsCond,
    Unfixable,
    all_masks,
    bool_operands,
    constant,
    hazards_of,
    is_where,
    mask_of,
    short,
    split_test,
    strip,
)
from torchmend.codemods.fixes.branch_to_where.layerdrop import (
    continue_skip,
    flag_skip,
    only_continue,
    random_draw,
    random_skip,
    random_stream_proposal,
)
from torchmend.codemods.fixes.branch_to_where.where import Plan, proposal, where_call, where_fix
from torchmend.codemods.fixes.mask_fast_path import mask_fast_path
from torchmend.codemods.fixes.module_state_cast import buffer_cast
from torchmend.model import Finding, Where

# --- the codemod ---------------------------------------------------------------------------------------------


class BranchToWhere(Codemod):
    """Turn a Python `if` on a tensor into `torch.where`.

    What it does:
        TM103: an `if`/`elif` (or `a if c else b`, or `c1 and c2` as a value) whose test is a tensor, in a
        torch.compile'd function or module.

        A mask's fast path (`if not padding_mask.any(): padding_mask = None`, `if torch.all(mask == 1): return
        None`) is not turned into torch.where: its test gets `not torch.compiler.is_compiling() and` in front, so
        compiled code always takes the general path with the mask (fixes/mask_fast_path.py; unsafe: the general
        path must compute the same with a mask that masks nothing, which the verified re-run checks).

        A break torch 2.11 files inside `nn.Module.register_buffer` (`if persistent:`), reached from
        `self.buf = self.buf.to(...)` in forward, gets the fix of that cast (fixes/module_state_cast.py: the cast
        kept in a local), as torch 2.13's GB4841 there does.

        A LayerDrop skip, a test on a random draw (`skip = torch.rand([]) < p; if not skip: h = layer(h)`, or
        `if torch.rand([]) < p: continue` before `h = layer(h)`), becomes `h = torch.where(skip, h, layer(h))`
        (fixes/branch_to_where/layerdrop.py): a change of the random stream, applied only with
        `--allow-random-stream` and verified in distribution over several seeds.

    Why is this bad:
        `if` needs a Python bool, and a tensor's value is not known while dynamo traces: it ends the graph
        at the `if`, runs the test eagerly, and compiles what follows separately for each outcome (a graph
        break on every call).

    Example:
        out = self.fc(x)
        if out.abs().max() > 10.0:
            out = out / 10.0

    Fix:
        out = self.fc(x)
        out = torch.where(out.abs().max() > 10.0, out / 10.0, out)

    Fix safety:
        Safe when the branches only compute harmless values, unsafe otherwise. torch.where computes every
        branch and picks one, which is exact for arithmetic, division by a non-zero constant and known
        element-wise functions. It is unsafe when the branch not taken can give inf/nan or raise (division
        by a tensor, log, sqrt, pow with a non-constant exponent, calls torchmend cannot see into): its
        value is discarded but its gradient is not, and 0 * inf = nan. Also unsafe: `h *= 0.5` (in place
        becomes a new tensor), names that only ever hold Python numbers (they become 0-d tensors), and
        branches with loops, which become torch.cond functions (exact, but torch.cond raises unless both
        branches return one tensor of the same shape and dtype). torch.where broadcasts and promotes, so
        the branches must give the same shape and dtype. An `if` that prints, raises, returns in one branch
        only or sets a name in one branch only is reported, not rewritten; so is a `while` on a tensor.
        A LayerDrop rewrite is neither: its safety is `random-stream` (the skip keeps its probability, the layer
        runs on every call, its dropout draws change the random stream), so only `--allow-random-stream` applies
        it, never `--unsafe-fixes` alone.
    """

    rules = ("TM103",)
    name = "branch-to-where"
    INVALID = (
        # the reference case: an if without else updating a name
        Invalid(
            """
            import torch

            def f(out):
                if out.abs().max() > 10.0:  # tm: TM103
                    out = out / 10.0
                return out
            """,
            """
            import torch

            def f(out):
                out = torch.where(out.abs().max() > 10.0, out / 10.0, out)  # tm: TM103
                return out
            """,
        ),
        # if/else setting the same name; torch imported as t
        Invalid(
            """
            import torch as t

            def f(x):
                # pick a scale
                if x.mean() > 0:  # tm: TM103
                    y = x * 2
                else:
                    y = -x
                return y
            """,
            """
            import torch as t

            def f(x):
                # pick a scale
                y = t.where(x.mean() > 0, x * 2, -x)  # tm: TM103
                return y
            """,
        ),
        # several statements, the second reading the first: the condition is evaluated once
        Invalid(
            """
            import torch

            def f(h, g):
                if h.sum() > 0:  # tm: TM103
                    h = h * 0.5
                    g = g + h
                return h, g
            """,
            """
            import torch

            def f(h, g):
                cond = h.sum() > 0  # tm: TM103
                h = torch.where(cond, h * 0.5, h)
                g = torch.where(cond, g + h, g)
                return h, g
            """,
        ),
        # both branches return
        Invalid(
            """
            import torch

            def f(x):
                if x.max() > 1:  # tm: TM103
                    return x / 2
                else:
                    return x
            """,
            """
            import torch

            def f(x):
                return torch.where(x.max() > 1, x / 2, x)  # tm: TM103
            """,
        ),
        # and / not become & / ~; a conditional expression
        Invalid(
            """
            import torch

            def f(x):
                y = x * 2 if x.min() > 0 and not x.isnan().any() else x  # tm: TM103
                return y
            """,
            """
            import torch

            def f(x):
                y = torch.where((x.min() > 0) & ~x.isnan().any(), x * 2, x)  # tm: TM103
                return y
            """,
        ),
        # torch 2.11 files a buffer cast assigned back in forward as a branch inside nn.Module.register_buffer
        # (`if persistent:`, GB0170): the cast is kept in a local (fixes/module_state_cast.py)
        Invalid(
            """
            import torch
            from torch import nn

            class Embed(nn.Module):
                def forward(self, ids):
                    x = self.tok(ids)
                    self.table = self.table.to(dtype=x.dtype)  # tm: TM103 gb_id=GB0170 where=library function=register_buffer
                    return x + self.table[: ids.shape[1]]
            """,
            """
            import torch
            from torch import nn

            class Embed(nn.Module):
                def forward(self, ids):
                    x = self.tok(ids)
                    table = self.table.to(dtype=x.dtype)  # tm: TM103 gb_id=GB0170 where=library function=register_buffer
                    return x + table[: ids.shape[1]]
            """,
        ),
        # a mask's fast path: skipped under compile, not turned into torch.where
        Invalid(
            """
            import torch

            def padding_mask(ids, pad):
                mask = ids.eq(pad)
                if not mask.any():  # tm: TM103
                    mask = None
                return mask
            """,
            """
            import torch

            def padding_mask(ids, pad):
                mask = ids.eq(pad)
                if not torch.compiler.is_compiling() and not mask.any():  # tm: TM103
                    mask = None
                return mask
            """,
        ),
    )
    VALID = (
        Valid(
            """
            import torch

            def f(out):
                out = torch.where(out.max() > 1, out / 2, out)  # tm: TM103
                return out
            """,
        ),
        # a print in the branch: reported, not rewritten
        Valid(
            """
            import torch

            def f(x):
                if x.sum() > 0:  # tm: TM103
                    print('positive')
                return x
            """,
        ),
        # a name set in one branch only and used after
        Valid(
            """
            import torch

            def f(x):
                if x.sum() > 0:  # tm: TM103
                    y = x
                return y
            """,
        ),
        # a while loop on a tensor
        Valid(
            """
            import torch

            def f(x):
                while x.norm() > 1:  # tm: TM103
                    x = x / 2
                return x
            """,
        ),
    )

    def propose(self, finding: Finding, ctx: Context) -> Result:
        cast = buffer_cast(finding, ctx)  # torch 2.11 files a buffer cast in forward as a branch in register_buffer
        if cast is not None:
            return cast
        if finding.where != Where.PROJECT:
            return NoFix(
                finding,
                f"the `if` is in {finding.file}, outside your project; torchmend does not edit libraries",
                "call that function outside the compiled region, or wrap the call in a "
                "function decorated with torch.compiler.disable",
            )
        src = ctx.file(finding.path)
        stmt = src.statement_at(finding.line)
        try:
            if isinstance(stmt, cst.While):
                return NoFix(
                    finding,
                    "a `while` on a tensor runs a number of times only the data decides; "
                    "torch.where cannot repeat work and torch.cond cannot loop",
                    WHILE_ADVICE,
                )
            if isinstance(stmt, cst.If):
                return self._if(finding, src, chain_start(src, stmt))
            if isinstance(stmt, cst.SimpleStatementLine):
                return self._line(finding, src, stmt)
        except Unfixable as e:
            return NoFix(finding, e.reason, e.advice)
        kind = type(stmt).__name__ if stmt is not None else "no statement"
        return NoFix(
            finding,
            f"line {finding.line} is not an `if` ({kind}); torchmend rewrites `if`/`elif` and `a if c else b` only",
            COND_ADVICE,
        )

    # --- `if` statements ---

    def _if(self, finding: Finding, src: SourceFile, node: cst.If) -> Result:
        fast = mask_fast_path(finding, src, node)  # `if not mask.any(): mask = None` (fixes/mask_fast_path.py)
        if fast is not None:
            return fast
        random = random_skip(src, node.test)
        if random is not None:
            return self._random_skip(finding, src, node, random)
        return self._if_tensor(finding, src, node)

    def _random_skip(self, finding: Finding, src: SourceFile, node: cst.If, refusal: Unfixable) -> Result:
        """A LayerDrop skip: the torch.where rewrite as a RANDOM_STREAM change (layerdrop.py), else the refusal."""
        draw = random_draw(src, node.test)
        drawn = short(draw) if draw is not None else "a random draw"
        skip = continue_skip(finding, src, node, drawn)
        if isinstance(skip, Proposal):
            return skip
        if isinstance(skip, str) and only_continue(node.body):  # the `continue` form: why its rewrite does not apply
            raise Unfixable(
                f"a random skip drawn by `{drawn}` (LayerDrop) that `continue`s: {skip}; torchmend picks the layer's "
                "result with torch.where only where plain `name = value` assignments follow the `continue`",
                refusal.advice,
            )
        try:
            fix = self._if_tensor(finding, src, node)
        except Unfixable:
            raise refusal from None
        if isinstance(fix, Proposal) and node.orelse is None and not src.nodes_in(node.body, cst.Call):
            # `if r < p: to_drop = True`: no code is skipped, so torch.where computes exactly what the `if` did
            # with the same draws; but alone it only moves the break to the flag's own `if not to_drop:`, the
            # LayerDrop skip, so both become one random-stream change where that `if` has the known shape
            both = flag_skip(finding, src, node, fix, drawn)
            if isinstance(both, str):
                raise Unfixable(f"{both} (a random skip drawn by `{drawn}`)", refusal.advice)
            return both or fix
        stream = random_stream_proposal(src, fix, drawn) if isinstance(fix, Proposal) else None
        if stream is None:
            raise refusal
        return stream

    def _if_tensor(self, finding: Finding, src: SourceFile, node: cst.If) -> Result:
        for small in src.nodes_in(node, (cst.Assign, cst.Return)):
            value = small.value if isinstance(small, (cst.Assign, cst.Return)) else None
            if isinstance(value, cst.Name) and value.value == "None":
                raise Unfixable(
                    f"a branch sets None (line {src.line_of(small)}): torch.where and torch.cond pick between tensors",
                    COND_ADVICE,
                )
        python_part, tensor_test = split_test(src, node.test)
        try:
            return where_fix(finding, src, node, python_part, tensor_test)
        except NeedsCond as e:
            try:
                return cond_fix(finding, src, node, python_part, tensor_test)
            except Unfixable as why_not:
                raise Unfixable(
                    f"{e.reason}, and torch.cond does not apply: {why_not.reason}", why_not.advice or e.advice
                ) from None

    # --- a simple statement: `a if c else b`, or already rewritten ---

    def _line(self, finding: Finding, src: SourceFile, stmt: cst.SimpleStatementLine) -> Result:
        if is_where(src, stmt) or self._condition_temp(src, stmt):
            return NoFix(finding, "already uses torch.where", skipped=True)
        if any(isinstance(s, cst.Assert) for s in stmt.body):
            return NoFix(finding, "an `assert` on a tensor needs its value in Python", ASSERT_ADVICE)
        ifexps = [e for e in src.nodes_in(stmt, cst.IfExp) if not values(src).is_python(e.test)]
        boolops = [
            e
            for e in src.nodes_in(stmt, cst.BooleanOperation)
            if not isinstance(src.parents.get(e), cst.BooleanOperation) and all_masks(src, e)
        ]
        if not ifexps and len(boolops) == 1:
            return self._bool_operation(finding, src, boolops[0])
        if len(ifexps) != 1:
            why = "several conditional expressions" if ifexps else "no `if`"
            return NoFix(
                finding,
                f"line {finding.line} has {why}; torchmend cannot tell which value is tested (an "
                "`and`/`or` on tensors, bool(), a comprehension filter?)",
                COND_ADVICE,
            )
        e = ifexps[0]
        assert isinstance(e, cst.IfExp)
        random = random_skip(src, e.test)
        if random is not None:
            raise random
        problem = in_place(src, e)
        if problem:
            raise Unfixable(problem)
        mask = mask_of(src, e.test, trusted=True)
        where, imports = src.torch_expr("where")
        call = where_call(where, strip(mask.expr), strip(e.body), strip(e.orelse)).with_changes(
            lpar=e.lpar, rpar=e.rpar
        )
        notes = (
            ["the result becomes a 0-d tensor instead of a Python number"]
            if (constant(e.body) is not None and constant(e.orelse) is not None)
            else []
        )
        plan = Plan([], notes, hazards_of(src, e.body) + hazards_of(src, e.orelse))
        return proposal(finding, src, {e: call}, imports, plan, short(e.test))

    def _bool_operation(self, finding: Finding, src: SourceFile, e: cst.BooleanOperation) -> Result:
        """`a > 0 and b > 0` as a value: `and` calls bool() on `a > 0`; `&` gives the same boolean tensor."""
        combined = mask_of(src, e, trusted=False).expr
        right = [h for x in bool_operands(e)[1:] for h in hazards_of(src, x)]
        notes = (
            [f"`&`/`|` computes every operand, where `and`/`or` stopped early: {'; '.join(right[:3])}"] if right else []
        )
        return Proposal(
            (finding,),
            finding.rule,
            src.path,
            replace={e: combined},
            safety=UNSAFE if notes else SAFE,
            why="combine the tensor tests with `&`/`|` (they stay in the graph) instead of `and`/`or` "
            "(they call bool() on a tensor)",
            note="; ".join(notes),
        )

    @staticmethod
    def _condition_temp(src: SourceFile, stmt: cst.SimpleStatementLine) -> bool:
        """`cond = <test>` that a later torch.where of the same block takes as its condition."""
        if len(stmt.body) != 1 or not isinstance(stmt.body[0], cst.Assign):
            return False
        target = stmt.body[0].targets[0].target
        if not isinstance(target, cst.Name):
            return False
        nxt = next_statement(src, stmt)
        while nxt is not None:
            for call in src.nodes_in(nxt, cst.Call):
                if (
                    src.is_qualified(call.func, "torch.where")
                    and call.args
                    and isinstance(call.args[0].value, cst.Name)
                    and call.args[0].value.value == target.value
                ):
                    return True
            nxt = next_statement(src, nxt)
        return False
