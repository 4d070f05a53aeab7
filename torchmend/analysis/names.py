"""Names, bindings, classes and defs: where a name comes from, in this file or another of the project."""

from __future__ import annotations

import builtins
import os
from pathlib import Path
from typing import TypeVar, cast

import libcst as cst
from libcst.helpers import get_full_name_for_node
from libcst.metadata import Assignment, BaseAssignment

from torchmend.analysis import match as m
from torchmend.analysis.source import Context, SourceError, SourceFile
from torchmend.analysis.torch_ops import TENSOR_CONSTRUCTORS

_Def = TypeVar("_Def", cst.ClassDef, cst.FunctionDef)  # what _named looks up: a class or a def


def builtin_or_math(src: SourceFile, func: cst.BaseExpression) -> str | None:
    """`range`, `math.exp`, ...: the name of a builtin or math function, else None."""
    for q in src.qualified_names(func):
        # libcst names the method of a parenthesized expression `builtins.None` (`(a * b).sum`): not a builtin.
        if q.startswith(("builtins.", "math.")) and q != "builtins.None":
            return q.split(".", 1)[1]
    if isinstance(func, cst.Name) and not src.qualified_names(func) and hasattr(builtins, func.value):
        return func.value
    return None


def is_torch(src: SourceFile, func: cst.BaseExpression) -> bool:
    return any(q.startswith("torch.") for q in src.qualified_names(func))


def is_print(src: SourceFile, call: cst.Call) -> bool:
    """A call of the builtin print (not a def or import of the file that shadows the name)."""
    return isinstance(call.func, cst.Name) and (
        src.is_qualified(call.func, "builtins.print")
        or (call.func.value == "print" and not src.qualified_names(call.func))
    )


def is_tensor_construction(src: SourceFile, expr: cst.BaseExpression) -> bool:
    """`torch.tensor(v)`, `torch.full(...)`, `x.new_tensor(v)` ...: already a tensor."""
    if not isinstance(expr, cst.Call):
        return False
    if src.qualified_names(expr.func) & TENSOR_CONSTRUCTORS:
        return True
    return m.matches(expr.func, m.Attribute(attr=m.Name("new_tensor") | m.Name("new_full")))


def reads(src: SourceFile, root: cst.CSTNode, name: str) -> list[cst.Name]:
    """The Name nodes under `root` that read `name` (not assignment targets, attributes or keywords)."""
    found = []
    for node in src.nodes_in(root, cst.Name):
        if node.value != name:
            continue
        scope = src.scopes.get(node)
        if scope is not None and any(a.node is node for a in scope.accesses[node]):
            found.append(node)
    return found


def referents(src: SourceFile, name: cst.Name) -> set[Assignment]:
    """The bindings a read of a name refers to (every assignment that may have set it). Builtins (`float`,
    `range`) bind no node of the file and are left out."""
    scope = src.scopes.get(name)
    if scope is None:
        return set()
    return {r for a in scope.accesses[name] if a.node is name for r in a.referents if isinstance(r, Assignment)}


def ordered_names(expr: cst.CSTNode) -> list[cst.Name]:
    """Plain names read in an expression, in source order (attribute bases included, attribute names and
    keywords not)."""
    names: list[cst.Name] = []

    class _V(cst.CSTVisitor):
        def visit_Name(self, n: cst.Name) -> None:
            names.append(n)

        def visit_Attribute(self, n: cst.Attribute) -> bool:
            n.value.visit(self)
            return False

        def visit_Arg(self, n: cst.Arg) -> bool:
            n.value.visit(self)
            return False

    expr.visit(_V())
    return names


def parameters(fn: cst.FunctionDef) -> list[cst.Param]:
    """Every parameter of a def, in order: positional, keyword-only, then *args and **kwargs."""
    p = fn.params
    every = [*p.posonly_params, *p.params, *p.kwonly_params]
    return every + [s for s in (p.star_arg, p.star_kwarg) if isinstance(s, cst.Param)]


def param_names(fn: cst.FunctionDef) -> list[str]:
    return [q.name.value for q in parameters(fn)]


def is_method(src: SourceFile, fn: cst.FunctionDef) -> bool:
    """Defined directly in a class body, and not a staticmethod: its first parameter is self (or cls)."""
    block = src.parents.get(fn)
    parent = src.parents.get(block) if block is not None else None  # FunctionDef -> IndentedBlock -> ClassDef
    if not isinstance(parent, cst.ClassDef):
        return False
    return not any(m.matches(d.decorator, m.Name("staticmethod")) for d in fn.decorators)


def self_name(src: SourceFile, fn: cst.FunctionDef) -> str | None:
    p = [*fn.params.posonly_params, *fn.params.params]
    return p[0].name.value if p and is_method(src, fn) else None


def binding_statement(src: SourceFile, b: BaseAssignment) -> cst.Assign | cst.AnnAssign | cst.AugAssign | None:
    """The Assign / AnnAssign / AugAssign that binds `b`, or None when it is bound some other way."""
    if not isinstance(b, Assignment) or not isinstance(b.node, cst.Name):
        return None
    parent = src.parents.get(b.node)
    if isinstance(parent, cst.AssignTarget):
        assign = src.parents.get(parent)
        if isinstance(assign, cst.Assign) and len(assign.targets) == 1:
            return assign
        return None
    if isinstance(parent, (cst.AnnAssign, cst.AugAssign)) and parent.target is b.node:
        return parent
    return None


def assigned_values(src: SourceFile, name: cst.Name) -> list[cst.BaseExpression]:
    """The values a name read may hold: the right-hand sides of its plain assignments, unpacked tuples
    matched element by element."""
    values: list[cst.BaseExpression] = []
    for b in referents(src, name):
        stmt = binding_statement(src, b)
        if isinstance(stmt, (cst.Assign, cst.AnnAssign)) and stmt.value is not None:
            values.append(stmt.value)
            continue
        value = unpacked_value(src, b.node)
        if value is not None:
            values.append(value)
    return values


def unpacked_value(src: SourceFile, target: cst.CSTNode) -> cst.BaseExpression | None:
    """`a, b = x, y`: the element of the value tuple that `target` receives."""
    element = src.parents.get(target)
    tup = src.parents.get(element) if isinstance(element, cst.Element) else None
    holder = src.parents.get(tup) if isinstance(tup, cst.Tuple) else None
    assign = src.parents.get(holder) if isinstance(holder, cst.AssignTarget) else None
    if (
        isinstance(assign, cst.Assign)
        and isinstance(assign.value, cst.Tuple)
        and isinstance(tup, cst.Tuple)
        and len(assign.value.elements) == len(tup.elements)
    ):
        return assign.value.elements[tup.elements.index(element)].value
    return None


def os_same(a: str, b: str) -> bool:
    return os.path.realpath(a) == os.path.realpath(b)


# --- classes and defs, in this file or (with a Context) imported from another file of the project -------


def class_named(
    src: SourceFile,
    name: str,
    ctx: Context | None,
    depth: int = 0,
) -> tuple[SourceFile, cst.ClassDef] | None:
    """The module-level class `name` of this file, or the one `from <module> import name` brings in from a
    project file (re-exports followed)."""
    found = _named(src, name, ctx, depth, cst.ClassDef)
    return found


def def_named(
    src: SourceFile,
    name: str,
    ctx: Context | None,
    depth: int = 0,
) -> tuple[SourceFile, cst.FunctionDef] | None:
    return _named(src, name, ctx, depth, cst.FunctionDef)


def _named(
    src: SourceFile,
    name: str,
    ctx: Context | None,
    depth: int,
    kind: type[_Def],
) -> tuple[SourceFile, _Def] | None:
    if depth > 4:
        return None
    for stmt in src.module.body:
        if isinstance(stmt, kind) and stmt.name.value == name:
            return src, stmt
    if ctx is None:
        return None
    for stmt in src.module.body:
        for small in getattr(stmt, "body", ()) if isinstance(stmt, cst.SimpleStatementLine) else ():
            if not isinstance(small, cst.ImportFrom) or isinstance(small.names, cst.ImportStar):
                continue
            for alias in small.names:
                # An import's `as` names a Name (only a `with` item's may be a tuple).
                bound = cast(cst.Name, alias.asname.name).value if alias.asname else alias.name.value
                if bound != name or not isinstance(alias.name, cst.Name):
                    continue
                for path in module_files(src, ctx, small):
                    try:
                        other = ctx.file(path)
                    except SourceError:
                        continue
                    hit = _named(other, alias.name.value, ctx, depth + 1, kind)
                    if hit is not None:
                        return hit
    return None


def module_files(src: SourceFile, ctx: Context, imp: cst.ImportFrom) -> list[str]:
    """The project files `from <module> import ...` may mean: relative to the importing file for a relative
    import, else under the project root or beside the importing file."""
    # A module is a Name or an Attribute: it always has a dotted name.
    parts = cast(str, get_full_name_for_node(imp.module)).split(".") if imp.module is not None else []
    here = Path(src.path).parent
    if imp.relative:
        for _ in range(len(imp.relative) - 1):
            here = here.parent
        roots = [here]
    else:
        roots = [Path(ctx.project_root), here]
    found = []
    for root in roots:
        base = root.joinpath(*parts)
        for candidate in ([base.with_suffix(".py")] if parts else []) + [base / "__init__.py"]:
            if candidate.is_file() and ctx.in_project(str(candidate)) and str(candidate) not in found:
                found.append(str(candidate))
    return found


def method_of(src: SourceFile, cls: cst.ClassDef, name: str, depth: int = 0) -> cst.FunctionDef | None:
    """`name` defined in the class body, or in a base class of the same file."""
    for stmt in cls.body.body:
        if isinstance(stmt, cst.FunctionDef) and stmt.name.value == name:
            return stmt
    if depth < 6:
        for base in cls.bases:
            if isinstance(base.value, cst.Name):
                refs = src.referents(base.value)
                if len(refs) == 1 and isinstance(refs[0], cst.ClassDef):
                    found = method_of(src, refs[0], name, depth + 1)
                    if found is not None:
                        return found
    return None
