"""What a module in a container runs: `for layer in self.layers: layer(h)`, with `self.layers` a ModuleList,
Sequential, ModuleDict entry, list or comprehension of modules the source shows."""

from __future__ import annotations

from typing import cast

import libcst as cst

from torchmend.analysis import match as m
from torchmend.analysis.calls import Callee, compile_target, instance_class, instance_classes, self_attr_values
from torchmend.analysis.names import method_of
from torchmend.analysis.source import Context, SourceFile

_CONTAINERS = ("torch.nn.ModuleList", "torch.nn.Sequential", "torch.nn.modules.container.ModuleList")


def loop_element_callee(src: SourceFile, name: cst.Name, ctx: Context | None = None) -> Callee | None:
    """`for layer in self.layers: layer(h)`: the forward that every module of the container runs, when they are
    all of one class (`nn.ModuleList([Block(...) for _ in range(n)])`, `nn.Sequential(Block(), Block())`)."""
    refs = src.referents(name)
    loop = src.parents.get(refs[0]) if len(refs) == 1 else None
    if not isinstance(loop, cst.For) or loop.target is not refs[0]:
        return None
    elements = _elements(src, loop.iter)
    classes = [instance_class(src, e, ctx) for e in elements]
    if not classes or any(c is None for c in classes) or len({id(c[1]) for c in classes if c}) != 1:
        return None
    owner = classes[0]
    assert owner is not None
    fn = method_of(owner[0], owner[1], "forward")
    return Callee(fn, owner[0], bound=True, owner=owner[1]) if fn is not None else None


def _appended(src: SourceFile, attr: cst.Attribute) -> list[cst.BaseExpression]:
    """What the class's methods append to `self.<attr>` (`self.block = nn.ModuleList()`, then
    `self.block.append(Block(...))` in a loop)."""
    cls = src.enclosing(attr, cst.ClassDef)
    if cls is None:
        return []
    shape = m.Call(
        func=m.Attribute(value=m.Attribute(value=m.Name("self"), attr=m.Name(attr.attr.value)), attr=m.Name("append"))
    )
    return [c.args[0].value for c in src.nodes_in(cls, cst.Call) if m.matches(c, shape) and len(c.args) == 1]


def _dict_entry(src: SourceFile, expr: cst.BaseExpression, key: str) -> cst.BaseExpression:
    """What `nn.ModuleDict(dict(key=value))` or `nn.ModuleDict({"key": value})` holds under `key` (else a
    `cst.Name("None")`, which holds nothing)."""
    none = cst.Name("None")
    if not (isinstance(expr, cst.Call) and src.qualified_names(expr.func) & {"torch.nn.ModuleDict"} and expr.args):
        return none
    held = expr.args[0].value
    if isinstance(held, cst.Call) and m.matches(held.func, m.Name("dict")):
        return next((a.value for a in held.args if a.keyword is not None and a.keyword.value == key), none)
    if isinstance(held, cst.Dict):
        for el in held.elements:
            if (
                isinstance(el, cst.DictElement)
                and isinstance(el.key, cst.SimpleString)
                and el.key.evaluated_value == key
            ):
                return el.value
    return none


def _elements(src: SourceFile, expr: cst.BaseExpression, depth: int = 0) -> list[cst.BaseExpression]:
    """The module expressions a container expression holds: `self.layers` (its assigned values), a ModuleList /
    Sequential call, a list, tuple or list comprehension."""
    if depth > 3:
        return []
    if isinstance(expr, cst.Attribute) and m.matches(expr.value, m.Name("self")):
        held = [e for v in self_attr_values(src, expr) for e in _elements(src, v, depth + 1)]
        return held + _appended(src, expr)
    if isinstance(expr, cst.Attribute) and m.matches(expr.value, m.Attribute(value=m.Name("self"))):
        # `self.transformer.h`, with `self.transformer = nn.ModuleDict(dict(h=nn.ModuleList([...])))`
        inner = cast(cst.Attribute, expr.value)
        return [
            e
            for v in self_attr_values(src, inner)
            for e in _elements(src, _dict_entry(src, v, expr.attr.value), depth + 1)
        ]
    if isinstance(expr, cst.Call) and src.qualified_names(expr.func) & set(_CONTAINERS):
        if len(expr.args) == 1 and not expr.args[0].star and isinstance(expr.args[0].value, (cst.List, cst.ListComp)):
            return _elements(src, expr.args[0].value, depth + 1)
        return [a.value for a in expr.args if not a.star and a.keyword is None]
    if isinstance(expr, (cst.List, cst.Tuple)):
        return [e.value for e in expr.elements if isinstance(e, cst.Element)]
    if isinstance(expr, cst.ListComp):
        return [expr.elt]
    if isinstance(expr, cst.Subscript) and all(isinstance(s.slice, cst.Slice) for s in expr.slice):
        return _elements(src, expr.value, depth + 1)  # `self.layers[: config.num_hidden_layers]`: the same modules
    return []


_ALL_CONTAINERS = frozenset({*_CONTAINERS, "torch.nn.ModuleDict", "torch.nn.modules.container.Sequential"})


def _held(src: SourceFile, expr: cst.BaseExpression, depth: int) -> list[cst.BaseExpression]:
    """The module expressions a container expression holds, whatever their classes (a ModuleDict's values too):
    `nn.Sequential(A(), B())`, `nn.ModuleList([...])`, `nn.ModuleDict({"a": A()})`, a name or `self.<attr>` bound
    to one, `self.heads["a"]`, `torch.compile(<one of those>)`."""
    if depth > 4:
        return []
    target = compile_target(src, expr)
    if target is not None:
        return _held(src, target, depth + 1)
    if isinstance(expr, cst.Subscript):
        return _held(src, expr.value, depth + 1)
    if isinstance(expr, cst.Name):
        bound = [src.assigned_value(r) for r in src.referents(expr)]
        return [e for v in bound if v is not None for e in _held(src, v, depth + 1)]
    if isinstance(expr, cst.Attribute) and m.matches(expr.value, m.Name("self")):
        return [e for v in self_attr_values(src, expr) for e in _held(src, v, depth + 1)] + _appended(src, expr)
    if not (isinstance(expr, cst.Call) and src.qualified_names(expr.func) & _ALL_CONTAINERS):
        return []
    if src.qualified_names(expr.func) & {"torch.nn.ModuleDict"}:
        held = expr.args[0].value if expr.args else None
        if isinstance(held, cst.Dict):
            return [el.value for el in held.elements if isinstance(el, cst.DictElement)]
        if isinstance(held, cst.Call) and m.matches(held.func, m.Name("dict")):
            return [a.value for a in held.args if a.keyword is not None]
        return []
    return _elements(src, expr, depth + 1)


def container_forwards(src: SourceFile, expr: cst.BaseExpression, ctx: Context | None = None) -> list[Callee]:
    """The forward of every module a container runs (`nn.Sequential(Block(), Head())` compiled or called, a
    ModuleList or ModuleDict held by the module), one per class, nested containers followed. For what runs
    somewhere (lint's compiled region): unlike `loop_element_callee`, the classes need not be alike."""
    found: list[Callee] = []
    seen: set[int] = set()
    todo = [(e, 0) for e in _held(src, expr, 0)]
    while todo:
        element, depth = todo.pop(0)
        inner = _held(src, element, depth + 1) if depth < 3 else []
        if inner:
            todo += [(e, depth + 1) for e in inner]
            continue
        for owner in instance_classes(src, element, ctx):
            fn = method_of(owner[0], owner[1], "forward")
            if fn is not None and id(fn) not in seen:
                seen.add(id(fn))
                found.append(Callee(fn, owner[0], bound=True, owner=owner[1]))
    return found
