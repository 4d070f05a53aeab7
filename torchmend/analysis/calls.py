"""What a call runs, and which functions a file compiles."""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import cast

import libcst as cst

from torchmend.analysis import match as m
from torchmend.analysis.names import class_named, def_named, is_method, method_of, os_same, self_name
from torchmend.analysis.registry import constructed_classes
from torchmend.analysis.source import Context, SourceFile
from torchmend.model import Finding


@dataclass(frozen=True, eq=False)
class Callee:
    """The def a called expression runs: `fn` in `src`; `bound` when Python passes its first parameter
    itself (a method through an instance, a module's forward through `module(x)`); `compiled_at` is where it
    was compiled (a decorator, a `torch.compile(...)` call or a `module.compile()` call), when it was."""

    fn: cst.FunctionDef
    src: SourceFile
    bound: bool = False
    compiled_at: cst.CSTNode | None = None
    owner: cst.ClassDef | None = None  # the class of the instance, for a bound method


# nn.Module methods that return the module itself: `Net().to(device)`, `Net().train()` are still a Net.
_RETURNS_SELF = ("to", "train", "eval", "cuda", "cpu", "float", "half", "double", "bfloat16", "requires_grad_")


def compile_target(src: SourceFile, value: cst.BaseExpression) -> cst.BaseExpression | None:
    """`torch.compile(model, ...)` -> `model`."""
    if (
        isinstance(value, cst.Call)
        and src.is_qualified(value.func, "torch.compile")
        and value.args
        and value.args[0].keyword is None
        and not value.args[0].star
    ):
        return value.args[0].value
    return None


def compile_decorator(src: SourceFile, fn: cst.FunctionDef) -> cst.Decorator | None:
    """The `@torch.compile` / `@torch.compile(...)` decorator of a def."""
    for dec in fn.decorators:
        target = dec.decorator.func if isinstance(dec.decorator, cst.Call) else dec.decorator
        if src.is_qualified(target, "torch.compile"):
            return dec
    return None


def self_attr_values(src: SourceFile, attr: cst.Attribute) -> list[cst.BaseExpression]:
    """Values assigned to `self.<name>` in the methods of the class that uses `self.<name>`."""
    if not isinstance(attr.value, cst.Name):
        return []
    cls = src.enclosing(attr, cst.ClassDef)
    if cls is None:
        return []
    found = []
    for target in src.nodes_in(cls, cst.Attribute):
        if (
            isinstance(target, cst.Attribute)
            and target.attr.value == attr.attr.value
            and isinstance(target.value, cst.Name)
            and target.value.value == attr.value.value
        ):
            value = src.assigned_value(target)
            if value is not None:
                found.append(value)
    return found


def instance_classes(
    src: SourceFile,
    expr: cst.BaseExpression,
    ctx: Context | None = None,
    depth: int = 0,
) -> list[tuple[SourceFile, cst.ClassDef]]:
    """Every class the object `expr` may hold, in source order: `Net(...)`, `torch.compile(Net(...))`, each arm
    of `A(...) if c else B(...)`, a name assigned one of those by any binding that reaches the read (both arms of
    an if/else, a try and its except, `model = Net(); model = torch.compile(model)` included), `self` inside a
    method. A binding whose class the source does not show (`model = torch.load(f)`) adds none."""
    if depth > 4:
        return []
    target = compile_target(src, expr)
    if target is not None:
        return instance_classes(src, target, ctx, depth + 1)
    if isinstance(expr, cst.IfExp):
        return _distinct(
            [*instance_classes(src, expr.body, ctx, depth + 1), *instance_classes(src, expr.orelse, ctx, depth + 1)]
        )
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name):
        hit = class_named(src, expr.func.value, ctx)
        return [hit] if hit is not None else constructed_classes(src, expr.func, ctx)  # `Model = MODELS[name]`
    if isinstance(expr, cst.Call) and m.matches(expr.func, m.Attribute(attr=m.OneOf(*map(m.Name, _RETURNS_SELF)))):
        return instance_classes(src, cast(cst.Attribute, expr.func).value, ctx, depth + 1)  # Net().to(device)
    if isinstance(expr, cst.Call) and not _torch_call(src, expr):  # MODELS[name](args), importlib, models.x.Net()
        return constructed_classes(src, expr.func, ctx)
    if isinstance(expr, cst.Attribute) and m.matches(expr.value, m.Name("self")):
        return _distinct([c for v in self_attr_values(src, expr) for c in instance_classes(src, v, ctx, depth + 1)])
    if isinstance(expr, cst.Name):
        refs = src.referents(expr)
        if len(refs) == 1 and isinstance(refs[0], cst.Param):
            fn = src.enclosing(refs[0], cst.FunctionDef)
            if isinstance(fn, cst.FunctionDef) and self_name(src, fn) == expr.value:
                cls = src.enclosing(fn, cst.ClassDef)
                return [(src, cls)] if isinstance(cls, cst.ClassDef) else []
            return []
        return _distinct(
            [
                c
                for r in reaching(src, expr, refs)
                for v in [src.assigned_value(r)]
                if v is not None
                for c in instance_classes(src, v, ctx, depth + 1)
            ]
        )
    return []


def _torch_call(src: SourceFile, call: cst.Call) -> bool:
    """`torch.nn.Linear(...)`, `nn.Sequential(...)`: no project class is built (nothing to look for on disk)."""
    return any(q == "torch" or q.startswith("torch.") for q in src.qualified_names(call.func))


def instance_class(
    src: SourceFile,
    expr: cst.BaseExpression,
    ctx: Context | None = None,
) -> tuple[SourceFile, cst.ClassDef] | None:
    """The class of the object `expr` holds, when the source shows exactly one (see instance_classes); None when it
    may hold several (`model = A() if c else B()`): a fix that edits one class must not guess which."""
    found = instance_classes(src, expr, ctx)
    return found[0] if len(found) == 1 else None


def _distinct(classes: list[tuple[SourceFile, cst.ClassDef]]) -> list[tuple[SourceFile, cst.ClassDef]]:
    return list({id(c[1]): c for c in classes}.values())


def reaching(src: SourceFile, name: cst.Name, refs: list[cst.CSTNode]) -> list[cst.CSTNode]:
    """The bindings among `refs` (the scope's bindings of `name`) that may hold its value where `name` is read, in
    source order. In straight-line code of the read's own scope, a binding further down, or the one whose value
    holds the read (`model = torch.compile(model)` reads the binding before it), cannot; in a loop, or for a read
    in another scope (a def reading a global, run who knows when), every binding may."""
    refs = sorted(refs, key=lambda r: (src.positions[r].start.line, src.positions[r].start.column))  # a set's order
    if src.enclosing(name, (cst.For, cst.While)) is not None:
        return refs
    scope, line = src.scopes.get(name), src.line_of(name)
    return [r for r in refs if src.scopes.get(r) is not scope or not (src.line_of(r) > line or _holds(src, r, name))]


def _holds(src: SourceFile, binding: cst.CSTNode, read: cst.Name) -> bool:
    """Whether `read` is inside the value `binding` is assigned."""
    value = src.assigned_value(binding)
    return value is not None and any(a is value for a in src.ancestors(read))


def callee(
    src: SourceFile,
    func: cst.BaseExpression,
    ctx: Context | None = None,
    depth: int = 0,
) -> Callee | None:
    """The def that calling `func` runs, when the source shows it: a def (or an alias of one), a compiled
    def (`fast = torch.compile(step)`), a method through an instance (`teacher.update`, `self.step`), a
    module's forward (`model(x)`, `torch.compile(model)(x)`)."""
    if depth > 4:
        return None
    target = compile_target(src, func)
    if target is not None:
        found = callee(src, target, ctx, depth + 1)
        return _compiled(found, func) if found is not None else None
    if isinstance(func, cst.Name):
        refs = src.referents(func)
        defs = [r for r in refs if isinstance(r, cst.FunctionDef)]
        if len(refs) == 1 and defs:
            return Callee(defs[0], src, compiled_at=compile_decorator(src, defs[0]))
        if len(refs) == 1 and isinstance(refs[0], (cst.Import, cst.ImportFrom)) and ctx is not None:
            hit = def_named(src, func.value, ctx)
            return Callee(hit[1], hit[0], compiled_at=compile_decorator(*hit)) if hit is not None else None
        callees = [
            c
            for r in refs
            for v in [src.assigned_value(r)]
            if v is not None
            for c in [callee(src, v, ctx, depth + 1)]
            if c is not None
        ]
        if len({id(c.fn) for c in callees}) == 1:
            if len(instance_classes(src, func, ctx)) > 1:
                return None  # `net = A() if c else B()`: the one forward found is one of several; a fix must not pick
            compiled = next((c for c in callees if c.compiled_at is not None), callees[0])
            return compiled
        return _forward(src, func, ctx) if not callees else None
    if isinstance(func, cst.Attribute):
        if m.matches(func.value, m.Name("self")):
            values = self_attr_values(src, func)
            if len(values) == 1:
                found = callee(src, values[0], ctx, depth + 1)
                if found is not None:
                    return found
        owner = instance_class(src, func.value, ctx)
        if owner is not None:
            fn = method_of(owner[0], owner[1], func.attr.value)
            if fn is not None:
                return Callee(
                    fn,
                    owner[0],
                    bound=is_method(owner[0], fn),
                    owner=owner[1],
                    compiled_at=compile_decorator(owner[0], fn),
                )
        return None
    if isinstance(func, cst.Call):
        return _forward(src, func, ctx)
    return None


def _forward(src: SourceFile, obj: cst.BaseExpression, ctx: Context | None) -> Callee | None:
    """`model(x)`: the forward of the module `model` holds."""
    owner = instance_class(src, obj, ctx)
    if owner is None:
        return None
    fn = method_of(owner[0], owner[1], "forward")
    if fn is None:
        return None
    compiled_at = _module_compile(src, obj) if isinstance(obj, cst.Name) else None
    return Callee(fn, owner[0], bound=True, owner=owner[1], compiled_at=compiled_at)


def module_forwards(src: SourceFile, obj: cst.BaseExpression, ctx: Context | None = None) -> list[Callee]:
    """`model(x)`: the forward of every module class `model` may hold (`model = A() if c else B()`: both)."""
    compiled_at = _module_compile(src, obj) if isinstance(obj, cst.Name) else None
    return [
        Callee(fn, owner[0], bound=True, owner=owner[1], compiled_at=compiled_at)
        for owner in instance_classes(src, obj, ctx)
        for fn in [method_of(owner[0], owner[1], "forward")]
        if fn is not None
    ]


def candidate_callees(src: SourceFile, func: cst.BaseExpression, ctx: Context | None = None) -> list[Callee]:
    """Every def calling `func` may run: the one `callee` names, else, where the object may be of several classes
    (`model = A() if c else B()`), the method of each (`model.generate(x)`) or the forward of each (`model(x)`).
    For what runs somewhere (lint's compiled region); a fix that edits one def asks `callee`, which will not guess."""
    one = callee(src, func, ctx)
    if one is not None:
        return [one]
    if isinstance(func, cst.Attribute):
        methods = [
            Callee(
                fn, owner[0], bound=is_method(owner[0], fn), owner=owner[1], compiled_at=compile_decorator(owner[0], fn)
            )
            for owner in instance_classes(src, func.value, ctx)
            for fn in [method_of(owner[0], owner[1], func.attr.value)]
            if fn is not None
        ]
        if methods:
            return methods
    return module_forwards(src, func, ctx)


def _compiled(found: Callee, site: cst.CSTNode) -> Callee:
    return Callee(found.fn, found.src, found.bound, site, found.owner)


def _module_compile(src: SourceFile, name: cst.Name) -> cst.Call | None:
    """`model.compile(...)` (nn.Module.compile, in place) on the same name, in the same scope."""
    refs = src.referents(name)
    if not refs:
        return None
    scope = src.scopes.get(refs[0])
    for call in src.nodes_in(src.module, cst.Call):
        if (
            isinstance(call.func, cst.Attribute)
            and m.matches(call.func, m.Attribute(value=m.Name(name.value), attr=m.Name("compile")))
            and src.scopes.get(call.func.value) is scope
        ):
            return call
    return None


# --- compiled functions -------------------------------------------------------------------------------


_COMPILED: weakref.WeakKeyDictionary[SourceFile, dict[cst.FunctionDef, cst.CSTNode]] = weakref.WeakKeyDictionary()


def compiled_functions(src: SourceFile) -> dict[cst.FunctionDef, cst.CSTNode]:
    """The defs of this file the file itself compiles, each with where: `@torch.compile`, `torch.compile(f)`
    (stored under any name), `torch.compile(obj.method)`, `torch.compile(model)` / `model.compile()` (the
    class's forward; the forward of each class `model` may hold)."""
    found = _COMPILED.get(src)
    if found is not None:
        return found
    found = {}
    for fn in src.nodes_in(src.module, cst.FunctionDef):
        dec = compile_decorator(src, fn)
        if dec is not None:
            found[fn] = dec
    for call in src.nodes_in(src.module, cst.Call):
        target = compile_target(src, call)
        hits: list[Callee] = []
        if target is not None:
            hits = candidate_callees(src, target)
        elif isinstance(call.func, cst.Attribute) and m.matches(
            call, m.Call(func=m.Attribute(attr=m.Name("compile")), args=[])
        ):
            hits = module_forwards(src, call.func.value)  # model.compile(): nn.Module.compile, in place
        for hit in hits:  # a name that may hold one of several modules compiles the forward of each
            if hit.src is src and hit.fn not in found:
                found[hit.fn] = call
    _COMPILED[src] = found
    return found


def is_compiled(src: SourceFile, fn: cst.FunctionDef) -> bool:
    """Whether this file compiles `fn` itself (see compiled_functions)."""
    return fn in compiled_functions(src)


def functions_for(src: SourceFile, finding: Finding) -> list[cst.FunctionDef]:
    """The function the finding's line is in, then the compiled function's definition (its `def` or a
    decorator line): where to look for the finding's variable."""
    found: list[cst.FunctionDef] = []
    fn = src.function_at(finding.line)
    if fn is not None:
        found.append(fn)
    cf = finding.compiled_function
    if cf is not None and os_same(cf.path, src.path):
        for node in src.nodes_in(src.module, cst.FunctionDef):
            first = min([src.line_of(d) for d in node.decorators] + [src.line_of(node)])
            if first <= cf.line <= src.line_of(node) and node not in found:
                found.append(node)
        inner = src.function_at(cf.line)
        if inner is not None and inner not in found:
            found.append(inner)
    return found


def compile_site(src: SourceFile, func: cst.BaseExpression) -> cst.CSTNode | None:
    """Where the called object `func` was compiled, when this file shows it: a `@torch.compile` decorator, a
    `torch.compile(...)` call, or `model.compile()` (nn.Module.compile, in place). Found even when the def
    it runs is not (`model = torch.compile(net)` with `net` a parameter)."""
    if isinstance(func, cst.Name):
        refs = src.referents(func)
        if len(refs) > 1:
            # `model = Net(); model = torch.compile(model)`: the one binding that compiles is the one called.
            found = [
                v for r in refs for v in [src.assigned_value(r)] if v is not None and compile_target(src, v) is not None
            ]
            return found[0] if len(found) == 1 else None
        if not refs:
            return None
        ref = refs[0]
        if isinstance(ref, cst.FunctionDef):
            return compile_decorator(src, ref)
        value = src.assigned_value(ref)
        if value is not None and compile_target(src, value) is not None:
            return value
        return _module_compile(src, func)
    if isinstance(func, cst.Attribute):
        values = self_attr_values(src, func)
        if len(values) == 1 and compile_target(src, values[0]) is not None:
            return values[0]
    return None


# --- wrappers: a def that stands in for another and passes its *args / **kwargs on ---------------------------


def forwarding_call(fn: cst.FunctionDef) -> cst.Call | None:
    """The call in `fn`'s body that passes `fn`'s own `*args` (and `**kwargs`, when it has them) on: the wrapped
    function's call in a decorator's `def wrapper(self, *args, **kwargs): ... func(self, *args, **kwargs)`."""
    p = fn.params
    star = p.star_arg.name.value if isinstance(p.star_arg, cst.Param) else None
    kwstar = p.star_kwarg.name.value if p.star_kwarg is not None else None
    if star is None and kwstar is None:
        return None
    for call in _calls_in(fn):
        spread = {(a.star, a.value.value) for a in call.args if a.star and isinstance(a.value, cst.Name)}
        if (star is None or ("*", star) in spread) and (kwstar is None or ("**", kwstar) in spread):
            return call
    return None


def _calls_in(fn: cst.FunctionDef) -> list[cst.Call]:
    found: list[cst.Call] = []

    class _Calls(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            found.append(node)

    fn.body.visit(_Calls())
    return found


def wrappers_of(src: SourceFile, fn: cst.FunctionDef, ctx: Context | None = None) -> list[cst.FunctionDef]:
    """The defs that run in place of `fn`: for each decorator of `fn` that is a def of the project
    (`@capture_outputs`), the def nested in it that forwards its *args / **kwargs (its `wrapper`); and the
    wrappers a base class installs over it (subclass_wrappers)."""
    found: list[cst.FunctionDef] = []
    for dec in fn.decorators:
        target = dec.decorator.func if isinstance(dec.decorator, cst.Call) else dec.decorator
        deco = callee(src, target, ctx)
        if deco is None:
            continue
        found += [
            inner
            for inner in deco.src.nodes_in(deco.fn.body, cst.FunctionDef)
            if inner is not deco.fn and forwarding_call(inner) is not None
        ]
    return found + subclass_wrappers(src, fn, ctx)


def subclass_wrappers(src: SourceFile, fn: cst.FunctionDef, ctx: Context | None = None) -> list[cst.FunctionDef]:
    """The defs a base class installs in place of method `fn` when a subclass is made: a gradient-checkpointing
    base whose `__init_subclass__` does `forward = cls.forward`, defines `def forward_with_checkpointing(self,
    *args, **kwargs)` that forwards to it, and sets `cls.forward = forward_with_checkpointing`."""
    cls = src.enclosing(fn, cst.ClassDef)
    found: list[cst.FunctionDef] = []
    seen: set[int] = set()
    todo = [(src, cls)] if isinstance(cls, cst.ClassDef) else []
    while todo and len(seen) < 8:
        csrc, c = todo.pop()
        if id(c) in seen:
            continue
        seen.add(id(c))
        hook = next(
            (s for s in c.body.body if isinstance(s, cst.FunctionDef) and s.name.value == "__init_subclass__"), None
        )
        if hook is not None:
            found += _installed(csrc, hook, fn.name.value)
        for base in c.bases:
            if isinstance(base.value, cst.Name):
                hit = class_named(csrc, base.value.value, ctx)
                if hit is not None:
                    todo.append(hit)
    return found


def _installed(src: SourceFile, hook: cst.FunctionDef, name: str) -> list[cst.FunctionDef]:
    """Nested defs of `hook` that forward their *args / **kwargs and that `hook` assigns to `cls.<name>`."""
    cls_param = next(iter([*hook.params.posonly_params, *hook.params.params]), None)
    owner = cls_param.name.value if cls_param is not None else "cls"
    assigned = {
        a.value.value
        for a in src.nodes_in(hook.body, cst.Assign)
        if isinstance(a.value, cst.Name)
        and any(m.matches(t.target, m.Attribute(value=m.Name(owner), attr=m.Name(name))) for t in a.targets)
    }
    return [
        inner
        for inner in src.nodes_in(hook.body, cst.FunctionDef)
        if inner.name.value in assigned and forwarding_call(inner) is not None
    ]
