"""The calls of a compiled function, and the argument each passes for a parameter (bound as Python binds it)."""

from __future__ import annotations

from typing import Union

import libcst as cst

from torchmend.analysis import bind, callee, referents
from torchmend.analysis.source import Context, SourceFile

_Key = Union[frozenset, tuple]


def params_of(fn: cst.FunctionDef) -> tuple[list[cst.Param], list[cst.Param]]:
    """(positional-capable parameters, keyword-only parameters)."""
    p = fn.params
    return [*p.posonly_params, *p.params], list(p.kwonly_params)


def bind_argument(fn: cst.FunctionDef, call: cst.Call, name: str, skip_first: bool) -> tuple[cst.Arg | None, str]:
    """The argument of `call` that parameter `name` of `fn` receives, or (None, why not)."""
    binding = bind(call, fn, skip_first)
    return binding.arg(name), binding.why_not(name)


def calls_compiled(src: SourceFile, call: cst.Call, fn: cst.FunctionDef, method: bool, ctx: Context) -> bool:
    """Whether `call` surely calls `fn`: the def the call reaches (an alias, `torch.compile(f)`, a method
    through an instance, a module's forward through `module(x)`, in this file or another of the project),
    or, when torchmend cannot tell what the call reaches, a call by the def's own name (as a method, for a
    method)."""
    found = callee(src, call.func, ctx)
    if found is not None:
        return found.fn is fn
    func = call.func
    if method:
        return isinstance(func, cst.Attribute) and func.attr.value == fn.name.value
    return isinstance(func, cst.Name) and func.value == fn.name.value


def call_key(src: SourceFile, call: cst.Call) -> _Key:
    """What makes two calls call the same object: the same bindings of the name, or the same attribute."""
    func = call.func
    if isinstance(func, cst.Name):
        bound = referents(src, func)
        if bound:
            return frozenset(bound)
    cls = src.enclosing(call, cst.ClassDef)
    return ("code", src.code(func), cls.name.value if isinstance(cls, cst.ClassDef) else None)
