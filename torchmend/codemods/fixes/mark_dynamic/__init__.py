"""Mark a varying input dimension dynamic at the call site, before the compiled call (TM204)."""

from __future__ import annotations

import re
from dataclasses import replace

import libcst as cst

from torchmend.analysis.source import Context, SourceFile
from torchmend.codemods.base import SAFE, UNSAFE, Codemod, Invalid, NoFix, Proposal, Result, Valid
from torchmend.codemods.fixes.mark_dynamic.calls import (
    Origin,
    already_marked,
    argument_of,
    dynamic_true,
    guarded_variable,
    origin_of,
    placement_problem,
)
from torchmend.model import Finding, Where

_DIM = re.compile(r"size[ _]mismatch[ _]at[ _]index[ _](\d+)")  # `_`: how example markers spell spaces
_ADVICE = (
    "call `torch._dynamo.maybe_mark_dynamic(tensor, dim)` on the tensor just before the compiled call, "
    "or pass `dynamic=True` to torch.compile"
)

_TRACED_ADVICE = (
    "remove the graph break that makes dynamo compile this function on its own (its inputs then stay inside one "
    "graph), or pass `dynamic=True` to the script's torch.compile call"
)


class MarkDynamic(Codemod):
    """Mark the dimension that varies (batch or sequence length) dynamic before the compiled call.

    What it does:
        TM204: a tensor argument of a torch.compile'd function or module whose size in one dimension
        changes between calls (a ragged last batch, variable-length sequences).

        The dimension comes from the guard (`size mismatch at index 0`), the argument from its variable
        (`args[0]`, `kwargs['x']`, a parameter name). The mark goes on a line of its own right before the
        statement that makes the compiled call, inside the loop: it is stored on the tensor object, and
        each batch is a new tensor. When the argument is not a plain name (`compiled(batch[0])`,
        `compiled(x.to(dev))`) or nothing can go right before the call (an `elif` or `while` test, a
        one-line loop body, a comprehension or lambda), `dynamic=True` is added to the torch.compile call
        (or `@torch.compile`, `module.compile()`) that made the compiled object instead. Not fixed when
        that call is not in the file, or says `dynamic=False`. When the tensor is not an argument of the call
        at all (a tensor the compiled code makes: a library's frame that dynamo compiled on its own after a
        graph break, a shared submodule called with several widths), no line of the training loop can mark
        it: `torch._dynamo.config.assume_static_by_default = False` goes on the line before the compile call
        (what `dynamic=True` does for one call; the end user's remedy when the model is a library's).

    Why is this bad:
        torch.compile first specialises on the exact shape it saw. A call with another size fails the
        guard (`size mismatch at index 0`) and recompiles; only then does automatic dynamic shapes make
        that dimension symbolic. Marking the dimension before the first call compiles one dynamic graph
        up front.

    Example:
        compiled = torch.compile(model)
        for x, y in batches:
            loss = loss_fn(compiled(x), y)

    Fix:
        compiled = torch.compile(model)
        for x, y in batches:
            torch._dynamo.maybe_mark_dynamic(x, 0)
            loss = loss_fn(compiled(x), y)

    Fix safety:
        Safe for the mark: it only does up front what automatic dynamic shapes does after the first
        recompile, and never raises (the varying_batch fixture's final weights are bitwise equal before
        and after). `maybe_mark_dynamic` rather than `mark_dynamic` (both are in torch._dynamo, checked in
        torch 2.13; neither is in torch.compiler): `mark_dynamic` raises a ConstraintViolationError when the
        compiled code specialises the dimension (a batch of 1, a `view(8, -1)`, a size check in the
        model), turning a recompile into a crash mid-training; `maybe_mark_dynamic` only hints. Unsafe for
        `dynamic=True`: every dimension of every input (and integer arguments) is compiled symbolically,
        which can make kernels slower or reach code that does not support dynamic shapes; the same for the
        `assume_static_by_default` setting, for everything compiled after it.
    """

    rules = ("TM204",)
    name = "mark-dynamic"
    INVALID = (
        # a tensor the compiled model makes inside (not an argument of the call): dynamic sizes by default
        Invalid(
            """
            import torch

            step_fn = torch.compile(model)
            for batch in batches:
                loss = step_fn(**batch).sum()  # tm: TM204 variable=hidden_states guard=size_mismatch_at_index_0
            """,
            """
            import torch

            torch._dynamo.config.assume_static_by_default = False
            step_fn = torch.compile(model)
            for batch in batches:
                loss = step_fn(**batch).sum()  # tm: TM204 variable=hidden_states guard=size_mismatch_at_index_0
            """,
        ),
        # a compiled module called with a batch whose size varies: mark it inside the loop
        Invalid(
            """
            import torch

            model = torch.compile(net)
            for x, y in loader:
                loss = loss_fn(model(x), y)  # tm: TM204 variable=args[0] guard=size_mismatch_at_index_0
            """,
            """
            import torch

            model = torch.compile(net)
            for x, y in loader:
                torch._dynamo.maybe_mark_dynamic(x, 0)
                loss = loss_fn(model(x), y)  # tm: TM204 variable=args[0] guard=size_mismatch_at_index_0
            """,
        ),
        # `import torch as t`, a decorated function, the parameter named by the guard, passed by keyword
        Invalid(
            """
            import torch as t

            @t.compile
            def step(w, tokens):
                return w @ tokens

            for batch in data:
                out = step(w, tokens=batch)  # tm: TM204 variable=tokens guard=size_mismatch_at_index_1
            """,
            """
            import torch as t

            @t.compile
            def step(w, tokens):
                return w @ tokens

            for batch in data:
                t._dynamo.maybe_mark_dynamic(batch, 1)
                out = step(w, tokens=batch)  # tm: TM204 variable=tokens guard=size_mismatch_at_index_1
            """,
        ),
        # not a plain name: dynamic=True on the compile call instead
        Invalid(
            """
            import torch

            fn = torch.compile(f, mode='reduce-overhead')
            for b in data:
                fn(b['ids'])  # tm: TM204 variable=args[0] guard=size_mismatch_at_index_0
            """,
            """
            import torch

            fn = torch.compile(f, mode='reduce-overhead', dynamic=True)
            for b in data:
                fn(b['ids'])  # tm: TM204 variable=args[0] guard=size_mismatch_at_index_0
            """,
        ),
        # `model = torch.compile(model)`: the binding that compiles is the one called
        Invalid(
            """
            import torch

            model = GPT(cfg)
            model = torch.compile(model)
            for b in batches:
                logits = model(b.idx)  # tm: TM204 variable=args[0] guard=size_mismatch_at_index_1
            """,
            """
            import torch

            model = GPT(cfg)
            model = torch.compile(model, dynamic=True)
            for b in batches:
                logits = model(b.idx)  # tm: TM204 variable=args[0] guard=size_mismatch_at_index_1
            """,
        ),
    )
    VALID = (
        # already marked
        Valid(
            """
            import torch

            model = torch.compile(net)
            for x in xs:
                torch._dynamo.mark_dynamic(x, [0, 1])
                model(x)  # tm: TM204 variable=args[0] guard=size_mismatch_at_index_0
            """,
        ),
        # already dynamic=True, argument not a name
        Valid(
            """
            import torch

            model = torch.compile(net, dynamic=True)
            for x in xs:
                model(x[0])  # tm: TM204 variable=args[0] guard=size_mismatch_at_index_0
            """,
        ),
        # the user asked for static shapes
        Valid(
            """
            import torch

            model = torch.compile(net, dynamic=False)
            for x in xs:
                model(x.cuda())  # tm: TM204 variable=args[0] guard=size_mismatch_at_index_0
            """,
        ),
    )

    def propose(self, finding: Finding, ctx: Context) -> Result:
        dim_match = _DIM.search(finding.guard or "")
        var = guarded_variable(finding.variable)
        if dim_match is None or var is None:
            return NoFix(finding, f"cannot tell which input and dimension vary from {finding.guard!r}", _ADVICE)
        dim = int(dim_match.group(1))
        # The finding's line when it is yours, else (or when that line calls nothing: the compiled
        # function's def) the call site.
        places = [(finding.path, finding.line)] if finding.where == Where.PROJECT else []
        places += [(loc.path, loc.line) for loc in (finding.call_site, finding.user_frame) if loc is not None]
        if not places:
            return NoFix(finding, "no line of yours calls the compiled code", _ADVICE)
        for path, line in places:
            src = ctx.file(path)
            stmt = src.statement_at(line)
            calls = [c for c in src.nodes_in(stmt, cst.Call) if isinstance(c, cst.Call)] if stmt else []
            if calls and not isinstance(stmt, cst.FunctionDef):
                break
        if stmt is None or not calls:
            return NoFix(finding, f"no call at line {line}", _ADVICE)
        where = (path, line)
        compiled: list[tuple[cst.Call, Origin | None]] = [
            (c, o) for c in calls for o in [origin_of(src, c.func, ctx)] if o is not None
        ]
        guessed = False
        if not compiled:
            # The compiled object came from elsewhere (a parameter, another module): take the one call on the
            # line that is not torch's or a builtin and has that argument.
            others = [
                c
                for c in calls
                if argument_of(c, *var, None)[0] is not None
                and not any(q.startswith(("torch.", "builtins.")) for q in src.qualified_names(c.func))
            ]
            if not others and not any(argument_of(c, *var, None)[0] is not None for c in calls):
                # No call on the line passes it: a tensor made inside the compiled code (a library's frame that
                # dynamo compiled on its own after a graph break, or a shared submodule called with other sizes).
                return _dynamic_by_default(finding, ctx, where[1])
            if len(others) != 1:
                return NoFix(finding, f"cannot tell which call at line {where[1]} is the compiled one", _ADVICE)
            compiled, guessed = [(others[0], None)], True
        if len(compiled) > 1:
            return NoFix(
                finding, f"several compiled calls at line {where[1]}; cannot tell which one recompiles", _ADVICE
            )
        call, origin = compiled[0]
        arg, why = argument_of(call, *var, origin.callee if origin else None)
        if arg is None:
            if var[0] == "name" and not any(a.keyword and a.keyword.value == var[1] for a in call.args):
                return _dynamic_by_default(finding, ctx, where[1])
            return NoFix(finding, f"cannot find the argument {finding.variable} in `{src.code(call)}`: {why}", _ADVICE)

        traced = any(
            loc is not None and loc.traced and loc.path == path and loc.line == where[1]
            for loc in (finding.call_site, finding.user_frame)
        )
        if traced:
            # The line runs inside a compiled call (a graph break made dynamo compile the callee on its own): a
            # mark added there is traced, and dynamo refuses to trace maybe_mark_dynamic.
            problem = (
                f"line {where[1]} runs inside compiled code (it calls `{src.code(call.func)}` after a graph break "
                "or from a resumed frame), where a mark would be traced and dynamo refuses to trace "
                "maybe_mark_dynamic"
            )
        elif isinstance(arg, cst.Name):
            problem = placement_problem(src, stmt, call, arg)
        else:
            problem = f"the argument `{src.code(arg)}` is not a plain name"
        if not problem:
            assert isinstance(arg, cst.Name)
            return _mark(finding, src, stmt, call, arg, dim, origin, guessed)
        return _compile_dynamic(finding, src, origin, problem, dim, traced)


def _mark(
    finding: Finding,
    src: SourceFile,
    stmt: cst.BaseStatement,
    call: cst.Call,
    arg: cst.Name,
    dim: int,
    origin: Origin | None,
    guessed: bool,
) -> Result:
    """`torch._dynamo.maybe_mark_dynamic(arg, dim)` on a line of its own right before the call."""
    if already_marked(src, stmt, arg.value, dim):
        return NoFix(finding, f"`{arg.value}` is already marked dynamic in dimension {dim}", skipped=True)
    if origin is not None and dynamic_true(src, origin) is None:
        return NoFix(finding, "the compile call already has dynamic=True", skipped=True)
    mark, imports = src.torch_expr("_dynamo.maybe_mark_dynamic")
    marker = cst.SimpleStatementLine(
        [
            cst.Expr(
                cst.Call(
                    mark,
                    [
                        cst.Arg(cst.Name(arg.value), comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))),
                        cst.Arg(cst.Integer(str(dim))),
                    ],
                )
            )
        ]
    )
    proposal = Proposal(
        (finding,),
        finding.rule,
        src.path,
        insert_before={stmt: [marker]},
        imports=imports,
        safety=SAFE,
        why=f"compile dimension {dim} of `{arg.value}` as dynamic from the first call, "
        "so a new size does not recompile",
        note="a size of 0 or 1 in that dimension is still specialised by torch.compile",
        alternative="pass dynamic=True to torch.compile (every input dimension dynamic)",
    )
    if guessed:
        proposal = replace(
            proposal, note=proposal.note + f"; torchmend took `{src.code(call.func)}` for the compiled call"
        )
    return proposal


def _compile_dynamic(
    finding: Finding, src: SourceFile, origin: Origin | None, problem: str, dim: int, traced: bool
) -> Result:
    """dynamic=True on the compile call, when nothing can be marked right before the call (`problem` says why)."""
    if origin is None and traced:
        return NoFix(
            finding,
            f"{problem}; the tensor is made inside the compiled region, so no line of the training loop can mark it",
            _TRACED_ADVICE,
        )
    if origin is None:
        return NoFix(
            finding,
            f"{problem}, and the torch.compile call that made the compiled object is not in this file",
            _ADVICE,
        )
    edit = dynamic_true(src, origin)
    if edit is None:
        return NoFix(finding, "the compile call already has dynamic=True", skipped=True)
    if isinstance(edit, str):
        return NoFix(finding, edit, _ADVICE)
    node, new = edit
    return Proposal(
        (finding,),
        finding.rule,
        src.path,
        replace={node: new},
        safety=UNSAFE,
        why=f"compile with dynamic=True, as nothing can be marked right before the call: {problem}",
        note="every input dimension (and integer argument) is compiled as dynamic, which can be "
        f"slower; to make only dimension {dim} of this input dynamic, call "
        f"torch._dynamo.maybe_mark_dynamic(<the tensor>, {dim}) on a line of its own right "
        "before the call",
        alternative=_ADVICE,
    )


STATIC_BY_DEFAULT = "assume_static_by_default"


def _dynamic_by_default(finding: Finding, ctx: Context, line: int) -> Result:
    """`torch._dynamo.config.assume_static_by_default = False` before the compile call (what `dynamic=True` turns
    on for one call), when the tensor whose size changed is not an argument of the compiled call: no line of the
    training loop can mark it."""
    from torchmend.analysis.dynamo_config import has_switch
    from torchmend.analysis.entry import compile_site_for
    from torchmend.codemods.dynamo_config import setting

    if (finding.variable or "").startswith("___stack"):  # dynamo's name for a value it hands to a resumed frame
        not_passed = (
            f"`{finding.variable}` is a tensor dynamo hands to the frame it resumes after a graph break, not an "
            f"argument of a call at line {line}"
        )
    else:
        not_passed = (
            f"`{finding.variable}` is not an argument of a call at line {line}: it is a tensor the compiled code makes"
        )
    site = compile_site_for(finding, ctx)
    if isinstance(site, str):
        return NoFix(finding, f"{not_passed}; {site}", _TRACED_ADVICE)
    if has_switch(site.src, STATIC_BY_DEFAULT):
        return NoFix(finding, f"{site.src.path} already sets `torch._dynamo.config.{STATIC_BY_DEFAULT}`", skipped=True)
    if isinstance(site.node, cst.Call) and any(a.keyword and a.keyword.value == "dynamic" for a in site.node.args):
        return NoFix(finding, f"{not_passed}; the compile call sets `dynamic=` itself", _TRACED_ADVICE)
    return setting(
        (finding,),
        site,
        STATIC_BY_DEFAULT,
        "False",
        why=f"{not_passed} (changing size: {finding.guard}); compile every size as dynamic from the first call "
        f"(`torch._dynamo.config.{STATIC_BY_DEFAULT} = False`, what `dynamic=True` does for one compile call), "
        "so a new size does not recompile",
        note="the setting holds for everything compiled after this line: every input dimension is dynamic "
        "(sizes 0 and 1 are still specialised); dynamic kernels can be slower than static ones, so judge speed "
        "with --repeat 3",
        safety=UNSAFE,
    )
