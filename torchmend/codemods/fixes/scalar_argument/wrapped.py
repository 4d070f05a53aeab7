"""A number that reaches the compiled function through a wrapper's `*args` / `**kwargs` (TM202).

A decorator's `def wrapper(self, *args, **kwargs): ... func(self, *args, **kwargs)` or a gradient-checkpointing
`forward_with_checkpointing(self, *args, **kwargs)` is what dynamo compiles, so its guards name the wrapper's own
parameters: `args[2]`, `kwargs['temperature']`. The call site binds them: the call passes `args[2]` as its third
positional argument after `self`, `kwargs['temperature']` as `temperature=`. The function the wrapper forwards to
(the def under the decorator, found from the call) says which of its parameters that is, and the fix wraps the
argument at the call site, where the value enters the compiled region.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import libcst as cst

from torchmend.analysis import Callee, callee
from torchmend.analysis.binding import bind, packed_argument
from torchmend.analysis.calls import forwarding_call, wrappers_of
from torchmend.analysis.containers import loop_element_callee
from torchmend.analysis.source import Context, SourceFile
from torchmend.model import Finding


@dataclass(frozen=True)
class Wrapped:
    """Where a wrapper's `*args[i]` / `**kwargs[k]` comes from: the call site and the wrapped def's parameter."""

    call: cst.Call  # the call in the user's code that reaches the wrapper
    csrc: SourceFile  # the file of the call
    arg: cst.Arg  # the argument the guard names
    fn: cst.FunctionDef  # the wrapped def (its parameter is the number)
    src: SourceFile  # the wrapped def's file
    param: str  # the wrapped def's parameter that receives `arg`
    wrapper: cst.FunctionDef


@dataclass(frozen=True)
class Unbound:
    """Why the guard's `*args` / `**kwargs` entry could not be tied to a call and a parameter, in words."""

    reason: str
    said: str = ""  # what the argument is, when the call site showed it (`args[2]` is `bias` at line 776)


STAR_WHY = (
    "the guard is on which arguments the calls pass (how many positional ones, which names), not on a number's "
    "value; a tensor cannot stand for that"
)
STAR_ADVICE = (
    "call it the same way every time: pass the optional arguments by keyword, `None` included, so each call "
    "packs the same tuple and dict (each distinct way of calling compiles once)"
)


def star_parameter(fns: list[cst.FunctionDef], name: str) -> str | None:
    """`*args of wrapper()` when `name` is the `*args` / `**kwargs` parameter of one of `fns`, else None."""
    for fn in fns:
        p = fn.params
        for star, param in (("*", p.star_arg), ("**", p.star_kwarg)):
            if isinstance(param, cst.Param) and param.name.value == name:
                return f"the {star}{name} of {fn.name.value}()"
    return None


def wrapper_for(fns: list[cst.FunctionDef], star: str, key: int | str) -> cst.FunctionDef | None:
    """The def among `fns` (the finding's function, the compiled one) whose `*star` / `**star` the guard names."""
    for fn in fns:
        p = fn.params
        if isinstance(key, int) and isinstance(p.star_arg, cst.Param) and p.star_arg.name.value == star:
            return fn
        if isinstance(key, str) and p.star_kwarg is not None and p.star_kwarg.name.value == star:
            return fn
    return None


def _named(star: str, key: int | str) -> str:
    return f"{star}[{key}]" if isinstance(key, int) else f"{star}[{key!r}]"


def compiled_def(ctx: Context, finding: Finding) -> cst.FunctionDef | None:
    """The def of the finding's compiled function (named by its `def` line or a decorator line), in the project."""
    cf = finding.compiled_function
    if cf is None or cf.path.startswith("<") or not ctx.in_project(cf.path):  # `<string>`: exec-made code
        return None
    src = ctx.file(cf.path)
    for node in src.nodes_in(src.module, cst.FunctionDef):
        first = min([src.line_of(d) for d in node.decorators] + [src.line_of(node)])
        if first <= cf.line <= src.line_of(node):
            return node
    return src.function_at(cf.line)


def bind_through(
    finding: Finding, ctx: Context, wrapper: cst.FunctionDef, star: str, key: int | str
) -> Wrapped | Unbound:
    """The call site's argument and the wrapped def's parameter behind the wrapper's `*star[key]`."""
    name, wname = _named(star, key), wrapper.name.value
    if forwarding_call(wrapper) is None:
        return Unbound(f"`{name}` is the *{star} of {wname}(), which does not pass its *args / **kwargs on whole")
    site = finding.call_site
    if site is None:
        return Unbound(f"torchmend did not see where {wname}() is called from")
    if not ctx.in_project(site.path):
        return Unbound(f"{wname}() is called from {site.path}, outside the project")
    csrc = ctx.file(site.path)
    stmt = csrc.statement_at(site.line)
    calls: list[cst.Call] = csrc.nodes_in(stmt, cst.Call) if stmt is not None else []
    # A call whose def is wrapped by this wrapper (a decorator of the project), else the one call on the line
    # that is not torch's or a builtin (`layer(h, mask, bias)` with `layer` from a ModuleList).
    reached: list[tuple[cst.Call, Callee | None]] = [
        (c, t) for c in calls for t in [callee(csrc, c.func, ctx)] if t is not None and _wraps(t, wrapper, ctx)
    ]
    if not reached:
        unknown = [
            c
            for c in calls
            if callee(csrc, c.func, ctx) is None
            and not any(q.startswith(("torch.", "builtins.")) for q in csrc.qualified_names(c.func))
        ]
        if len(unknown) != 1:
            return Unbound(
                f"cannot tell which call at line {site.line} reaches {wname}()"
                + (f" ({len(unknown)} calls there could)" if unknown else " (no call there could)")
            )
        func = unknown[0].func  # `for layer in self.layers: layer(h)`: the class of the container's modules
        element = loop_element_callee(csrc, func, ctx) if isinstance(func, cst.Name) else None
        reached = [(unknown[0], element if element is not None and _wraps(element, wrapper, ctx) else None)]
    if len(reached) != 1:
        return Unbound(f"{len(reached)} calls at line {site.line} reach {wname}(); cannot tell which recompiles")
    call, target = reached[0]
    first = [*wrapper.params.posonly_params, *wrapper.params.params]
    bound = target.bound if target is not None else bool(first) and first[0].name.value in ("self", "cls")
    arg, why = packed_argument(bind(call, wrapper, bound), star, key)
    if arg is None:
        return Unbound(f"cannot tell which argument at line {site.line} is `{name}` of {wname}(): {why}")
    said = f"`{name}` is `{csrc.code(arg.value)}` at line {site.line}, passed on by {wname}()"
    if target is None:
        return Unbound(
            f"{said} to a function torchmend cannot find from `{csrc.code(call.func)}`, so it cannot check how that "
            "function uses the number",
            said,
        )
    inner = bind(call, target.fn, target.bound)
    param = next((p for p, a in inner.args.items() if a is arg), None)
    if param is None:
        param = next((p for p, held in inner.packed.items() if any(a is arg for a in held)), None)
        why = f"it lands in {target.fn.name.value}()'s *{param}" if param else inner.error or "it binds to nothing"
        return Unbound(f"{said}, but {why}", said)
    return Wrapped(call, csrc, arg, target.fn, target.src, param, wrapper)


def _wraps(target: Callee, wrapper: cst.FunctionDef, ctx: Context) -> bool:
    """Whether the def a call reaches runs through `wrapper`: the wrapper itself, or a def one of whose decorators
    returns it."""
    return target.fn is wrapper or any(w is wrapper for w in wrappers_of(target.src, target.fn, ctx))


_NONE_GUARD = re.compile(r"(?:^|\s)is(?: not)? None\s*$|but found <class 'NoneType'>")


def none_guard(guard: str | None) -> bool:
    """A guard on whether a value is None (`bias is None`, `expected type of 'bias' to be a tensor type ...
    but found <class 'NoneType'>`): a value that is None on some calls and not on others, not a changing number."""
    return bool(_NONE_GUARD.search((guard or "").split("#")[0]))


_EXPECTED_TYPE = re.compile(r"expected type of '(?P<name>[^']+)'")


def guarded_name(finding: Finding) -> str:
    """The variable a guard is on; torch 2.13's `expected type of 'x' to be a tensor type` names it in quotes."""
    found = _EXPECTED_TYPE.search(finding.guard or "")
    return found["name"] if found else finding.variable or ""
