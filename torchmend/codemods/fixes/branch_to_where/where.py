"""The torch.where path: every branch computed, the results picked by the masks."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import cast

import libcst as cst

from torchmend.analysis.source import SourceFile, simple_names
from torchmend.codemods.base import SAFE, UNSAFE, Proposal, Result
from torchmend.codemods.fixes.branch_to_where.align import (
    RETURN,
    Branch,
    Line,
    Names,
    Op,
    as_line,
    chain,
    comment_lines,
    is_elif_of,
    last,
    merge,
    next_statement,
    ops_of,
    wrap,
)
from torchmend.codemods.fixes.branch_to_where.condition import (
    COND_ADVICE,
    Mask,
    Unfixable,
    code,
    constant,
    hazards_of,
    mask_of,
    paren,
    python_test,
    short,
    strip,
    walk,
)
from torchmend.model import Finding

# --- building the new statements -----------------------------------------------------------------------------


def where_call(
    where: cst.BaseExpression, cond: cst.BaseExpression, a: cst.BaseExpression, b: cst.BaseExpression
) -> cst.Call:
    comma = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    return cst.Call(where, [cst.Arg(cond, comma=comma), cst.Arg(a, comma=comma), cst.Arg(b)])


def _placeholder(k: int) -> cst.Name:
    return cst.Name(f"__tm_cond_{k}__")


class _Replace(cst.CSTTransformer):
    def __init__(self, names: dict[str, cst.BaseExpression]) -> None:
        super().__init__()
        self.names = names

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.BaseExpression:
        return self.names.get(original.value, updated)


@dataclass
class Plan:
    lines: Sequence[cst.BaseStatement]
    notes: list[str]  # what makes it unsafe (empty: safe)
    hazards: list[str]  # what computing the branch not taken can do


def _build(
    src: SourceFile,
    branches: list[Branch],
    names: Names,
    where: cst.BaseExpression,
    masks: list[Mask],
    returns: bool,
) -> Plan:
    """The statements that replace the `if`: condition temporaries, then one statement per lined-up slot."""
    slots: list[dict[int, Op]] = []
    for k, branch in enumerate(branches):
        slots = merge(slots, k, branch.ops)
    if not slots:
        raise Unfixable("the `if` does nothing in any branch", "delete it")
    emitted, notes = _merged_statements(slots, branches, names, where, returns)
    notes += [
        f"`{short(op.small)}` changed the tensor in place; now a new tensor is built, so other names bound "
        "to the same tensor no longer see the change"
        for b in branches
        for op in b.ops
        if op.aug
    ]
    notes += [
        f"assumes the `elif` test `{short(b.test)}` is a tensor (torch.where raises on a Python bool)"
        for b, mask in zip(branches[1:], masks[1:])
        if b.test is not None and not mask.tensor
    ]
    hazards = [h for b in branches for op in b.ops for v in op.values for h in hazards_of(src, v)]
    hazards += [h for b in branches[1:] if b.test is not None for h in hazards_of(src, b.test)]
    temps, evaluated_at, replacements = _conditions(emitted, masks, names)
    # _Replace swaps names for expressions: each small statement stays one.
    statements = [cast(cst.BaseSmallStatement, small.visit(_Replace(replacements))) for _, small in emitted]
    lines = _lay_out(temps, [slot for slot, _ in emitted], statements, branches, evaluated_at)
    return Plan(lines, list(dict.fromkeys(notes)), list(dict.fromkeys(hazards)))


def _merged_statements(
    slots: list[dict[int, Op]], branches: list[Branch], names: Names, where: cst.BaseExpression, returns: bool
) -> tuple[list[tuple[dict[int, Op], cst.BaseSmallStatement]], list[str]]:
    """One statement per slot: `n = torch.where(c0, v0, torch.where(c1, v1, n))`, with placeholders for the
    conditions; a branch without a statement in the slot keeps `n` as it is."""
    assigned: dict[str, list[int]] = {}
    for k, branch in enumerate(branches):
        for op in branch.ops:
            for n in op.targets if not op.is_return else ():
                if k not in assigned.setdefault(n, []):
                    assigned[n].append(k)

    def temp(n: str) -> bool:
        """Assigned in one branch only, written there before it is read, and dead after the `if`: then a plain
        assignment is exact (nothing else reads it)."""
        if names.defined_before(n) or len(assigned[n]) != 1 or (not returns and names.read_after(n)):
            return False
        k = assigned[n][0]
        return not any(
            n in op.reads and (j != k or n not in _written_before(b.ops, op))
            for j, b in enumerate(branches)
            for op in b.ops
        )

    exists = {n for n in assigned if names.defined_before(n)}
    notes: list[str] = []
    emitted: list[tuple[dict[int, Op], cst.BaseSmallStatement]] = []
    for slot in slots:
        first = next(iter(slot.values()))
        plain = not first.is_return and all(temp(n) for n in first.targets)
        values: list[cst.BaseExpression] = []
        for i in range(len(first.values)):
            target = first.targets[i] if not first.is_return else RETURN
            pieces = [slot[k].values[i] if k in slot else None for k in range(len(branches))]
            if plain:
                values.append(first.values[i])
                continue
            if None in pieces and target not in exists:
                raise Unfixable(
                    one_sided(target, sorted(slot), branches),
                    f"give `{target}` a value before the `if` (the one it keeps when the branch is not taken)",
                )
            values.append(_where_chain(where, [p if p is not None else _target_expr(target) for p in pieces]))
            if None in pieces and "." in target:
                notes.append(f"`{target}` is now set on every call (to its own value when no branch sets it)")
            if all(p is None or constant(p) is not None for p in pieces):
                notes.append(
                    f"`{target}` becomes a 0-d tensor (it was a Python number in every branch)"
                    if not first.is_return
                    else "the function returns a 0-d tensor where it returned a Python number"
                )
        exists |= set(first.targets)
        emitted.append((slot, _statement(first, values)))
    return emitted, notes


def _target_expr(target: str) -> cst.BaseExpression:
    """A target's current value: a local name, or `self.x`."""
    return cst.parse_expression(target) if "." in target else cst.Name(target)


def _dotted_reads(e: cst.CSTNode) -> set[str]:
    """`self.x` read anywhere in `e` (every Name.attr chain, as text): state a merged branch may set."""
    return {f"{n.value.value}.{n.attr.value}" for n in walk(e, cst.Attribute) if isinstance(n.value, cst.Name)}


def _where_chain(where: cst.BaseExpression, pieces: list[cst.BaseExpression]) -> cst.BaseExpression:
    """`torch.where(c0, p0, torch.where(c1, p1, p2))`, leaving out the choices between equal values."""
    acc = pieces[-1]
    for k in range(len(pieces) - 2, -1, -1):
        if not strip(pieces[k]).deep_equals(strip(acc)):
            acc = where_call(where, _placeholder(k), strip(pieces[k]), strip(acc))
    return acc


def _conditions(
    emitted: list[tuple[dict[int, Op], cst.BaseSmallStatement]], masks: list[Mask], names: Names
) -> tuple[list[cst.SimpleStatementLine], dict[int, int], dict[str, cst.BaseExpression]]:
    """Each condition evaluated once: in a temporary when used more than once, spread over lines, or when a
    statement before its use changes a name it reads; otherwise inline. Returns the temporaries, the line
    each condition is evaluated on, and what each placeholder becomes."""
    uses: dict[int, list[int]] = {k: [] for k in range(len(masks))}
    for s, (_, small) in enumerate(emitted):
        for n in walk(small, cst.Name):
            for k in range(len(masks)):
                if n.value == _placeholder(k).value:
                    uses[k].append(s)
    fresh = fresh_names(names.used())
    replacements: dict[str, cst.BaseExpression] = {}
    temps: list[cst.SimpleStatementLine] = []
    evaluated_at: dict[int, int] = {}
    for k, mask in enumerate(masks):
        expr = strip(mask.expr)
        multiline = "\n" in code(expr)
        before = emitted[: uses[k][0]] if uses[k] else []
        written = {n for slot, _ in before for n in next(iter(slot.values())).targets}
        every_written = {n for slot, _ in emitted for n in next(iter(slot.values())).targets}
        if isinstance(expr, cst.Name) and expr.value not in every_written:
            replacements[_placeholder(k).value] = expr  # a name nothing here rebinds: read it where it is used
            continue
        if len(uses[k]) > 1 or multiline or written & (simple_names(expr) | _dotted_reads(expr)):
            name = next(fresh)
            value = paren(expr) if multiline else expr  # a value over several lines needs its parentheses
            evaluated_at[k] = len(temps)
            temps.append(cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(cst.Name(name))], value)]))
            replacements[_placeholder(k).value] = cst.Name(name)
        else:
            replacements[_placeholder(k).value] = expr
    for k in range(len(masks)):
        if k not in evaluated_at and uses[k]:
            evaluated_at[k] = len(temps) + uses[k][0]
    return temps, evaluated_at, replacements


def _lay_out(
    temps: list[cst.SimpleStatementLine],
    slots: list[dict[int, Op]],
    statements: list[cst.BaseSmallStatement],
    branches: list[Branch],
    evaluated_at: dict[int, int],
) -> list[cst.SimpleStatementLine]:
    """The statements as lines, each carrying the comments of the lines it came from; the `if`/`elif`
    line's own comment goes where its test is now evaluated (so `# tm:` markers follow the test)."""
    lines = list(temps)
    displaced: dict[int, int] = {}  # line -> where its end-of-line comment goes if another takes its place
    for slot, small in zip(slots, statements):
        leading: list[cst.EmptyLine] = []
        comment: cst.Comment | None = None
        for k, op in sorted(slot.items()):
            leading += branches[k].comments
            branches[k].comments = []
            if not op.line.used:
                op.line.used = True
                leading += op.line.leading
                if comment is None and op.line.comment is not None:
                    comment, displaced[len(lines)] = op.line.comment, len(leading)
                else:
                    leading += as_line(op.line.comment)
        lines.append(with_comment(cst.SimpleStatementLine([small], leading_lines=leading), comment))
    leftover = [c for b in branches for c in b.comments]
    for k, branch in enumerate(branches):
        if k in evaluated_at:
            lines[evaluated_at[k]] = with_comment(lines[evaluated_at[k]], branch.header, displaced.get(evaluated_at[k]))
        else:
            leftover += as_line(branch.header)
    lines[0] = lines[0].with_changes(leading_lines=[*leftover, *lines[0].leading_lines])
    return lines


def _written_before(ops: list[Op], op: Op) -> set[str]:
    out: set[str] = set()
    for o in ops:
        if o is op:
            return out
        out |= set(o.targets)
    return out


def one_sided(target: str, where_: list[int], branches: list[Branch]) -> str:
    when = "only in some branches"
    if len(branches) == 2:
        sides: dict[tuple[int, ...], str] = {(0,): "only when the test is true", (1,): "only when the test is false"}
        when = sides.get(tuple(where_), when)
    return (
        f"`{target}` is assigned {when} and has no value before the `if`, but is used after it: it needs a "
        "value in every case"
    )


def fresh_names(used: set[str]) -> Iterator[str]:
    if "cond" not in used:
        yield "cond"
    i = 2
    while True:
        if f"cond_{i}" not in used:
            yield f"cond_{i}"
        i += 1


def _statement(op: Op, values: list[cst.BaseExpression]) -> cst.BaseSmallStatement:
    comma = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    value: cst.BaseExpression = (
        values[0]
        if not op.tuple_form
        else cst.Tuple(
            [
                cst.Element(v, comma=comma if i < len(values) - 1 else cst.MaybeSentinel.DEFAULT)
                for i, v in enumerate(values)
            ],
            lpar=[],
            rpar=[],
        )
    )
    if op.is_return:
        return cst.Return(value)
    if isinstance(op.small, cst.AnnAssign) or (
        isinstance(op.small, cst.Assign)
        and not op.tuple_form
        and isinstance(op.small.targets[0].target, (cst.Name, cst.Attribute))
    ):
        return op.small.with_changes(value=value, semicolon=cst.MaybeSentinel.DEFAULT)  # keeps `x: T = ...`
    if isinstance(op.small, cst.Assign) and op.tuple_form:
        return op.small.with_changes(value=value, semicolon=cst.MaybeSentinel.DEFAULT)
    return cst.Assign([cst.AssignTarget(cst.Name(op.targets[0]))], value)


def with_comment(
    line: cst.SimpleStatementLine, comment: cst.Comment | None, at: int | None = None
) -> cst.SimpleStatementLine:
    """`line` with `comment` at its end; a comment already there moves above it (to leading line `at`)."""
    if comment is None:
        return line
    leading = list(line.leading_lines)
    at = len(leading) if at is None else at
    leading[at:at] = as_line(line.trailing_whitespace.comment)
    return line.with_changes(
        leading_lines=leading,
        trailing_whitespace=cst.TrailingWhitespace(whitespace=cst.SimpleWhitespace("  "), comment=comment),
    )


def where_fix(
    finding: Finding,
    src: SourceFile,
    node: cst.If,
    python_part: cst.BaseExpression | None,
    tensor_test: cst.BaseExpression,
) -> Result:
    branches = chain(src, node)
    has_else = isinstance(last(node).orelse, cst.Else)
    if python_part is not None and len(branches) > 2:
        raise Unfixable(
            f"the test mixes a Python check (`{short(python_part)}`) with a tensor test, and the `if` has `elif`s",
            "split it into `if <python check>:` around an `if <tensor test>:`",
        )

    # Returns: every branch returns, or the `if` has no else and a `return` follows it.
    returning = [bool(b.ops) and b.ops[-1].is_return for b in branches]
    trailing: cst.SimpleStatementLine | None = None
    if any(returning) and not has_else:
        after = next_statement(src, node)
        if (
            not is_elif_of(src, node)
            and isinstance(after, cst.SimpleStatementLine)
            and len(after.body) == 1
            and isinstance(after.body[0], cst.Return)
        ):
            trailing = after
            line = Line(
                after,
                [] if python_part is not None else comment_lines(after.leading_lines),
                None if python_part is not None else after.trailing_whitespace.comment,
            )
            branches[-1] = Branch(None, ops_of(src, after.body[0], line))
            returning[-1] = True
    if any(returning) and not all(returning):
        raise Unfixable(
            "only some branches return; the code after the `if` would have to run for the others", COND_ADVICE
        )
    if python_part is not None and (has_else or trailing is not None):
        # The else stays as it is under the Python check; its copy in torch.where loses the comments.
        for op in branches[-1].ops:
            op.line = Line(op.line.node, [], None)
        branches[-1].comments = []

    python_elifs = [k for k, b in enumerate(branches) if k and b.test is not None and python_test(src, b.test)]
    if python_elifs:
        if python_part is not None or len(python_elifs) > 1:
            raise Unfixable(
                "the chain mixes several Python tests with tensor tests",
                "split it into `if <python check>:` around an `if <tensor test>:`",
            )
        return _python_elif_fix(finding, src, node, branches, python_elifs[0], tensor_test, trailing, all(returning))
    masks = [mask_of(src, tensor_test, trusted=True)]
    for b in branches[1:]:
        if b.test is not None:
            try:
                masks.append(mask_of(src, b.test, trusted=False))
            except Unfixable as e:
                raise Unfixable(
                    f"the `elif` test: {e.reason}; torch.where needs a tensor test in every branch",
                    "test the Python value first, in an `if` of its own, and the tensor in an `if` inside it",
                ) from None
    where, imports = src.torch_expr("where")
    names = Names(src, node, trailing if python_part is None else None)
    plan = _build(src, branches, names, where, masks, all(returning))
    edits = wrap(src, node, plan.lines, python_part)
    if trailing is not None and python_part is None:
        edits[trailing] = cst.RemovalSentinel.REMOVE
    return proposal(finding, src, edits, imports, plan, short(tensor_test))


def proposal(finding: Finding, src: SourceFile, edits: dict, imports: tuple, plan: Plan, test: str) -> Proposal:
    notes = list(plan.notes)
    if plan.hazards:
        shown = "; ".join(plan.hazards[:3]) + (f" (and {len(plan.hazards) - 3} more)" if len(plan.hazards) > 3 else "")
        notes.insert(
            0,
            f"torch.where computes every branch: {shown}. The value of the branch not taken is "
            "discarded, its gradient is not (0 * inf = nan)",
        )
    return Proposal(
        (finding,),
        finding.rule,
        src.path,
        replace=edits,
        imports=imports,
        safety=UNSAFE if notes else SAFE,
        why=f"compute every branch and pick with torch.where instead of branching on `{test}`",
        note="; ".join(notes),
        alternative=COND_ADVICE if plan.hazards else "",
    )


# --- an `elif` on a Python value: `if T: A elif P: B else: C` -> `c = T; if P: A-or-B else: A-or-C` -------------


def _python_elif_fix(
    finding: Finding,
    src: SourceFile,
    node: cst.If,
    branches: list[Branch],
    p: int,
    tensor_test: cst.BaseExpression,
    trailing: cst.SimpleStatementLine | None,
    returns: bool,
) -> Result:
    """The tensor tests before the Python `elif` are evaluated first, as before, into temporaries; the Python
    test then chooses between two torch.where merges: the tensor branches with the `elif` branch, or with
    what follows it."""
    names = Names(src, node, trailing)
    fresh = fresh_names(names.used())
    hoisted: list[cst.SimpleStatementLine] = []
    tested: list[Mask] = []
    for k, b in enumerate(branches[:p]):
        assert b.test is not None
        mask = mask_of(src, tensor_test if k == 0 else b.test, trusted=k == 0)
        name = next(fresh)
        names.reserved.add(name)
        line = cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(cst.Name(name))], strip(mask.expr))])
        hoisted.append(with_comment(line, b.header))
        b.header = None
        tested.append(Mask(cst.Name(name), True))
    later: list[Mask] = []
    for b in branches[p + 1 :]:
        if b.test is not None:
            later.append(mask_of(src, b.test, trusted=False))
    elif_branch = branches[p]
    assert elif_branch.test is not None
    where, imports = src.torch_expr("where")
    chosen = _build(src, [*branches[:p], Branch(None, elif_branch.ops)], names, where, tested, returns)
    rest = _build(src, [*branches[:p], *branches[p + 1 :]], names, where, tested + later, returns)
    header = cst.TrailingWhitespace(whitespace=cst.SimpleWhitespace("  "), comment=elif_branch.header)
    split = cst.If(
        test=strip(elif_branch.test),
        body=cst.IndentedBlock(list(chosen.lines), header=header if elif_branch.header else cst.TrailingWhitespace()),
        orelse=cst.Else(cst.IndentedBlock(list(rest.lines))),
        leading_lines=elif_branch.comments,
    )
    edits = wrap(src, node, [*hoisted, split], None)
    if trailing is not None:
        edits[trailing] = cst.RemovalSentinel.REMOVE
    plan = Plan(
        [],
        [
            f"the Python test `{short(elif_branch.test)}` is now evaluated on every call, after the tensor "
            "test (it was evaluated only when the tensor test was false)",
            *dict.fromkeys(chosen.notes + rest.notes),
        ],
        list(dict.fromkeys(chosen.hazards + rest.hazards)),
    )
    return proposal(finding, src, edits, imports, plan, short(tensor_test))
