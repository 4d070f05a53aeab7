"""The torch.cond path: branches that torch.where cannot merge (nested blocks, loops) run as functions."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import Union, cast

import libcst as cst

from torchmend.analysis.source import SourceFile
from torchmend.codemods.base import Result
from torchmend.codemods.fixes.branch_to_where.align import (
    Branch,
    Line,
    Names,
    as_body,
    as_line,
    comment_lines,
    describe_target,
    in_place,
    names_only,
    op_of,
    statements,
    wrap,
)
from torchmend.codemods.fixes.branch_to_where.condition import (
    COND_ADVICE,
    Unfixable,
    code,
    is_tensor_test,
    mask_of,
    paren,
    short,
    strip,
    walk,
)
from torchmend.codemods.fixes.branch_to_where.where import Plan, fresh_names, one_sided, proposal, with_comment
from torchmend.model import Finding


def _cond_call(
    cond: cst.BaseExpression, mask: cst.BaseExpression, fn_true: str, fn_false: str, params: list[str]
) -> cst.Call:
    """`torch.cond(mask, fn_true, fn_false, (p1, p2))`, a one-element operand tuple written `(p,)`."""
    comma = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    operands = cst.Tuple(
        [
            cst.Element(
                cst.Name(p),
                comma=comma
                if i < len(params) - 1
                else (cst.Comma() if len(params) == 1 else cst.MaybeSentinel.DEFAULT),
            )
            for i, p in enumerate(params)
        ]
    )
    return cst.Call(
        cond,
        [
            cst.Arg(mask, comma=comma),
            cst.Arg(cst.Name(fn_true), comma=comma),
            cst.Arg(cst.Name(fn_false), comma=comma),
            cst.Arg(operands),
        ],
    )


def cond_fix(
    finding: Finding,
    src: SourceFile,
    node: cst.If,
    python_part: cst.BaseExpression | None,
    tensor_test: cst.BaseExpression,
) -> Result:
    if isinstance(node.orelse, cst.If):
        raise Unfixable("the `if` has `elif`s")
    bodies = [as_body(node.body)] + ([as_body(node.orelse.body)] if isinstance(node.orelse, cst.Else) else [])
    blocks = [statements(b) for b in bodies]
    for block in blocks:
        _check_cond_block(src, block, in_loop=False)
    names = Names(src, node, None)
    bound = [_bound(block) for block in blocks]
    assigned = list(dict.fromkeys(n for every, _ in bound for n in every))
    outputs = [n for n in assigned if names.read_after(n)]
    if not outputs:
        raise Unfixable("nothing the branch computes is used after the `if`", "delete the `if`")
    for n in outputs:
        where_set = [k for k, (every, _) in enumerate(bound) if n in every]
        if not names.defined_before(n) and (len(blocks) == 1 or not all(n in top for _, top in bound)):
            raise Unfixable(
                one_sided(n, where_set, [Branch(None)] * 2),
                f"give `{n}` a value before the `if` (the one it keeps when the branch is not taken)",
            )
    if len(outputs) > 1:
        # Seen with torch 2.13: cond's backward refuses output gradients that are one tensor (after `h + g`).
        raise Unfixable(
            f"the branches set several names used after the `if` ({', '.join(outputs)}); torchmend "
            "writes torch.cond for one output only, as its backward refuses gradients of several "
            "outputs that alias each other (e.g. after `h + g`)",
            COND_ADVICE,
        )
    params = [n for n in assigned if names.defined_before(n)]
    used = names.used()
    fresh = _fresh_names(used)
    fn_true, fn_false = next(fresh(f"{outputs[0]}_if_true")), next(fresh(f"{outputs[0]}_if_false"))
    header = (
        bodies[0].header.comment if isinstance(bodies[0], cst.IndentedBlock) else bodies[0].trailing_whitespace.comment
    )
    else_comments = comment_lines(node.orelse.leading_lines) if isinstance(node.orelse, cst.Else) else []
    if isinstance(node.orelse, cst.Else) and isinstance(node.orelse.body, cst.IndentedBlock):
        else_comments += as_line(node.orelse.body.header.comment)
    defs = [
        _branch_fn(fn_true, params, blocks[0], outputs[0], bound[0][1]),
        _branch_fn(
            fn_false,
            params,
            blocks[1] if len(blocks) > 1 else [],
            outputs[0],
            bound[1][1] if len(blocks) > 1 else set(),
        ),
    ]
    defs[1] = defs[1].with_changes(leading_lines=else_comments)
    mask = strip(mask_of(src, tensor_test, trusted=True).expr)
    lines: list[cst.BaseStatement] = list(defs)
    if "\n" in code(mask):
        temp = next(fresh_names(used))
        lines.append(cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(cst.Name(temp))], paren(mask))]))
        mask = cst.Name(temp)
    cond, imports = src.torch_expr("cond")
    call = _cond_call(cond, mask, fn_true, fn_false, params)
    lines.append(
        with_comment(cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(cst.Name(outputs[0]))], call)]), header)
    )
    plan = Plan(
        lines,
        [
            f"torch.cond runs one branch, as before, but under torch.compile both branches must "
            f"return `{outputs[0]}` as a tensor of the same shape and dtype (not a Python number) "
            "and change nothing outside, or torch.cond raises; the branch functions return a clone "
            "where the result could be an input, which torch.cond does not allow"
        ],
        [],
    )
    edits = wrap(src, node, lines, python_part)
    made = proposal(finding, src, edits, imports, plan, short(tensor_test))
    return replace(
        made,
        why=f"run the branches as functions under torch.cond instead of branching on `{short(tensor_test)}`",
        alternative="",
    )


def _check_cond_block(src: SourceFile, block: Sequence[cst.BaseStatement], in_loop: bool) -> None:
    """Raise unless the statements only bind local names (what a torch.cond branch function may do)."""
    for stmt in block:
        problem = in_place(src, stmt)
        if problem:
            raise Unfixable(f"in the branch, {problem}")
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if isinstance(small, cst.Assign):
                    for t in small.targets:
                        if not names_only(t.target):
                            raise Unfixable(describe_target(t.target), "")
                elif isinstance(small, (cst.AugAssign, cst.AnnAssign)):
                    if not isinstance(small.target, cst.Name):
                        raise Unfixable(describe_target(small.target), "")
                elif isinstance(small, (cst.Break, cst.Continue)) and in_loop:
                    continue
                elif isinstance(small, cst.Pass) or (
                    isinstance(small, cst.Expr) and isinstance(small.value, (cst.BaseString, cst.Ellipsis))
                ):
                    continue
                else:
                    op_of(src, small, Line(stmt, [], None))  # raises with the reason for that statement
                    raise Unfixable(f"the branch has `{short(small)}`, which a torch.cond branch cannot do")
        elif isinstance(stmt, (cst.For, cst.While)):
            if isinstance(stmt, cst.For) and not names_only(stmt.target):
                raise Unfixable(describe_target(stmt.target), "")
            _check_cond_block(src, statements(stmt.body), in_loop=True)
            if stmt.orelse is not None:
                _check_cond_block(src, statements(stmt.orelse.body), in_loop)
        elif isinstance(stmt, cst.If):
            if is_tensor_test(src, stmt.test):
                raise Unfixable(
                    f"the branch has its own `if` on a tensor (`{short(stmt.test)}`); fix that one first", ""
                )
            _check_cond_block(src, statements(stmt.body), in_loop)
            orelse = stmt.orelse
            while isinstance(orelse, cst.If):
                _check_cond_block(src, statements(orelse.body), in_loop)
                orelse = orelse.orelse
            if orelse is not None:
                _check_cond_block(src, statements(orelse.body), in_loop)
        else:
            raise Unfixable(
                f"the branch has a `{type(stmt).__name__.lower()}` block, which a torch.cond branch "
                "function cannot hold",
                "",
            )


def _bound(block: Sequence[cst.BaseStatement]) -> tuple[list[str], set[str]]:
    """Every name the statements bind (in order), and those bound to a new value by the last top-level
    statement that binds them (safe to return from a torch.cond branch without a clone)."""
    every: list[str] = []
    fresh: set[str] = set()
    for stmt in block:
        here: list[str] = []
        for n in walk(stmt, (cst.AssignTarget, cst.AugAssign, cst.AnnAssign, cst.For)):
            target = cast(Union[cst.AssignTarget, cst.AugAssign, cst.AnnAssign, cst.For], n).target  # those kinds only
            here += [x.value for x in walk(target, cst.Name)]
        every += here
        fresh -= set(here)
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                # `y = x` returns an input as it is: torch.cond refuses an output that aliases an input.
                if isinstance(small, cst.Assign) and not isinstance(small.value, (cst.Name, cst.Attribute)):
                    fresh |= {x.value for t in small.targets for x in walk(t.target, cst.Name)}
                elif isinstance(small, cst.AugAssign):
                    fresh.add(cast(cst.Name, small.target).value)  # _check_cond_block refused other targets
    return list(dict.fromkeys(every)), fresh


def _branch_fn(
    name: str, params: list[str], block: Sequence[cst.BaseStatement], output: str, fresh: set[str]
) -> cst.FunctionDef:
    """`def name(params): <block>; return output` (a clone when it may be an input: cond refuses aliases)."""
    value = cst.Name(output) if output in fresh else cst.Call(cst.Attribute(cst.Name(output), cst.Name("clone")))
    body = [*block, cst.SimpleStatementLine([cst.Return(value)])]
    return cst.FunctionDef(
        cst.Name(name), cst.Parameters([cst.Param(cst.Name(p)) for p in params]), cst.IndentedBlock(body)
    )


def _fresh_names(used: set[str]):
    def fresh(base: str) -> Iterator[str]:
        if base not in used:
            yield base
        i = 2
        while True:
            if f"{base}_{i}" not in used:
                yield f"{base}_{i}"
            i += 1

    return fresh
