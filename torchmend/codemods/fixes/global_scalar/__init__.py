"""Make a changing global or closure number a tensor where it is created, updated in place (TM206)."""

from __future__ import annotations

from typing import cast

import libcst as cst
from libcst.metadata import Assignment

from torchmend.analysis import binding_statement, functions_for, is_tensor_construction, python_use, reads, referents
from torchmend.analysis import match as m
from torchmend.analysis.source import Context, SourceFile
from torchmend.codemods.base import UNSAFE, Answer, Codemod, Delegate, Invalid, NoFix, Proposal, Valid
from torchmend.codemods.fixes.global_scalar.bindings import (
    as_float,
    how_bound,
    inside,
    maybe_float,
    number_like,
    scope_body,
    surely_float,
    top_level,
)
from torchmend.codemods.fixes.scalar_argument.wrapped import STAR_ADVICE, STAR_WHY, star_parameter
from torchmend.model import Finding


class GlobalScalar(Codemod):
    """Make a changing global or closure number a tensor, updated in place.

    What it does:
        TM206 (and a TM202 whose variable turns out to be a global or a closure variable): a Python
        float or int defined outside the compiled function, read inside it, and reassigned by the
        training loop (a loss scale, a warm-up factor).

    Why is this bad:
        Dynamo bakes the number into the graph and guards on its value (`G['LOSS_SCALE'] == 1.0`): every
        new value fails the guard and recompiles, until the recompile limit sends the function back to
        eager. A tensor is a graph input instead: its value can change without a recompile.

    Example:
        LOSS_SCALE = 1.0

        @torch.compile
        def scaled_loss(pred, y):
            return F.mse_loss(pred, y) * LOSS_SCALE

        for step in range(steps):
            LOSS_SCALE = 1.0 + 0.05 * step

    Fix:
        LOSS_SCALE = torch.tensor(1.0)
        ...
        for step in range(steps):
            LOSS_SCALE.fill_(1.0 + 0.05 * step)

    Fix safety:
        Unsafe: the variable is now a float32 (or int64) tensor on the CPU. Code outside the compiled
        function reads a tensor (arithmetic, comparisons and formatting still work; `json.dumps` or
        `isinstance(x, float)` do not), and an in-place update between a forward and its backward that
        saved the tensor raises. Not offered when the compiled code uses the number in control flow or
        as a size or index, or when torchmend cannot tell where the variable is first created.
    """

    rules = ("TM206",)
    name = "global-scalar-to-tensor"
    delegates_to = ("TM202",)  # a "global" that is the compiled function's own parameter: wrapped at its call sites
    INVALID = (
        # a global, reassigned in main() under `global`
        Invalid(
            """
            import torch

            SCALE = 1.0

            @torch.compile  # tm-compiled
            def f(x):
                return x * SCALE  # tm: TM206 variable=SCALE

            def main():
                global SCALE
                for step in range(10):
                    SCALE = 1.0 + 0.1 * step  # note
                    f(torch.ones(2))
            """,
            """
            import torch

            SCALE = torch.tensor(1.0)

            @torch.compile  # tm-compiled
            def f(x):
                return x * SCALE  # tm: TM206 variable=SCALE

            def main():
                global SCALE
                for step in range(10):
                    SCALE.fill_(1.0 + 0.1 * step)  # note
                    f(torch.ones(2))
            """,
        ),
        # a closure variable; `import torch as t` reused; an augmented assignment stays (in place on a tensor)
        Invalid(
            """
            import torch as t

            def main():
                warm = 0

                @t.compile  # tm-compiled
                def f(x):
                    return x * warm  # tm: TM202 variable=warm

                for step in range(10):
                    warm = step / 10
                    f(t.ones(2))
                    warm += 1
            """,
            """
            import torch as t

            def main():
                warm = t.tensor(0.0)

                @t.compile  # tm-compiled
                def f(x):
                    return x * warm  # tm: TM202 variable=warm

                for step in range(10):
                    warm.fill_(step / 10)
                    f(t.ones(2))
                    warm += 1
            """,
        ),
    )
    VALID = (
        # already a tensor updated in place
        Valid(
            """
            import torch

            SCALE = torch.tensor(1.0)

            @torch.compile
            def f(x):
                return x * SCALE  # tm: TM206 variable=SCALE

            def main():
                for step in range(10):
                    SCALE.fill_(step)
                    f(torch.ones(2))
            """,
        ),
        # used in control flow inside the compiled function: a tensor there would break the graph
        Valid(
            """
            import torch

            SCALE = 1.0

            @torch.compile
            def f(x):
                if SCALE > 1:  # tm: TM206 variable=SCALE
                    x = x * 2
                return x

            def main():
                global SCALE
                for step in range(10):
                    SCALE = step
                    f(torch.ones(2))
            """,
        ),
        # first created inside the loop: no single place to create the tensor
        Valid(
            """
            import torch

            def main():
                @torch.compile
                def f(x):
                    return x * warm  # tm: TM206 variable=warm
                for step in range(10):
                    warm = step / 10
                    f(torch.ones(2))
            """,
        ),
        # imported from another module
        Valid(
            """
            import torch
            from config import SCALE

            @torch.compile
            def f(x):
                return x * SCALE  # tm: TM206 variable=SCALE
            """,
        ),
    )

    def propose(self, finding: Finding, ctx: Context) -> Answer:
        name = finding.variable or ""
        if not name.isidentifier():
            return NoFix(
                finding,
                f"`{name}` is not a plain global or closure variable",
                "make it a tensor where it is stored (`torch.tensor(v)`) and update it with `.fill_(v)`",
            )
        src = ctx.file(finding.path)
        fns = functions_for(src, finding)
        if not fns:
            return NoFix(finding, f"line {finding.line} is not inside a function (a `def`) torchmend can follow")
        stmt = src.statement_at(finding.line)
        found = reads(src, stmt, name) if stmt is not None else []
        fn = next((f for f in fns if not found or any(f in set(src.ancestors(r)) for r in found)), None)
        if not found and fn is not None:
            found = reads(src, fn, name)
        if fn is None or not found:
            return NoFix(finding, f"no read of `{name}` at line {finding.line}")
        bindings: set[Assignment] = set()
        for r in found:
            bindings |= referents(src, r)
        if not bindings:
            return NoFix(finding, f"torchmend cannot find where `{name}` is assigned")
        return self._fix(finding, ctx, src, fn, name, found, bindings)

    def _fix(
        self,
        finding: Finding,
        ctx: Context,
        src: SourceFile,
        fn: cst.FunctionDef,
        name: str,
        found: list[cst.Name],
        bindings: set[Assignment],
    ) -> Answer:
        advice = f"create it once as `{name} = torch.tensor(v)` and update it with `{name}.fill_(v)`"
        statements: list[tuple[Assignment, cst.Assign | cst.AnnAssign | cst.AugAssign]] = []
        for b in sorted(bindings, key=lambda b: _pos(src, b.node)):
            stmt = binding_statement(src, b)
            if stmt is None:
                how = how_bound(src, b)
                owner = src.enclosing(b.node, cst.FunctionDef)
                if isinstance(b.node, cst.Param) and isinstance(owner, cst.FunctionDef):
                    star = (fn.params.star_arg, fn.params.star_kwarg)
                    if owner is fn and any(b.node is p for p in star):  # the packed `*args` itself, not a number
                        return NoFix(finding, f"`{name}` is {star_parameter([fn], name)}: {STAR_WHY}", STAR_ADVICE)
                    if owner is fn:  # an argument after all: wrap it at the call sites, bound to the parameter
                        return Delegate(finding, "TM202")
                    return NoFix(
                        finding,
                        f"`{name}` is a parameter of {owner.name.value}(), which the compiled "
                        "function closes over: each call binds a new number",
                        f"pass a tensor when calling {owner.name.value}(), or pass `{name}` to the compiled "
                        "function as a tensor argument",
                    )
                if isinstance(b.node, (cst.Import, cst.ImportFrom)):
                    return NoFix(
                        finding,
                        f"`{name}` is imported from another module: torchmend does not follow it there",
                        f"in the module that defines it, {advice}",
                    )
                line = _pos(src, b.node)[0]
                return NoFix(
                    finding,
                    f"`{name}` is bound by {how} at line {line}, which cannot become an in-place tensor update",
                    advice,
                )
            statements.append((b, stmt))
        body = scope_body(src, statements[0][0])
        if body is None:
            return NoFix(finding, f"`{name}` is a class attribute", advice)
        local = [(b, s) for b, s in statements if inside(src, s, body)]
        if not local:
            return NoFix(
                finding,
                f"`{name}` is only assigned inside functions (through `global`/`nonlocal`): "
                "torchmend cannot tell which assignment runs first",
                advice,
            )
        first = local[0][1]
        if isinstance(first, cst.AugAssign) or not top_level(src, first, body):
            return NoFix(
                finding,
                f"`{name}` is first assigned at line {src.line_of(first)} inside a loop, branch "
                "or block: torchmend cannot tell where to create the tensor once",
                advice,
            )
        uses = [r for r in reads(src, fn, name) if referents(src, r) & bindings]
        problem = python_use(src, fn, uses, name)
        if problem is not None:
            return NoFix(
                finding,
                f"`{name}` is {problem.text} at line {problem.line} in {fn.name.value}(): as a tensor it would "
                "make a data-dependent graph break",
                "keep it a number; if it takes few values, that is a few compiles; else move that use out "
                "of the compiled function",
            )
        updates = [s for b, s in statements if s is not first]
        value = first.value
        if value is None:
            return NoFix(finding, f"`{name}` is declared at line {src.line_of(first)} without a value", advice)
        if not number_like(value):
            return NoFix(finding, f"`{name}` starts as `{src.code(value)}`, not a number", advice)
        assigned = [s for s in updates if isinstance(s, (cst.Assign, cst.AnnAssign))]
        if is_tensor_construction(src, value) and not assigned:
            return NoFix(finding, f"`{name}` is already a tensor updated in place", skipped=True)
        return self._proposal(finding, src, name, first, updates)

    def _proposal(
        self,
        finding: Finding,
        src: SourceFile,
        name: str,
        first: cst.Assign | cst.AnnAssign | cst.AugAssign,
        updates: list[cst.Assign | cst.AnnAssign | cst.AugAssign],
    ) -> Proposal:
        replace: dict[cst.CSTNode, cst.CSTNode] = {}
        imports: tuple[tuple[str, str | None], ...] = ()
        value = cast(cst.BaseExpression, first.value)  # propose() returned NoFix when `first` had no value
        dtype = "float32"
        if not is_tensor_construction(src, value):
            floaty = any(
                maybe_float(src, s.value, s.operator if isinstance(s, cst.AugAssign) else None, name)
                for s in updates
                if s.value is not None
            )
            if surely_float(value) or floaty:
                stored = as_float(value)
                if stored is not value:
                    dtype = (
                        "float32 (it starts as an int, but is later assigned values that may be floats, "
                        "which fill_ would truncate in an int tensor)"
                    )
            else:
                stored = value
                dtype = "int64" if isinstance(value, cst.Integer) else "float32 or int64 (as the value is)"
            tensor, imports = src.torch_expr("tensor")
            replace[value] = cst.Call(tensor, [cst.Arg(stored)])
            if isinstance(first, cst.AnnAssign) and m.matches(
                first.annotation.annotation, m.Name("float") | m.Name("int")
            ):
                ann, more = src.torch_expr("Tensor")
                replace[first.annotation.annotation] = ann
                imports = tuple(dict.fromkeys(imports + more))
        fills, in_place = [], []
        for s in updates:
            if isinstance(s, cst.AugAssign):
                in_place.append(src.line_of(s))
            if isinstance(s, (cst.Assign, cst.AnnAssign)) and s.value is not None:
                fill = cst.Expr(
                    cst.Call(cst.Attribute(cst.Name(name), cst.Name("fill_")), [cst.Arg(s.value)]),
                    semicolon=s.semicolon,
                )
                replace[s] = fill
                fills.append(src.line_of(s))
        why = (
            f"make `{name}` a tensor where it is created (line {src.line_of(first)}), so the compiled code "
            "reads a tensor input instead of guarding on its value"
        )
        if fills:
            why += f"; update it in place with .fill_() ({_lines(fills)})"
        if in_place:
            why += (
                f"; its augmented assignment{'s' if len(in_place) > 1 else ''} ({_lines(in_place)}) already "
                f"update{'' if len(in_place) > 1 else 's'} the tensor in place"
            )
        return Proposal(
            (finding,),
            finding.rule,
            src.path,
            replace=replace,
            imports=imports,
            safety=UNSAFE,
            why=why,
            note=f"`{name}` becomes {'an' if dtype.startswith('int') else 'a'} {dtype} tensor on the CPU (a 0-d "
            "CPU tensor works with tensors on any device; CUDA graphs skip graphs with CPU inputs). Code "
            "outside the compiled function now reads a tensor: arithmetic, comparisons and formatting "
            f"work, `json.dumps` or `isinstance(..., float)` do not (use `float({name})`). Updating it in "
            "place between a forward and its backward raises if autograd saved it.",
            alternative=f"pass `{name}` to the compiled function as a tensor argument instead",
        )


def _lines(lines: list[int]) -> str:
    return f"line{'s' if len(lines) > 1 else ''} {', '.join(map(str, lines))}"


def _pos(src: SourceFile, node: cst.CSTNode) -> tuple[int, int]:
    if node in src.positions:
        p = src.positions[node].start
        return p.line, p.column
    return 0, 0
