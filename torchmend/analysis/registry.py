"""The classes a model is built from when the training script names its class indirectly, as research repositories
do: through a registry dict (`{'informer': Informer}[name](args)`, `MODELS = {...}; MODELS[args.model](args)`,
`self.model_dict[name].Model(args)` with modules for values), through importlib
(`getattr(importlib.import_module('models.informer'), 'Informer')(args)`, `importlib.import_module(m).Net()`), or
through a module attribute (`models.informer.Informer(args)`). The key is not known statically: every class the
registry holds may be built, as every arm of `A() if c else B()` may (calls.instance_classes)."""

from __future__ import annotations

from pathlib import Path

import libcst as cst

from torchmend.analysis.names import class_named
from torchmend.analysis.source import Context, SourceError, SourceFile

Found = list[tuple[SourceFile, cst.ClassDef]]
_IMPORT_MODULE = ("importlib.import_module", "importlib.__import__")


def constructed_classes(src: SourceFile, func: cst.BaseExpression, ctx: Context | None, depth: int = 0) -> Found:
    """The project classes that calling `func` may construct, when `func` names a class in one of the ways above."""
    if ctx is None or depth > 4:
        return []
    if isinstance(func, cst.Name):
        hit = class_named(src, func.value, ctx)
        if hit is not None:
            return [hit]
        return [c for v in _values(src, func) for c in constructed_classes(src, v, ctx, depth + 1)]
    if isinstance(func, cst.Subscript):  # MODELS[name], {...}[name], self.models[name]
        return _distinct([c for v in _registry(src, func.value) for c in constructed_classes(src, v, ctx, depth + 1)])
    if isinstance(func, cst.Attribute):  # models.informer.Informer, import_module(m).Net, model_dict[name].Model
        return _distinct(
            [c for path in _modules(src, func.value, ctx, depth) for c in _class_in(path, func.attr.value, ctx)]
        )
    if isinstance(func, cst.Call) and _is_getattr(src, func):  # getattr(module, "Informer")
        module, name = func.args[0].value, func.args[1].value
        if isinstance(name, cst.SimpleString) and isinstance(name.evaluated_value, str):
            return _distinct(
                [c for path in _modules(src, module, ctx, depth) for c in _class_in(path, name.evaluated_value, ctx)]
            )
    return []


def _values(src: SourceFile, name: cst.Name) -> list[cst.BaseExpression]:
    """What a name may hold, by its plain assignments (`Model = MODELS[name]`)."""
    return [v for r in src.referents(name) for v in [src.assigned_value(r)] if v is not None]


def _registry(src: SourceFile, holder: cst.BaseExpression, depth: int = 0) -> list[cst.BaseExpression]:
    """The values of the dict (or list, tuple) `holder` is: a display, a name assigned one, `self.x` set to one."""
    if isinstance(holder, cst.Dict):
        return [e.value for e in holder.elements if isinstance(e, cst.DictElement)]
    if isinstance(holder, (cst.List, cst.Tuple)):
        return [e.value for e in holder.elements if isinstance(e, cst.Element)]
    if depth > 3:
        return []
    if isinstance(holder, cst.Name):
        return [e for v in _values(src, holder) for e in _registry(src, v, depth + 1)]
    if isinstance(holder, cst.Attribute) and isinstance(holder.value, cst.Name):
        from torchmend.analysis.calls import self_attr_values

        return [e for v in self_attr_values(src, holder) for e in _registry(src, v, depth + 1)]
    return []


def _modules(src: SourceFile, expr: cst.BaseExpression, ctx: Context, depth: int) -> list[str]:
    """The project files of the module `expr` is: an imported module or package (`informer` of `from models import
    informer`, `models.informer`), `importlib.import_module("models.informer")`, a name assigned one of those, or
    any of the modules a registry holds (`model_dict[name]`)."""
    if depth > 4:
        return []
    if isinstance(expr, cst.Call) and src.is_qualified(expr.func, *_IMPORT_MODULE) and expr.args:
        arg = expr.args[0].value
        if isinstance(arg, cst.SimpleString) and isinstance(arg.evaluated_value, str):
            return _files(src, ctx, arg.evaluated_value)
        return []
    if isinstance(expr, cst.Subscript):
        return list(dict.fromkeys(p for v in _registry(src, expr.value) for p in _modules(src, v, ctx, depth + 1)))
    found = [p for q in src.qualified_names(expr) for p in _files(src, ctx, q)]
    if not found and isinstance(expr, cst.Name):
        found = [p for v in _values(src, expr) for p in _modules(src, v, ctx, depth + 1)]
    return list(dict.fromkeys(found))


def _files(src: SourceFile, ctx: Context, dotted: str) -> list[str]:
    """The project files of the module `dotted` (`a.b`: a/b.py or a/b/__init__.py), from the project root or
    beside the importing file."""
    if not dotted or dotted.startswith("."):
        return []
    parts = dotted.split(".")
    found = []
    for root in (Path(ctx.project_root), Path(src.path).parent):
        base = root.joinpath(*parts)
        for candidate in (base.with_suffix(".py"), base / "__init__.py"):
            if candidate.is_file() and ctx.in_project(str(candidate)) and str(candidate) not in found:
                found.append(str(candidate))
    return found


def _class_in(path: str, name: str, ctx: Context) -> Found:
    try:
        other = ctx.file(path)
    except SourceError:
        return []
    hit = class_named(other, name, ctx)  # defined there, or imported there from another project file
    return [hit] if hit is not None else []


def _is_getattr(src: SourceFile, call: cst.Call) -> bool:
    return (
        isinstance(call.func, cst.Name)
        and call.func.value == "getattr"
        and not src.referents(call.func)  # the builtin, not a def of the file's
        and len(call.args) >= 2
        and all(a.keyword is None and not a.star for a in call.args[:2])
    )


def _distinct(classes: Found) -> Found:
    return list({id(c[1]): c for c in classes}.values())
