"""Find the cache (`if <test on self.x>: ... self.x = ...` in a method, or in an arm of an `if` there) and plan its
rewrite: a local of the method, or a buffer made in __init__, with the causal hint where the tensor is a causal mask
given to nn.Transformer*."""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import libcst as cst

from torchmend.analysis import match as m
from torchmend.analysis.source import Context, SourceError, SourceFile
from torchmend.codemods.base import SAFE, UNSAFE, Proposal, Refuse, Replacement
from torchmend.codemods.fixes.cached_tensor.arms import always_binds, clears, is_cache, nested_caches
from torchmend.codemods.fixes.cached_tensor.causal import CausalRewrite, is_causal_mask, transformer_parts
from torchmend.codemods.fixes.cached_tensor.syntax import (
    bound_in,
    methods,
    names_used,
    self_attr,
    target_names,
)
from torchmend.model import Finding


@dataclass
class Cache:
    """One cache: the `if` in a method of `cls` that (re)builds `self.<attr>`; `outer` is the statement of the
    method's body that holds it (the `if` itself, or an `if` in whose arms it is nested)."""

    src: SourceFile
    cls: cst.ClassDef
    method: cst.FunctionDef
    test: cst.If
    attr: str
    outer: cst.CSTNode


def _caches(src: SourceFile, attr: str) -> list[Cache]:
    """Every `if <test on self.attr>: ... self.attr = ...` in a method body, or in the arms of an `if` there."""
    found = []
    for cls in src.nodes_in(src.module, cst.ClassDef):
        for fn in methods(cls):
            for stmt in fn.body.body:
                if is_cache(stmt, attr):
                    found.append(Cache(src, cls, fn, cast(cst.If, stmt), attr, stmt))  # is_cache: an If
                else:
                    found += [Cache(src, cls, fn, c, attr, stmt) for c in nested_caches(stmt, attr)]
    return found


def locate(finding: Finding, ctx: Context, attr: str) -> Cache | None:
    paths = [finding.path]
    if finding.compiled_function is not None and finding.compiled_function.path:
        paths.append(finding.compiled_function.path)
    for path in dict.fromkeys(paths):
        if not ctx.in_project(path):
            continue
        try:
            src = ctx.file(path)
        except SourceError:
            continue
        caches = _caches(src, attr)
        at_line = [
            c
            for c in caches
            if path == finding.path and src.positions[c.cls].start.line <= finding.line <= src.positions[c.cls].end.line
        ]
        if len(at_line) == 1:
            return at_line[0]
        if len(caches) == 1:
            return caches[0]
    return None


def already_local(finding: Finding, ctx: Context, attr: str) -> bool:
    """The finding's line no longer reads or writes `self.<attr>` (it was fixed): nothing to do."""
    try:
        stmt = ctx.file(finding.path).statement_at(finding.line)
    except SourceError:
        return False
    return stmt is not None and not m.findall(stmt, self_attr(attr))


def plan(finding: Finding, cache: Cache) -> Proposal:
    src, cls, fn, test, attr, outer = cache.src, cache.cls, cache.method, cache.test, cache.attr, cache.outer
    nested = outer is not test
    if not isinstance(test.body, cst.IndentedBlock):
        raise Refuse(f"the `if` at line {src.line_of(test)} is on one line; put its body on lines of its own")
    if test.orelse is not None:
        raise Refuse(f"the `if` that rebuilds self.{attr} has an else branch; move it out by hand")
    init = next((f for f in methods(cls) if f.name.value == "__init__"), None)
    init_clear = _init_clear(init, attr)
    # The other arms' `self.x = None`: the local is None there (word_language_model's `else:` arm).
    cleared = clears(cast(cst.If, outer), attr) if nested else []  # nested: outer is the `if` holding the cache
    in_test = _cache_writes(src, cls, test, attr, init_clear, cleared)
    value = next(iter(in_test))
    assign = cast(cst.Assign, src.enclosing(value, cst.Assign))  # `value` is an AssignTarget: in an Assign
    cache_value: cst.BaseExpression = assign.value

    if nested:
        # In the outer `if`, self.x may only be the cache and the clears: a read in another arm is a stale value.
        expected = {id(n) for node in [test, *cleared] for n in m.findall(node, self_attr(attr))}
        other = [n for n in m.findall(outer, self_attr(attr)) if id(n) not in expected]
        if other:
            raise Refuse(f"line {src.line_of(other[0])} reads self.{attr} inside the `if` that holds the cache")
        always_binds(cast(cst.If, outer), test, cleared, src.line_of(outer), attr)

    after = _statements_after(src, fn, outer, attr, init_clear)

    made = cache_value  # `mask = <expr>; self.mask = mask`: judge <expr>
    if isinstance(made, cst.Name):
        defs = [
            d
            for d in m.findall(test.body, m.Assign(targets=[m.AssignTarget(m.Name(made.value))]))
            if isinstance(d, cst.Assign)
        ]
        made = defs[0].value if len(defs) == 1 else made
    causal = is_causal_mask(src, cls, made)
    parts = transformer_parts(src, cls)
    bound = bound_in(fn)
    single_none_test = m.matches(
        test.test,
        m.Comparison(
            left=self_attr(attr), comparisons=[m.ComparisonTarget(operator=m.Is(), comparator=m.Name("None"))]
        ),
    )
    as_buffer = not nested and single_none_test and _fits_a_buffer(test, init, cache_value, bound)
    if not as_buffer and not _only_cache_checks(test.test, attr):
        raise Refuse(f"the `if` at line {src.line_of(test)} tests more than self.{attr}; split the test first")

    local = None if as_buffer else _local_name(attr, bound, fn, test)
    # With an arm that leaves the mask None, `is_causal=True` would raise ("Need attn_mask if specifying the
    # is_causal hint"): the hint follows the mask, `is_causal=mask is not None`.
    hint_value = cst.parse_expression(f"{local} is not None") if cleared else cst.Name("True")
    rewrite = CausalRewrite(attr, local, parts, causal, hint_value)
    edits: dict[cst.CSTNode, Replacement] = {}
    for stmt in after:
        if m.findall(stmt, self_attr(attr)):
            new = cast(cst.CSTNode, stmt.visit(rewrite))  # CausalRewrite swaps expressions: a statement stays one
            if not new.deep_equals(stmt):
                edits[stmt] = new
    insert_after: dict[cst.BaseStatement, list[cst.BaseStatement]] = {}
    if as_buffer and init is not None and isinstance(init.body, cst.IndentedBlock):  # as_buffer checked both
        edits[test] = cst.RemovalSentinel.REMOVE
        _buffer_in_init(init.body, attr, cache_value, init_clear, edits, insert_after)
        what = f"build self.{attr} once in __init__ as a buffer"
    else:
        body = _body_in_place(test, rewrite)
        if nested:
            # The cache's `if` becomes its body, in its arm; each `self.x = None` becomes `x = None`.
            flat = cast(cst.CSTNode, outer.visit(_Flatten(test, body)))  # swaps one If for statements
            edits[outer] = cast(cst.CSTNode, flat.visit(rewrite))
        else:
            edits[test] = cst.FlattenSentinel(body)
        if init_clear is not None:
            edits[init_clear[0]] = cst.RemovalSentinel.REMOVE
        what = f"compute {attr} as a local in {fn.name.value}() instead of caching it on the module"
    hint = ""
    if rewrite.hinted:
        shown = cst.Module([]).code_for_node(hint_value)
        hint = f" and pass {', '.join(f'{h}={shown}' for h in dict.fromkeys(rewrite.hinted))}"
    return Proposal(
        (finding,),
        finding.rule,
        src.path,
        replace=edits,
        insert_after=insert_after,
        safety=UNSAFE if rewrite.hinted else SAFE,
        why=f"{what}{hint}, so forward no longer recompiles on `self.{attr} is None` or its size"
        + (" and the causal-mask check in nn.Transformer* no longer breaks the graph" if hint else ""),
        note=(
            "is_causal=True tells PyTorch the mask is causal (it is built as one); the attention may take "
            "another kernel, so results can differ in the last bits"
            + (f"; it is False where {local} is None, as PyTorch requires" if cleared else "")
        )
        if hint
        else "",
        alternative=""
        if as_buffer
        else (f"if self.{attr} has a fixed shape, build it once in __init__ with self.register_buffer(...)"),
    )


def _body_in_place(test: cst.If, rewrite: CausalRewrite) -> list[cst.SimpleStatementLine | cst.BaseCompoundStatement]:
    """The cache's `if` body rewritten (CausalRewrite swaps expressions: each statement stays one), to stand where
    the `if` stood: its blank lines and comments, and the `if` line's comment, kept."""
    assert isinstance(test.body, cst.IndentedBlock)  # checked by plan()
    body = [cast(cst.SimpleStatementLine | cst.BaseCompoundStatement, s.visit(rewrite)) for s in test.body.body]
    first = body[0].with_changes(leading_lines=[*test.leading_lines, *body[0].leading_lines])
    if (
        isinstance(first, cst.SimpleStatementLine)
        and test.body.header.comment is not None
        and first.trailing_whitespace.comment is None
    ):
        first = first.with_changes(trailing_whitespace=test.body.header)
    body[0] = first
    return body


def _cache_writes(
    src: SourceFile,
    cls: cst.ClassDef,
    test: cst.If,
    attr: str,
    init_clear: tuple[cst.SimpleStatementLine, cst.AssignTarget] | None,
    cleared: list[cst.SimpleStatementLine],
) -> set[cst.CSTNode]:
    """The one `self.<attr> = ...` in the cache's `if`; refuses when the class sets the attribute anywhere else but
    `__init__`'s `self.<attr> = None` and the other arms' clears."""
    writes = [
        w
        for w in m.findall(
            cls,
            m.AssignTarget(target=self_attr(attr))
            | m.AugAssign(target=self_attr(attr))
            | m.AnnAssign(target=self_attr(attr)),
        )
    ]
    in_test = set(m.findall(test.body, m.AssignTarget(target=self_attr(attr))))
    arm_writes = {id(cast(cst.Assign, c.body[0]).targets[0]) for c in cleared}  # clears matched `self.x = None`
    stray = [
        w
        for w in writes
        if w not in in_test and id(w) not in arm_writes and (init_clear is None or w is not init_clear[1])
    ]
    if stray:
        raise Refuse(
            f"self.{attr} is also set at line {src.line_of(stray[0])}; the cache is not only rebuilt in one place"
        )
    if len(in_test) != 1:
        raise Refuse(f"self.{attr} is assigned more than once in the `if` at line {src.line_of(test)}")
    return in_test


def _statements_after(
    src: SourceFile,
    fn: cst.FunctionDef,
    outer: cst.CSTNode,
    attr: str,
    init_clear: tuple[cst.SimpleStatementLine, cst.AssignTarget] | None,
) -> list[cst.CSTNode]:
    """The statements of forward after the cache's `if`; refuses when the attribute is read anywhere else (another
    method, another object): the attribute must then stay."""
    index = list(fn.body.body).index(outer)
    after = list(fn.body.body)[index + 1 :]
    allowed = {id(n) for stmt in [outer, *after] for n in m.findall(stmt, self_attr(attr))}
    if init_clear is not None:
        allowed |= {id(n) for n in m.findall(init_clear[0], self_attr(attr))}
    for node in src.nodes_in(src.module, cst.Attribute):
        if node.attr.value == attr and id(node) not in allowed:
            raise Refuse(f"line {src.line_of(node)} also reads .{attr}; the cache cannot be dropped")
    return after


def _fits_a_buffer(
    test: cst.If, init: cst.FunctionDef | None, cache_value: cst.BaseExpression, bound: set[str]
) -> bool:
    """The cache's `if` only builds the tensor, from what `__init__` can see too, and `__init__` ends without a
    return: the tensor can be built once there, as a buffer (register_buffer takes a tensor, not `0` or `None`)."""
    return (
        isinstance(test.body, cst.IndentedBlock)
        and len(test.body.body) == 1
        and init is not None
        and isinstance(init.body, cst.IndentedBlock)
        and not m.findall(init.body.body[-1], m.Return())
        and not (names_used(cache_value) & bound)
        and bool(m.findall(cache_value, m.Call()))
    )


def _buffer_in_init(
    body: cst.IndentedBlock,
    attr: str,
    cache_value: cst.BaseExpression,
    init_clear: tuple[cst.SimpleStatementLine, cst.AssignTarget] | None,
    edits: dict[cst.CSTNode, Replacement],
    insert_after: dict[cst.BaseStatement, list[cst.BaseStatement]],
) -> None:
    """`self.register_buffer("<attr>", <value>, persistent=False)` at the end of __init__ (what the tensor is built
    from, self.size..., may be set after `self.<attr> = None`), in place of that line when it is the last."""
    buffer = cst.parse_statement(f'self.register_buffer("{attr}", __value__, persistent=False)\n')
    buffer = cast(cst.SimpleStatementLine, buffer.visit(_Substitute(cache_value)))  # it swaps a Name only
    last = body.body[-1]
    if init_clear is not None and init_clear[0] is last:
        edits[last] = buffer.with_changes(leading_lines=init_clear[0].leading_lines)
    else:
        if init_clear is not None:
            edits[init_clear[0]] = cst.RemovalSentinel.REMOVE
        insert_after[last] = [buffer]


def _init_clear(init: cst.FunctionDef | None, attr: str) -> tuple[cst.SimpleStatementLine, cst.AssignTarget] | None:
    """`self.<attr> = None` (alone on its line) in __init__'s own body."""
    if init is None:
        return None
    for stmt in init.body.body:
        if m.matches(
            stmt,
            m.SimpleStatementLine(body=[m.Assign(targets=[m.AssignTarget(self_attr(attr))], value=m.Name("None"))]),
        ):
            line = cast(cst.SimpleStatementLine, stmt)  # the matcher just checked the shape
            return line, cast(cst.Assign, line.body[0]).targets[0]
    return None


def _only_cache_checks(test: cst.BaseExpression, attr: str) -> bool:
    """Every operand of the `or` reads self.<attr>: the `if` is the cache check and nothing else."""
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.Or):
        return _only_cache_checks(test.left, attr) and _only_cache_checks(test.right, attr)
    return bool(m.findall(test, self_attr(attr)))


def _local_name(attr: str, bound: set[str], fn: cst.FunctionDef, test: cst.If) -> str:
    local = attr.lstrip("_") or attr
    if local in bound or local in names_used(fn.body):
        raise Refuse(f"`{local}` is already a name in {fn.name.value}(); rename it, then fix again")
    # Temporaries of the `if` become locals of the whole method: they must not collide with its other names.
    targets = [t for t in m.findall(test.body, m.AssignTarget()) if isinstance(t, cst.AssignTarget)]
    temps = {n for t in targets for n in target_names(t.target)}
    outside = names_used(fn.body, skip=test)
    clash = sorted(temps & outside)
    if clash:
        raise Refuse(f"`{clash[0]}`, set in the cache's `if`, is also used elsewhere in {fn.name.value}()")
    return local


class _Flatten(cst.CSTTransformer):
    """Put the cache's body where its `if` is, inside the arm that holds it."""

    def __init__(self, test: cst.If, body: list[cst.SimpleStatementLine | cst.BaseCompoundStatement]) -> None:
        super().__init__()
        self.test, self.body = test, body

    def leave_If(self, original: cst.If, updated: cst.If) -> cst.BaseStatement | cst.FlattenSentinel[cst.BaseStatement]:
        return cst.FlattenSentinel(self.body) if original is self.test else updated


class _Substitute(cst.CSTTransformer):
    """Put an expression where the template says `__value__`."""

    def __init__(self, value: cst.BaseExpression) -> None:
        super().__init__()
        self.value = value

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.BaseExpression:
        return self.value if original.value == "__value__" else updated
