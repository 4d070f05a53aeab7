"""The compiled call behind a size recompile and its tensor argument: where the compiled object was made (its
torch.compile call), which argument the guard names, whether a mark can go right before the call, and the
compile call's `dynamic=True` edit (the mark-dynamic fix, mark_dynamic/__init__.py)."""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst
from libcst.metadata import ComprehensionScope

from torchmend.analysis import Callee, bind, callee, compile_site
from torchmend.analysis import match as m
from torchmend.analysis.dynamo_tables import MARK_DYNAMIC
from torchmend.analysis.source import Context, SourceFile


@dataclass(frozen=True, eq=False)
class Origin:
    """How the called object was compiled: a `torch.compile(...)` call, a `@torch.compile` decorator, or
    `module.compile(...)`; `callee` is the compiled def when the source shows it (to bind parameter names)."""

    node: cst.CSTNode
    callee: Callee | None = None


def guarded_variable(var: str | None) -> tuple[str, int | str] | None:
    """('pos', 0) for `args[0]`, ('kw', 'x') for `kwargs['x']`, ('name', 'x') for `x` or `L['x']`."""
    if not var:
        return None
    try:
        expr = cst.parse_expression(var)
    except cst.ParserSyntaxError:
        return None
    if isinstance(expr, cst.Name):
        return "name", expr.value
    if (
        isinstance(expr, cst.Subscript)
        and isinstance(expr.value, cst.Name)
        and len(expr.slice) == 1
        and isinstance(expr.slice[0].slice, cst.Index)
    ):
        key = expr.slice[0].slice.value
        if expr.value.value == "args" and isinstance(key, cst.Integer):
            return "pos", int(key.value)
        if isinstance(key, cst.SimpleString) and isinstance(key.evaluated_value, str):
            if expr.value.value == "kwargs":
                return "kw", key.evaluated_value
            if expr.value.value == "L":  # dynamo's frame locals: a parameter of the compiled function
                return "name", key.evaluated_value
    return None


def origin_of(src: SourceFile, func: cst.BaseExpression, ctx: Context) -> Origin | None:
    """Where the called object `func` was compiled, when this file shows it, and the def it runs."""
    site = compile_site(src, func)
    return Origin(site, callee(src, func, ctx)) if site is not None else None


def argument_of(
    call: cst.Call,
    kind: str,
    key: int | str,
    found: Callee | None,
) -> tuple[cst.BaseExpression | None, str]:
    """The argument behind dynamo's `args[i]` / `kwargs['k']` / `L['name']`, or (None, why not)."""
    if kind == "name" and found is not None:
        binding = bind(call, found.fn, found.bound)
        arg = binding.arg(str(key))
        return (
            (arg.value, "")
            if arg is not None
            else (None, f"{found.fn.name.value}() receives `{key}` but {binding.why_not(str(key))}")
        )
    positional = []
    for arg in call.args:
        if arg.star:  # *args / **kwargs: positions and names are no longer known
            return None, f"the call passes {arg.star}{'args' if arg.star == '*' else 'kwargs'}"
        if arg.keyword is None:
            positional.append(arg.value)
        elif kind != "pos" and arg.keyword.value == key:
            return arg.value, ""
    if kind == "pos":
        if isinstance(key, int) and key < len(positional):
            return positional[key], ""
        return None, f"the call has {len(positional)} positional arguments"
    return None, f"the call does not pass `{key}` by name, and torchmend cannot see which def it runs"


def placement_problem(src: SourceFile, stmt: cst.BaseStatement, call: cst.Call, arg: cst.Name) -> str:
    """Why a statement inserted before `stmt` would not run right before each call with `arg`, or ''."""
    if isinstance(src.scopes.get(arg), ComprehensionScope):
        return f"`{arg.value}` is bound inside a comprehension"
    if src.scopes.get(arg) is not src.scopes.get(stmt):
        return f"`{arg.value}` is bound inside the statement (a lambda's parameter)"
    if isinstance(stmt, cst.SimpleStatementLine):
        return ""
    if isinstance(stmt, cst.While):
        return "the call is in a `while` test, which runs again on every iteration"
    if isinstance(stmt, cst.If) and isinstance(src.parents.get(stmt), cst.If):
        return "the call is in an `elif` test"
    body = getattr(stmt, "body", None)
    if body is not None and body in set(src.ancestors(call)):
        return "the call is in a one-line block body (`for ...: f(x)`)"
    return ""


def already_marked(src: SourceFile, stmt: cst.BaseStatement, name: str, dim: int) -> bool:
    block = src.parents.get(stmt)
    siblings = list(getattr(block, "body", ()))
    if stmt not in siblings:
        return False
    for before in siblings[: siblings.index(stmt)]:
        for call in src.nodes_in(before, cst.Call):
            if not (src.qualified_names(call.func) & MARK_DYNAMIC) or len(call.args) < 2:
                continue
            if not m.matches(call.args[0].value, m.Name(name)):
                continue
            dims = call.args[1].value
            values = [e.value for e in dims.elements] if isinstance(dims, (cst.List, cst.Tuple)) else [dims]
            if any(isinstance(v, cst.Integer) and int(v.value) == dim for v in values):
                return True
    return False


def dynamic_true(src: SourceFile, origin: Origin) -> tuple[cst.CSTNode, cst.CSTNode] | str | None:
    """(node, replacement) that turns on `dynamic=True` where the object was compiled, why not (a string),
    or None when it is already on."""
    node = origin.node
    if isinstance(node, cst.Decorator) and not isinstance(node.decorator, cst.Call):
        dynamic = cst.Call(
            node.decorator,
            [
                cst.Arg(
                    cst.Name("True"),
                    keyword=cst.Name("dynamic"),
                    equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")),
                )
            ],
        )
        return node, node.with_changes(decorator=dynamic)
    call = node.decorator if isinstance(node, cst.Decorator) else node
    assert isinstance(call, cst.Call)
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == "dynamic":
            if m.matches(arg.value, m.Name("True")):
                return None
            if m.matches(arg.value, m.Name("None")):
                return arg.value, cst.Name("True")
            return f"the compile call says dynamic={src.code(arg.value)}; torchmend does not override that choice"
        if arg.star == "**":
            return "the compile call passes **kwargs, which may already set `dynamic`"
    args = list(call.args)
    new = cst.Arg(
        cst.Name("True"),
        keyword=cst.Name("dynamic"),
        equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")),
    )
    if args:
        last = args[-1]
        sep = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
        if isinstance(last.comma, cst.Comma):
            # A trailing comma stays at the end; the new argument is separated as the others are (one per
            # line in a multi-line call).
            new = new.with_changes(comma=last.comma)
            before = args[-2].comma if len(args) > 1 else cst.Comma(whitespace_after=call.whitespace_before_args)
            sep = before if isinstance(before, cst.Comma) else sep
        args[-1] = last.with_changes(comma=sep)
    return call, call.with_changes(args=[*args, new])
