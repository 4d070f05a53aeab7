"""Compile placement (issue 40): a whole-model compile that breaks inside code that is not the user's to rewrite (a
library's post-processing, a loss, a sampling wrapper) becomes a compile of each submodule that compiled without a
break, in place (`model.backbone.compile()`), at the script's compile call. The breaking code then runs eagerly and
the heavy part stays compiled: the run (profiler/placement.py) names the submodules, the verify gate judges it
(speed, numerics, something compiled). Its coverage is the submodules' share of the model's parameters, at least
MIN_SHARE: the op counts are not held to the original's, since the fragments between the whole model's breaks go
eager by design and one graph of two clean submodules becomes a graph each.

A last resort: asked for a break its own rule leaves unfixed, and the last fallback of a source fix. Only the
statement forms `X = torch.compile(M, ...)`, `M.compile(...)` and `X = M if flag else torch.compile(M)` (either
way round) are rewritten; a compile inside another expression is left with advice."""

from __future__ import annotations

import keyword

import libcst as cst

from torchmend.analysis.entry import compile_site_for, compile_sites
from torchmend.analysis.names import os_same
from torchmend.analysis.source import Context, SourceError
from torchmend.codemods.base import SAFE, Codemod, Invalid, NoFix, Proposal, Result, Valid
from torchmend.model import Finding, Kind, Placement

SHAPE = "compile-placement"  # Proposal.shape
MIN_SHARE = 0.5  # of the model's parameters in the submodules compiled: the heavy part, kept compiled
WHY = "compile the submodules that compiled without a break in place, instead of the whole model"
NOTE = (
    "the code between them (where the breaks were) runs eagerly; what compiled cleanly stays compiled, each "
    "submodule as one graph: verification keeps it only if the numbers match, the largest graph is kept and the "
    "run is not slower"
)


def _expression(model: cst.BaseExpression, name: str) -> cst.BaseExpression:
    """`model.a.b` for a dotted name of identifiers, else `model.get_submodule("a.0")`."""
    parts = name.split(".")
    if all(p.isidentifier() and not keyword.iskeyword(p) for p in parts):
        out = model
        for p in parts:
            out = cst.Attribute(value=out, attr=cst.Name(p))
        return out
    return cst.Call(
        func=cst.Attribute(value=model, attr=cst.Name("get_submodule")),
        args=[cst.Arg(cst.SimpleString(f'"{name}"'))],
    )


def _compiles(model: cst.BaseExpression, p: Placement, args: list[cst.Arg]) -> list[cst.BaseStatement]:
    kwargs = [a.with_changes(comma=cst.MaybeSentinel.DEFAULT) for a in args if a.keyword is not None]
    return [
        cst.SimpleStatementLine(
            [
                cst.Expr(
                    cst.Call(func=cst.Attribute(value=_expression(model, name), attr=cst.Name("compile")), args=kwargs)
                )
            ]
        )
        for name in p.modules
    ]


def _rewrite(stmt: cst.SimpleStatementLine, call: cst.Call, p: Placement) -> list[cst.BaseStatement] | str:
    """The statements that take the compile statement's place, or why there are none."""
    if len(stmt.body) != 1:
        return "the compile call shares its line with other statements"
    small = stmt.body[0]
    module_compile = isinstance(call.func, cst.Attribute) and all(a.keyword is not None for a in call.args)
    if isinstance(small, cst.Expr) and small.value is call and module_compile:
        assert isinstance(call.func, cst.Attribute)
        return _leading(_compiles(call.func.value, p, list(call.args)), stmt)  # model.compile(...)
    if not (isinstance(small, cst.Assign) and len(small.targets) == 1 and _model_of(call) is not None):
        return _NOT_A_STATEMENT
    target = small.targets[0].target
    if small.value is call:
        return _leading(_assigned(stmt, small, target, call, p), stmt)
    branch = small.value
    # `X = M if eager else torch.compile(M)` (a --compile flag): an if statement, the compile branch placed
    if isinstance(branch, cst.IfExp) and call in (branch.body, branch.orelse):
        placed = _assigned(stmt, small, target, call, p)
        other = branch.orelse if call is branch.body else branch.body
        plain = [] if _same(target, other) else [_assignment(stmt, small, other)]
        test = branch.test if call is branch.body else _negated(branch.test)
        if not plain:
            return _leading([cst.If(test=test, body=cst.IndentedBlock(placed))], stmt)
        return _leading(
            [cst.If(test=test, body=cst.IndentedBlock(placed), orelse=cst.Else(cst.IndentedBlock(plain)))], stmt
        )
    return _NOT_A_STATEMENT


_NOT_A_STATEMENT = (
    "the compile call is not a statement of its own (`model = torch.compile(model)`, `model.compile()`, or "
    "`model = model if eager else torch.compile(model)`)"
)


def _model_of(call: cst.Call) -> cst.BaseExpression | None:
    if call.args and call.args[0].keyword is None and not call.args[0].star:
        return call.args[0].value
    return None


def _same(a: cst.BaseExpression, b: cst.BaseExpression) -> bool:
    return cst.Module([]).code_for_node(a) == cst.Module([]).code_for_node(b)


def _negated(test: cst.BaseExpression) -> cst.BaseExpression:
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return test.expression
    return cst.UnaryOperation(
        operator=cst.Not(),
        expression=test.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        if isinstance(test, (cst.BooleanOperation, cst.Comparison, cst.IfExp))
        else test,
    )


def _assignment(stmt: cst.SimpleStatementLine, small: cst.Assign, value: cst.BaseExpression) -> cst.SimpleStatementLine:
    return stmt.with_changes(body=[small.with_changes(value=value)], leading_lines=())


def _assigned(
    stmt: cst.SimpleStatementLine, small: cst.Assign, target: cst.BaseExpression, call: cst.Call, p: Placement
) -> list[cst.BaseStatement]:
    """`X = torch.compile(M, ...)` -> the submodules' compiles, then `X = M` (unless X is M)."""
    model = _model_of(call)
    assert model is not None
    out: list[cst.BaseStatement] = list(_compiles(model, p, list(call.args[1:])))
    if not _same(target, model):  # the compiled name is the model itself now (its comment stays with it)
        out.append(_assignment(stmt, small, model))
    return out


def _leading(out: list[cst.BaseStatement], stmt: cst.SimpleStatementLine) -> list[cst.BaseStatement]:
    """The blank lines and comments above the compile statement stay above its replacement."""
    return [out[0].with_changes(leading_lines=stmt.leading_lines), *out[1:]] if out else out


def _placement_for(finding: Finding, ctx: Context) -> Placement | None:
    """The placement of the compile that reaches the finding's code, else the project's first."""
    ours = [p for p in ctx.placements if ctx.in_project(p.path)]
    site = compile_site_for(finding, ctx) if len(ours) > 1 else None
    if site is not None and not isinstance(site, str):
        line = site.src.line_of(site.node)
        return next((p for p in ours if p.line == line and os_same(p.path, site.src.path)), ours[0])
    return ours[0] if ours else None


def propose_placement(finding: Finding, ctx: Context) -> Result:
    """The compile placement the run found for the compile call in the project, for a graph break."""
    if finding.kind != Kind.GRAPH_BREAK:
        return NoFix(finding, "compile placement is for graph breaks", skipped=True)
    p = _placement_for(finding, ctx)
    if p is None:
        return NoFix(finding, "the run showed no submodule of a compiled model that compiled cleanly", skipped=True)
    if p.share < MIN_SHARE:
        return NoFix(
            finding,
            f"the submodules of {p.model} that compiled cleanly hold {p.share * 100:.0f} % of its parameters "
            f"(compile placement needs {MIN_SHARE * 100:.0f} %)",
            skipped=True,
        )
    try:
        src = ctx.file(p.path)
    except SourceError as e:
        return NoFix(finding, str(e), skipped=True)
    site = next((s for s in compile_sites(src) if src.line_of(s.node) == p.line), None)
    if site is None or not isinstance(site.node, cst.Call) or not isinstance(site.statement, cst.SimpleStatementLine):
        return NoFix(finding, f"no compile call statement at {p.path}:{p.line}", skipped=True)
    new = _rewrite(site.statement, site.node, p)
    if isinstance(new, str):
        names = ", ".join(p.modules)
        return NoFix(finding, new, f"compile {names} in place (`module.compile()`) instead of the model", skipped=True)
    return Proposal(
        findings=(finding,),
        rule=finding.rule,
        path=src.path,
        why=f"{WHY}: {', '.join(p.modules)} ({p.share * 100:.0f} % of the parameters of {p.model})",
        safety=SAFE,
        replace={site.statement: cst.FlattenSentinel(new)},
        note=NOTE,
        shape=SHAPE,
        kept_coverage=(),
        outputs_of=(p.model.rsplit(".", 1)[-1],),  # as the run names a module it records: its class's __name__
    )


class CompilePlacement(Codemod):
    """Compile the submodules that compiled without a break, in place, instead of the whole model.

    What it does:
        Where the run showed a whole-model compile (`model = torch.compile(model)`, `model.compile()`) breaking
        inside some of its submodules, and no source fix of the break's own rule removes it (a break in a
        library's post-processing, a loss, a sampling wrapper), `torchmend fix` replaces the compile statement
        by one `.compile()` per submodule that no break's stack passed through: the largest such submodules of a
        class that is not torch's own, each holding at least 1 % of the parameters, together at least half of
        them (profiler/placement.py reads them from the run: each compiled module's tree against the breaks'
        stacks). `model = model if eager else torch.compile(model)` becomes an if statement; a compile inside
        another expression is left with advice.

    Why is this bad:
        A break inside the model cuts the whole compiled forward into fragments: every call pays for the breaks
        and the resumed frames, and the fragments around the breaking code recompile on its data-dependent sizes.
        The clean submodules (a backbone, a head) compile as one graph each, and the breaking code runs eagerly
        between them, once.

    Example:
        model = torch.compile(detector)   # breaks in the library's box selection

    Fix:
        detector.backbone.compile()
        detector.rpn.head.compile()
        model = detector

        torchvision's fasterrcnn_mobilenet_v3_large_fpn, train mode, the library untouched (torch 2.14.1,
        aot_eager): 42 graph breaks and 13 recompiles became 0 and 1, the largest graph kept (234 ops), the
        numbers equal (docs/measured.md).

    Fix safety:
        Safe: the same operations run in the same order; the code between the submodules runs eagerly instead of
        in compiled fragments. Verification re-runs the script and keeps it only when the numbers match, the run
        is not slower and something is compiled; its compiled ops are not held to the original's (the fragments
        go eager by design), its coverage is the parameters it compiles. A run without a loss (an inference
        loop) is compared on what the model returns, call by call: the model's own calls, the one callable both
        scripts call.
    """

    last_resort = True
    last_resort_order = 10  # a local change: before the global settings
    name = "compile-placement"
    INVALID = (
        Invalid(
            """
            import torch

            def forward(self, h):
                keep = torch.nonzero(h[:, 0] > 0)  # tm: TM111
                return h[keep]

            model = torch.compile(model, mode="max-autotune")  # tm-placement backbone,heads.0 model=Detector
            """,
            """
            import torch

            def forward(self, h):
                keep = torch.nonzero(h[:, 0] > 0)  # tm: TM111
                return h[keep]

            model.backbone.compile(mode="max-autotune")
            model.get_submodule("heads.0").compile(mode="max-autotune")
            """,
        ),
        Invalid(
            """
            import torch

            def forward(self, h):
                keep = torch.nonzero(h[:, 0] > 0)  # tm: TM111
                return h[keep]

            compiled = torch.compile(net)  # tm-placement backbone model=Detector
            """,
            """
            import torch

            def forward(self, h):
                keep = torch.nonzero(h[:, 0] > 0)  # tm: TM111
                return h[keep]

            net.backbone.compile()
            compiled = net  # tm-placement backbone model=Detector
            """,
        ),
        # a --compile flag: the compile branch becomes an if statement
        Invalid(
            """
            import torch

            def forward(self, h):
                keep = torch.nonzero(h[:, 0] > 0)  # tm: TM111
                return h[keep]

            step = model if args.eager else torch.compile(model)  # tm-placement backbone model=Detector
            """,
            """
            import torch

            def forward(self, h):
                keep = torch.nonzero(h[:, 0] > 0)  # tm: TM111
                return h[keep]

            if not args.eager:
                model.backbone.compile()
                step = model  # tm-placement backbone model=Detector
            else:
                step = model  # tm-placement backbone model=Detector
            """,
        ),
        Invalid(
            """
            import torch

            def forward(self, h):
                keep = torch.nonzero(h[:, 0] > 0)  # tm: TM111
                return h[keep]

            model = torch.compile(model) if use_compile else model  # tm-placement head model=Detector
            """,
            """
            import torch

            def forward(self, h):
                keep = torch.nonzero(h[:, 0] > 0)  # tm: TM111
                return h[keep]

            if use_compile:
                model.head.compile()
            """,
        ),
    )
    VALID = (
        # no placement in the run: nothing compiled cleanly inside the model
        Valid(
            """
            import torch

            def forward(self, h):
                keep = torch.nonzero(h[:, 0] > 0)  # tm: TM111
                return h[keep]

            model = torch.compile(model)
            """,
        ),
        # torch.compile's result thrown away: nothing compiles in place there (not `torch.backbone.compile()`)
        Valid(
            """
            import torch

            def forward(self, h):
                keep = torch.nonzero(h[:, 0] > 0)  # tm: TM111
                return h[keep]

            torch.compile(model)  # tm-placement backbone model=Detector
            """,
        ),
        # a compile inside an expression other than a conditional: advice, no edit
        Valid(
            """
            import torch

            def forward(self, h):
                keep = torch.nonzero(h[:, 0] > 0)  # tm: TM111
                return h[keep]

            steps = [torch.compile(model)]  # tm-placement backbone model=Detector
            """,
        ),
    )

    def propose(self, finding: Finding, ctx: Context) -> Result:
        return propose_placement(finding, ctx)
