"""Stop caching a tensor on the module inside a compiled forward (TM208).

`if self.mask is None or self.mask.size(0) != n: self.mask = ...` makes dynamo guard on the attribute being
None and on its size, so the second call and every new size recompile. Computed as a local, the tensor is
part of the graph; built once in `__init__` (when its shape does not depend on the input), it is a buffer.
A causal mask handed to nn.Transformer* also gets `is_causal=True`, which skips the library's mask check
(`_detect_is_causal_mask`: `bool((mask == causal).all())`, a graph break on every call).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import libcst as cst
import libcst.matchers as m

from torchmend.codemods.base import UNSAFE, SAFE, Codemod, Invalid, NoFix, Proposal, Result, Valid
from torchmend.codemods.source import Context, SourceError, SourceFile
from torchmend.model import Finding, Where

# `self.mask`, `self._modules['pos'].table`, `self.mask.size()[0]` -> the attribute's own name
_VARIABLE = re.compile(r"(?:.*\.)?(?P<attr>[A-Za-z_]\w*)(?:\.size\(\)\[\d+\]|\.shape\[\d+\])?")

# nn.Transformer* modules whose forward detects a causal mask when not told: mask argument -> its hint keyword,
# as (positional index, mask keyword, hint keyword).
_TRANSFORMERS: dict[str, tuple[tuple[int, str, str], ...]] = {
    "TransformerEncoder": ((1, "mask", "is_causal"),),
    "TransformerDecoder": ((2, "tgt_mask", "tgt_is_causal"),),
    "Transformer": ((2, "src_mask", "src_is_causal"), (3, "tgt_mask", "tgt_is_causal")),
}
_TORCH_MODULES = ("torch.nn.", "torch.nn.modules.transformer.")
# Submodules nn.Transformer itself creates, for a class that subclasses it (word_language_model's shape).
_TRANSFORMER_PARTS = {"encoder": "TransformerEncoder", "decoder": "TransformerDecoder"}
_CAUSAL_FUNCTIONS = {"torch.nn.Transformer.generate_square_subsequent_mask",
                     "torch.nn.modules.transformer.Transformer.generate_square_subsequent_mask",
                     "torch.nn.modules.transformer._generate_square_subsequent_mask"}
_CONVERSIONS = {"to", "float", "half", "bfloat16", "cuda", "type", "detach", "contiguous"}


class _Refuse(Exception):
    """Internal: the shape of the code rules the fix out (carries the NoFix's reason)."""


def _self_attr(attr: str) -> m.Attribute:
    return m.Attribute(value=m.Name("self"), attr=m.Name(attr))


@dataclass
class _Cache:
    """One cache: the `if` in a method of `cls` that (re)builds `self.<attr>`."""

    src: SourceFile
    cls: cst.ClassDef
    method: cst.FunctionDef
    test: cst.If
    attr: str


def _methods(cls: cst.ClassDef) -> list[cst.FunctionDef]:
    return [s for s in cls.body.body if isinstance(s, cst.FunctionDef)]


def _caches(src: SourceFile, attr: str) -> list[_Cache]:
    """Every `if <test on self.attr>: ... self.attr = ...` written directly in a method body."""
    found = []
    for cls in src.nodes_in(src.module, cst.ClassDef):
        for fn in _methods(cls):  # type: ignore[arg-type]
            for stmt in fn.body.body:
                if not isinstance(stmt, cst.If):
                    continue
                reads = m.findall(stmt.test, _self_attr(attr))
                writes = [t for t in m.findall(stmt.body, m.AssignTarget(target=_self_attr(attr)))]
                if reads and writes:
                    found.append(_Cache(src, cls, fn, stmt, attr))  # type: ignore[arg-type]
    return found


def _locate(finding: Finding, ctx: Context, attr: str) -> _Cache | None:
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
        at_line = [c for c in caches if path == finding.path
                   and src.positions[c.cls].start.line <= finding.line <= src.positions[c.cls].end.line]
        if len(at_line) == 1:
            return at_line[0]
        if len(caches) == 1:
            return caches[0]
    return None


class _NamesUsed(cst.CSTVisitor):
    def __init__(self) -> None:
        super().__init__()
        self.names: set[str] = set()

    def visit_Name(self, node: cst.Name) -> None:
        self.names.add(node.value)

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        node.value.visit(self)  # `a.b` uses a, not b
        return False

    def visit_Arg(self, node: cst.Arg) -> bool:
        node.value.visit(self)  # `f(mask=m)` uses m, not mask
        return False


def _names_used(node: cst.CSTNode) -> set[str]:
    """Plain names in a piece of code: attribute names and keyword names left out."""
    visitor = _NamesUsed()
    node.visit(visitor)
    return visitor.names


def _target_names(target: cst.CSTNode) -> set[str]:
    """Plain names an assignment target binds (`a`, `a, (b, *c)`); none for `self.x` or `x[i]`."""
    if isinstance(target, cst.Name):
        return {target.value}
    if isinstance(target, (cst.Tuple, cst.List)):
        return {n for e in target.elements for n in _target_names(e.value)}
    if isinstance(target, cst.StarredElement):
        return _target_names(target.value)
    return set()


def _bound_in(fn: cst.FunctionDef) -> set[str]:
    """Names the function binds: its parameters and every plain name it assigns (the function's locals)."""
    params = fn.params
    names = {p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)}
    for star in (params.star_arg, params.star_kwarg):
        if isinstance(star, cst.Param):
            names.add(star.name.value)
    for node in m.findall(fn.body, m.AssignTarget() | m.AnnAssign() | m.AugAssign() | m.For() | m.NamedExpr()):
        names |= _target_names(node.target)  # type: ignore[attr-defined]
    for item in m.findall(fn.body, m.WithItem(asname=m.AsName())):
        names |= _target_names(item.asname.name)  # type: ignore[attr-defined]
    names.discard("self")
    return names


def _is_minus_inf(node: cst.CSTNode) -> bool:
    """`float("-inf")`, `-float("inf")`, `-math.inf`, `-torch.inf`, `float('-inf')`."""
    if m.matches(node, m.Call(func=m.Name("float"), args=[m.Arg(m.SimpleString())])):
        return node.args[0].value.evaluated_value.strip().lower() == "-inf"  # type: ignore[attr-defined]
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        inner = node.expression
        return (m.matches(inner, m.Attribute(attr=m.Name("inf"))) or m.matches(
            inner, m.Call(func=m.Name("float"), args=[m.Arg(m.SimpleString())])) and inner.args[0].value
            .evaluated_value.strip().lower() == "inf")  # type: ignore[attr-defined]
    return False


def _is_causal_mask(src: SourceFile, cls: cst.ClassDef, value: cst.BaseExpression, depth: int = 0) -> bool:
    """Whether `value` is a square causal mask of -inf above the diagonal: nn.Transformer's
    generate_square_subsequent_mask, torch.triu(<-inf>, diagonal=1), or a method of the class returning one."""
    while m.matches(value, m.Call(func=m.Attribute(attr=m.OneOf(*(m.Name(c) for c in _CONVERSIONS))))):
        value = value.func.value  # type: ignore[attr-defined]
    if not isinstance(value, cst.Call):
        return False
    if src.qualified_names(value.func) & _CAUSAL_FUNCTIONS:
        return True
    if m.matches(value.func, m.Attribute(attr=m.Name("triu"))) or m.matches(value.func, m.Name("triu")):
        diagonal = next((a.value for a in value.args if a.keyword and a.keyword.value == "diagonal"),
                        value.args[1].value if len(value.args) > 1 and value.args[1].keyword is None else None)
        first = value.args[0].value if value.args else None
        return (m.matches(diagonal, m.Integer("1")) and first is not None
                and any(_is_minus_inf(n) for n in src.nodes_in(first, (cst.Call, cst.UnaryOperation))))
    if depth == 0 and m.matches(value.func, m.Attribute(value=m.Name("self"))):
        name = value.func.attr.value  # type: ignore[attr-defined]
        for fn in _methods(cls):
            returns = m.findall(fn.body, m.Return())
            if fn.name.value == name and len(returns) == 1 and returns[0].value is not None:  # type: ignore[attr-defined]
                return _is_causal_mask(src, cls, returns[0].value, depth + 1)  # type: ignore[attr-defined]
    return False


def _transformer_parts(src: SourceFile, cls: cst.ClassDef) -> dict[str, str]:
    """`self.<name>` -> which nn.Transformer* module it is, from `self.<name> = nn.TransformerEncoder(...)`."""
    parts: dict[str, str] = {}
    if any(src.qualified_names(b.value) & {p + "Transformer" for p in _TORCH_MODULES} for b in cls.bases):
        parts.update(_TRANSFORMER_PARTS)
    for assign in src.nodes_in(cls, cst.Assign):
        value = assign.value  # type: ignore[attr-defined]
        targets = assign.targets  # type: ignore[attr-defined]
        if len(targets) != 1 or not m.matches(targets[0].target, m.Attribute(value=m.Name("self"))):
            continue
        if isinstance(value, cst.Call):
            for kind in _TRANSFORMERS:
                if src.qualified_names(value.func) & {p + kind for p in _TORCH_MODULES}:
                    parts[targets[0].target.attr.value] = kind
    return parts


class _Rewrite(cst.CSTTransformer):
    """`self.<attr>` -> `<local>` (reads and the write), and the causal hint on transformer calls given it."""

    def __init__(self, attr: str, local: str | None, parts: dict[str, str], causal: bool) -> None:
        super().__init__()
        self.attr, self.local, self.parts, self.causal = attr, local, parts, causal
        self.hinted: list[str] = []

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.BaseExpression:
        if self.local and m.matches(original, _self_attr(self.attr)):
            return cst.Name(self.local)
        return updated

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        part = (original.func.attr.value if m.matches(original.func, m.Attribute(value=m.Name("self")))
                else None)  # type: ignore[attr-defined]
        if not self.causal or part not in self.parts:
            return updated
        keywords = {a.keyword.value for a in original.args if a.keyword}
        positional = [a for a in original.args if a.keyword is None and not a.star]
        hints = []
        for index, mask_kw, hint in _TRANSFORMERS[self.parts[part]]:
            given = next((a.value for a in original.args if a.keyword and a.keyword.value == mask_kw),
                         positional[index].value if len(positional) > index else None)
            if given is not None and m.matches(given, _self_attr(self.attr)) and hint not in keywords:
                hints.append(hint)
        if not hints or any(a.star for a in original.args):
            return updated
        self.hinted += hints
        args = list(updated.args)
        last = args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT) if args else None
        new = [cst.Arg(cst.Name("True"), keyword=cst.Name(h), equal=cst.AssignEqual(
            whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(""))) for h in hints]
        return updated.with_changes(args=[*args[:-1], *([last] if last else []), *new])


class CachedTensorToLocal(Codemod):
    """Compute a tensor cached on the module in forward, or build it once as a buffer.

    What it does:
        TM208: a compiled `forward` keeps a tensor on the module and rebuilds it when it is missing or the
        wrong size: `if self.mask is None or self.mask.size(0) != n: self.mask = ...`.

    Why is this bad:
        Dynamo guards on what forward reads from the module: `self.mask is None` fails on the second call and
        the mask's size on every new length, so each one compiles forward again. The cache saves nothing under
        compile: building the tensor in the graph costs less than a recompile. A causal mask given to
        nn.TransformerEncoder/Decoder/Transformer without `is_causal` is also checked with
        `bool((mask == causal).all())` in torch/nn/modules/transformer.py: a graph break on every call.

    Example:
        if self.src_mask is None or self.src_mask.size(0) != len(src):
            self.src_mask = nn.Transformer.generate_square_subsequent_mask(len(src))
        out = self.encoder(src, self.src_mask)

    Fix:
        src_mask = nn.Transformer.generate_square_subsequent_mask(len(src))
        out = self.encoder(src, src_mask, is_causal=True)

        The tensor becomes a local of forward, and `self.src_mask = None` in `__init__` goes when nothing
        else reads the attribute. When the test is only `is None` and the tensor does not depend on the
        input, it becomes `self.register_buffer(name, ..., persistent=False)` at the end of `__init__`.

    Fix safety:
        Safe without the hint: the same values, computed on each call instead of kept (nothing else in the
        file reads the attribute, or nothing is proposed). Unsafe with `is_causal=True`: PyTorch trusts the
        hint and may take a different attention kernel (the mask is recognised as causal from its code, and
        the results can differ in the last bits); verify compares the numerics.
    """

    rules = ("TM208",)
    name = "cached-tensor-to-local"
    INVALID = (
        Invalid(
            """
            import torch
            from torch import nn


            class LM(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.mask = None
                    self.encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(16, 2), 2)

                def forward(self, src):
                    if self.mask is None or self.mask.size(0) != len(src):  # tm: TM208 variable=self.mask
                        self.mask = nn.Transformer.generate_square_subsequent_mask(len(src))
                    return self.encoder(src, self.mask)
            """,
            """
            import torch
            from torch import nn


            class LM(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(16, 2), 2)

                def forward(self, src):
                    mask = nn.Transformer.generate_square_subsequent_mask(len(src))  # tm: TM208 variable=self.mask
                    return self.encoder(src, mask, is_causal=True)
            """,
        ),
        # a table that depends on the input's length: a local, temporaries and all
        Invalid(
            """
            import torch
            from torch import nn


            class Positions(nn.Module):
                def __init__(self, dim):
                    super().__init__()
                    self.inv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim))
                    self.table = None

                def forward(self, x):
                    n = x.shape[1]
                    if self.table is None or self.table.shape[0] != n:  # tm: TM208 variable=self.table
                        freqs = torch.outer(torch.arange(n, dtype=torch.float32), self.inv_freq)
                        self.table = torch.cat([freqs.sin(), freqs.cos()], dim=-1)
                    return x + self.table
            """,
            """
            import torch
            from torch import nn


            class Positions(nn.Module):
                def __init__(self, dim):
                    super().__init__()
                    self.inv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim))

                def forward(self, x):
                    n = x.shape[1]
                    freqs = torch.outer(torch.arange(n, dtype=torch.float32), self.inv_freq)  # tm: TM208 variable=self.table
                    table = torch.cat([freqs.sin(), freqs.cos()], dim=-1)
                    return x + table
            """,
        ),
        # built once, whatever the input: a buffer made in __init__
        Invalid(
            """
            import torch
            from torch import nn


            class Block(nn.Module):
                def __init__(self, size):
                    super().__init__()
                    self.size = size
                    self.bias = None

                def forward(self, att):
                    if self.bias is None:  # tm: TM208 variable=self.bias
                        self.bias = torch.tril(torch.ones(self.size, self.size)).bool()
                    return att.masked_fill(~self.bias, 0.0)
            """,
            """
            import torch
            from torch import nn


            class Block(nn.Module):
                def __init__(self, size):
                    super().__init__()
                    self.size = size
                    self.register_buffer("bias", torch.tril(torch.ones(self.size, self.size)).bool(), persistent=False)

                def forward(self, att):
                    return att.masked_fill(~self.bias, 0.0)
            """,
        ),
    )
    VALID = (
        # another method reads the cache: dropping it would break that method
        Valid(
            """
            import torch
            from torch import nn


            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.mask = None

                def forward(self, x):
                    if self.mask is None or self.mask.size(0) != x.size(0):  # tm: TM208 variable=self.mask
                        self.mask = torch.ones(x.size(0))
                    return x * self.mask

                def last_mask(self):
                    return self.mask
            """,
        ),
        # the cache is also cleared elsewhere in forward: not a plain cache
        Valid(
            """
            import torch
            from torch import nn


            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.mask = None

                def forward(self, x, reset=False):
                    if reset:
                        self.mask = None
                    if self.mask is None:  # tm: TM208 variable=self.mask
                        self.mask = torch.ones_like(x)
                    return x * self.mask
            """,
        ),
    )

    def propose(self, finding: Finding, ctx: Context) -> Result:
        parsed = _VARIABLE.fullmatch(finding.variable or "")
        if parsed is None:
            return NoFix(finding, "the guard names no module attribute", _advice())
        if finding.where != Where.PROJECT and finding.user_frame is None:
            return NoFix(finding, "the cached tensor is not in this project's code", _advice())
        cache = _locate(finding, ctx, parsed["attr"])
        if cache is None:
            return NoFix(finding, f"no `if ...: self.{parsed['attr']} = ...` cache found in a method of a class "
                         "in the finding's file", _advice(), skipped=_already_local(finding, ctx, parsed["attr"]))
        try:
            return _propose(finding, cache)
        except _Refuse as e:
            return NoFix(finding, str(e), _advice())


def _advice() -> str:
    from torchmend import rules

    return rules.BY_CODE["TM208"].advice


def _already_local(finding: Finding, ctx: Context, attr: str) -> bool:
    """The finding's line no longer reads or writes `self.<attr>` (it was fixed): nothing to do."""
    try:
        stmt = ctx.file(finding.path).statement_at(finding.line)
    except SourceError:
        return False
    return stmt is not None and not m.findall(stmt, _self_attr(attr))


def _propose(finding: Finding, cache: _Cache) -> Proposal:
    src, cls, fn, test, attr = cache.src, cache.cls, cache.method, cache.test, cache.attr
    if not isinstance(test.body, cst.IndentedBlock):
        raise _Refuse(f"the `if` at line {src.line_of(test)} is on one line; put its body on lines of its own")
    if test.orelse is not None:
        raise _Refuse(f"the `if` that rebuilds self.{attr} has an else branch; move it out by hand")
    writes = [w for w in m.findall(cls, m.AssignTarget(target=_self_attr(attr)) | m.AugAssign(
        target=_self_attr(attr)) | m.AnnAssign(target=_self_attr(attr)))]
    in_test = set(m.findall(test.body, m.AssignTarget(target=_self_attr(attr))))
    init = next((f for f in _methods(cls) if f.name.value == "__init__"), None)
    init_clear = _init_clear(init, attr)
    stray = [w for w in writes if w not in in_test and (init_clear is None or w is not init_clear[1])]
    if stray:
        raise _Refuse(f"self.{attr} is also set at line {src.line_of(stray[0])}; the cache is not only rebuilt "
                      "in one place")
    if len(in_test) != 1:
        raise _Refuse(f"self.{attr} is assigned more than once in the `if` at line {src.line_of(test)}")
    value = next(iter(in_test))
    assign = src.enclosing(value, cst.Assign)
    cache_value: cst.BaseExpression = assign.value  # type: ignore[union-attr]

    # Reads outside this forward's `if` and what follows it (another method, another object): keep the attribute.
    index = list(fn.body.body).index(test)
    after = list(fn.body.body)[index + 1:]
    allowed = {id(n) for stmt in [test, *after] for n in m.findall(stmt, _self_attr(attr))}
    if init_clear is not None:
        allowed |= {id(n) for n in m.findall(init_clear[0], _self_attr(attr))}
    for node in src.nodes_in(src.module, cst.Attribute):
        if node.attr.value == attr and id(node) not in allowed:  # type: ignore[attr-defined]
            raise _Refuse(f"line {src.line_of(node)} also reads .{attr}; the cache cannot be dropped")

    made = cache_value  # `mask = <expr>; self.mask = mask`: judge <expr>
    if isinstance(made, cst.Name):
        defs = m.findall(test.body, m.Assign(targets=[m.AssignTarget(m.Name(made.value))]))
        made = defs[0].value if len(defs) == 1 else made  # type: ignore[attr-defined]
    causal = _is_causal_mask(src, cls, made)
    parts = _transformer_parts(src, cls)
    bound = _bound_in(fn)
    single_none_test = m.matches(test.test, m.Comparison(left=_self_attr(attr), comparisons=[
        m.ComparisonTarget(operator=m.Is(), comparator=m.Name("None"))]))
    as_buffer = (single_none_test and len(test.body.body) == 1 and init is not None
                 and not (_names_used(cache_value) & bound))
    if not as_buffer and not _only_cache_checks(test.test, attr):
        raise _Refuse(f"the `if` at line {src.line_of(test)} tests more than self.{attr}; split the test first")

    local = None if as_buffer else _local_name(attr, bound, fn, test)
    rewrite = _Rewrite(attr, local, parts, causal)
    edits: dict[cst.CSTNode, object] = {}
    for stmt in after:
        if m.findall(stmt, _self_attr(attr)):
            new = stmt.visit(rewrite)
            if not new.deep_equals(stmt):
                edits[stmt] = new
    insert_after: dict[cst.BaseStatement, list[cst.BaseStatement]] = {}
    if as_buffer:
        edits[test] = cst.RemovalSentinel.REMOVE
        buffer = cst.parse_statement(f'self.register_buffer("{attr}", __value__, persistent=False)\n')
        buffer = buffer.visit(_Substitute(cache_value))
        if init_clear is not None:
            edits[init_clear[0]] = buffer.with_changes(leading_lines=init_clear[0].leading_lines)
        else:
            insert_after[init.body.body[-1]] = [buffer]  # type: ignore[union-attr]
        what = f"build self.{attr} once in __init__ as a buffer"
    else:
        body = [s.visit(rewrite) for s in test.body.body]
        first = body[0].with_changes(leading_lines=[*test.leading_lines, *body[0].leading_lines])
        if isinstance(first, cst.SimpleStatementLine) and test.body.header.comment is not None \
                and first.trailing_whitespace.comment is None:
            first = first.with_changes(trailing_whitespace=test.body.header)
        body[0] = first
        edits[test] = cst.FlattenSentinel(body)
        if init_clear is not None:
            edits[init_clear[0]] = cst.RemovalSentinel.REMOVE
        what = f"compute {attr} as a local in {fn.name.value}() instead of caching it on the module"
    hint = ""
    if rewrite.hinted:
        hint = f" and pass {', '.join(f'{h}=True' for h in dict.fromkeys(rewrite.hinted))}"
    return Proposal(
        (finding,), finding.rule, src.path, replace=edits, insert_after=insert_after,  # type: ignore[arg-type]
        safety=UNSAFE if rewrite.hinted else SAFE,
        why=f"{what}{hint}, so forward no longer recompiles on `self.{attr} is None` or its size"
            + (" and the causal-mask check in nn.Transformer* no longer breaks the graph" if hint else ""),
        note=("is_causal=True tells PyTorch the mask is causal (it is built as one); the attention may take "
              "another kernel, so results can differ in the last bits") if hint else "",
        alternative="" if as_buffer else (
            f"if self.{attr} has a fixed shape, build it once in __init__ with self.register_buffer(...)"))


def _init_clear(init: cst.FunctionDef | None, attr: str) -> tuple[cst.SimpleStatementLine, cst.AssignTarget] | None:
    """`self.<attr> = None` (alone on its line) in __init__'s own body."""
    if init is None:
        return None
    for stmt in init.body.body:
        if m.matches(stmt, m.SimpleStatementLine(body=[m.Assign(targets=[m.AssignTarget(_self_attr(attr))],
                                                                value=m.Name("None"))])):
            return stmt, stmt.body[0].targets[0]  # type: ignore[attr-defined,return-value]
    return None


def _only_cache_checks(test: cst.BaseExpression, attr: str) -> bool:
    """Every operand of the `or` reads self.<attr>: the `if` is the cache check and nothing else."""
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.Or):
        return _only_cache_checks(test.left, attr) and _only_cache_checks(test.right, attr)
    return bool(m.findall(test, _self_attr(attr)))


def _local_name(attr: str, bound: set[str], fn: cst.FunctionDef, test: cst.If) -> str:
    local = attr.lstrip("_") or attr
    if local in bound or local in _names_used(fn.body):
        raise _Refuse(f"`{local}` is already a name in {fn.name.value}(); rename it, then fix again")
    # Temporaries of the `if` become locals of the whole method: they must not collide with its other names.
    temps = {n for t in m.findall(test.body, m.AssignTarget()) for n in _target_names(t.target)}  # type: ignore[attr-defined]
    outside = {n for s in fn.body.body if s is not test for n in _names_used(s)}
    clash = sorted(temps & outside)
    if clash:
        raise _Refuse(f"`{clash[0]}`, set in the cache's `if`, is also used elsewhere in {fn.name.value}()")
    return local


class _Substitute(cst.CSTTransformer):
    """Put an expression where the template says `__value__`."""

    def __init__(self, value: cst.BaseExpression) -> None:
        super().__init__()
        self.value = value

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.BaseExpression:
        return self.value if original.value == "__value__" else updated
