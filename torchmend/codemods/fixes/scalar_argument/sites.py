"""The calls of a compiled function, and the argument each passes for a parameter (bound as Python binds it)."""

from __future__ import annotations
from typing import Union

import libcst as cst
import libcst.matchers as m

from torchmend.codemods.analysis import assigned_values, bind, compile_target, referents
from torchmend.codemods.source import SourceFile


_Key = Union[frozenset, tuple]


def _params(fn: cst.FunctionDef) -> tuple[list[cst.Param], list[cst.Param]]:
    """(positional-capable parameters, keyword-only parameters)."""
    p = fn.params
    return [*p.posonly_params, *p.params], list(p.kwonly_params)


def _bind(fn: cst.FunctionDef, call: cst.Call, name: str, skip_first: bool) -> tuple[cst.Arg | None, str]:
    """The argument of `call` that parameter `name` of `fn` receives, or (None, why not)."""
    binding = bind(call, fn, skip_first)
    return binding.arg(name), binding.why_not(name)


def _instance_of(src: SourceFile, expr: cst.BaseExpression, cls: str, depth: int = 0) -> bool:
    """`Cls(...)`, `torch.compile(Cls(...))`, or a name assigned one of those."""
    if depth > 3:
        return False
    if isinstance(expr, cst.Call):
        target = compile_target(src, expr)
        if target is not None:
            return _instance_of(src, target, cls, depth + 1)
        func = expr.func
        return (isinstance(func, cst.Name) and func.value == cls) or (
            isinstance(func, cst.Attribute) and func.attr.value == cls)
    if isinstance(expr, cst.Name):
        return any(_instance_of(src, v, cls, depth + 1) for v in assigned_values(src, expr))
    return False


def _calls_compiled(src: SourceFile, call: cst.Call, fn_name: str, cls: str | None) -> bool:
    """Whether `call` surely calls the compiled function: by its name, through `torch.compile(f)`, as a
    method, or (for a forward) on an instance of its module."""
    func = call.func
    if cls is None:
        if not isinstance(func, cst.Name):
            return False
        return func.value == fn_name or any(m.matches(compile_target(src, v), m.Name(fn_name))
                                            for v in assigned_values(src, func))
    if isinstance(func, cst.Attribute) and func.attr.value == fn_name:
        return True
    return fn_name == "forward" and isinstance(func, cst.Name) and _instance_of(src, func, cls)


def _key(src: SourceFile, call: cst.Call) -> _Key:
    """What makes two calls call the same object: the same bindings of the name, or the same attribute."""
    func = call.func
    if isinstance(func, cst.Name):
        bound = referents(src, func)
        if bound:
            return frozenset(bound)
    cls = src.enclosing(call, cst.ClassDef)
    return ("code", src.code(func), cls.name.value if isinstance(cls, cst.ClassDef) else None)
