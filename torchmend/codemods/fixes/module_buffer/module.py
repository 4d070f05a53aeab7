"""Module classes of a file and the uses of one attribute in them: reads, writes, and what needs a number."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Union

import libcst as cst

from torchmend.analysis import match as m
from torchmend.analysis.source import SourceFile
from torchmend.analysis.torch_ops import INT_ARGUMENT_CALLS, INT_KEYWORDS, LOG_METHODS, MODULE_CLASSES

_NOT_MODULES = {"Parameter", "Buffer", "UninitializedParameter", "UninitializedBuffer"}


Write = Union[cst.Assign, cst.AnnAssign, cst.AugAssign]  # a statement that sets `<self>.<attr>`


@dataclass
class Uses:
    """Every place the class family touches `<self>.<attr>`."""

    writes: list[Write] = field(default_factory=list)
    reads: list[cst.Attribute] = field(default_factory=list)  # read in a computation (not in its own update)
    # `x.<attr>` elsewhere in the file: (line, code, what it does with it where a number is needed, or None)
    outside_reads: list[tuple[int, str, str | None]] = field(default_factory=list)


# --- classes -----------------------------------------------------------------------------------------


def classes_in(src: SourceFile) -> dict[str, cst.ClassDef]:
    found: dict[str, cst.ClassDef] = {}
    for cls in src.nodes_in(src.module, cst.ClassDef):
        found.setdefault(cls.name.value, cls)
    return found


def _bases_in_file(cls: cst.ClassDef, classes: dict[str, cst.ClassDef]) -> list[cst.ClassDef]:
    return [
        classes[b.value.value]
        for b in cls.bases
        if b.keyword is None and isinstance(b.value, cst.Name) and b.value.value in classes
    ]


def lineage_of(cls: cst.ClassDef, classes: dict[str, cst.ClassDef]) -> list[cst.ClassDef]:
    """The class and its bases defined in this file, most derived first."""
    order, todo = [], [cls]
    while todo:
        c = todo.pop(0)
        if c not in order:
            order.append(c)
            todo.extend(_bases_in_file(c, classes))
    return order


def is_module(src: SourceFile, cls: cst.ClassDef, classes: dict[str, cst.ClassDef]) -> bool:
    for c in lineage_of(cls, classes):
        for base in c.bases:
            if base.keyword is None and any(_is_module_name(q) for q in src.qualified_names(base.value)):
                return True
    return False


def _is_module_name(name: str) -> bool:
    if name in MODULE_CLASSES or name.startswith("torch.nn.modules."):
        return True
    parts = name.split(".")
    return len(parts) == 3 and parts[:2] == ["torch", "nn"] and parts[2][:1].isupper() and parts[2] not in _NOT_MODULES


def methods(cls: cst.ClassDef) -> Iterator[tuple[cst.FunctionDef, str]]:
    """Instance methods defined in the class body, with the name their first parameter gives `self`."""
    for stmt in cls.body.body:
        if not isinstance(stmt, cst.FunctionDef):
            continue
        if any(m.matches(d.decorator, m.Name("staticmethod") | m.Name("classmethod")) for d in stmt.decorators):
            continue
        params = [*stmt.params.posonly_params, *stmt.params.params]
        if params:
            yield stmt, params[0].name.value


def method_named(cls: cst.ClassDef, name: str) -> cst.FunctionDef | None:
    return next((f for f, _ in methods(cls) if f.name.value == name), None)


def accesses(src: SourceFile, fn: cst.FunctionDef, self_name: str, attr: str) -> list[cst.Attribute]:
    """`<self>.<attr>` nodes in a method (not in classes or functions nested in it that rebind the name)."""
    found = []
    for node in src.nodes_in(fn, cst.Attribute):
        assert isinstance(node, cst.Attribute)
        if not (m.matches(node.value, m.Name(self_name)) and node.attr.value == attr):
            continue
        inner = False
        for anc in src.ancestors(node):
            if anc is fn:
                break
            if isinstance(anc, cst.ClassDef) or (
                isinstance(anc, (cst.FunctionDef, cst.Lambda))
                and any(p.name.value == self_name for p in [*anc.params.posonly_params, *anc.params.params])
            ):
                inner = True
        if not inner:
            found.append(node)
    return found


def registers(src: SourceFile, cls: cst.ClassDef, attr: str) -> bool:
    """Whether the class already calls `register_buffer("<attr>", ...)`."""
    for call in src.nodes_in(cls, cst.Call):
        assert isinstance(call, cst.Call)
        if (
            m.matches(call.func, m.Attribute(attr=m.Name("register_buffer")))
            and call.args
            and isinstance(call.args[0].value, cst.SimpleString)
            and call.args[0].value.evaluated_value == attr
        ):
            return True
    return False


def sets_in_init(src: SourceFile, cls: cst.ClassDef, attr: str) -> bool:
    init = method_named(cls, "__init__")
    self_name = next((s for f, s in methods(cls) if f is init), None)
    return (
        init is not None
        and self_name is not None
        and any(target_kind(src, a) == "write" for a in accesses(src, init, self_name, attr))
    )


def class_level(cls: cst.ClassDef, attr: str) -> bool:
    """Whether the class body itself binds the name (a class attribute, method or property)."""
    for stmt in cls.body.body:
        if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)) and stmt.name.value == attr:
            return True
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                targets = (
                    [t.target for t in small.targets]
                    if isinstance(small, cst.Assign)
                    else [small.target]
                    if isinstance(small, cst.AnnAssign)
                    else []
                )
                if any(m.matches(t, m.Name(attr)) for t in targets):
                    return True
    return False


# --- how a use is read -------------------------------------------------------------------------------


def target_kind(src: SourceFile, node: cst.Attribute) -> str | None:
    """'write' for a plain `x.a = v` / `x.a += v` / `x.a: T = v`, another word for other bindings, None for reads."""
    inner: cst.CSTNode = node
    for anc in src.ancestors(node):
        if isinstance(anc, (cst.Element, cst.Tuple, cst.List, cst.StarredElement)):
            inner = anc
            continue
        if isinstance(anc, cst.AssignTarget):
            return "write" if inner is node else "unpacked"
        if isinstance(anc, (cst.AugAssign, cst.AnnAssign)) and anc.target is inner:
            return "write" if inner is node else "unpacked"
        if isinstance(anc, cst.Del):
            return "deleted"
        if isinstance(anc, (cst.For, cst.CompFor)) and anc.target is inner:
            return "a loop variable"
        if isinstance(anc, cst.AsName):
            return "bound by `as`"
        return None
    return None


def read_problem(src: SourceFile, node: cst.Attribute) -> str | None:
    """Why a tensor would not do where the number is read, or None (arithmetic, returned, passed on...)."""
    expr: cst.CSTNode = node
    parent = src.parents[expr]
    while True:  # climb through arithmetic, comparisons and tuples: what matters is where their value goes
        if isinstance(parent, cst.BinaryOperation):
            if isinstance(parent.operator, cst.Modulo) and isinstance(
                parent.left, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)
            ):
                return "formats it into a string with %"
        elif isinstance(parent, cst.UnaryOperation):
            if isinstance(parent.operator, cst.Not):
                return "tests its truth value with `not`"
        elif isinstance(parent, cst.ComparisonTarget):
            parent = src.parents[parent]
        elif isinstance(parent, cst.Element) and isinstance(src.parents[parent], (cst.Tuple, cst.List)):
            parent = src.parents[parent]
        elif not isinstance(parent, cst.Comparison):
            break
        expr, parent = parent, src.parents[parent]
    if isinstance(parent, (cst.If, cst.While)) and parent.test is expr:
        return f"tests it in {'an `if`' if isinstance(parent, cst.If) else 'a `while`'}"
    if isinstance(parent, cst.IfExp) and parent.test is expr:
        return "tests it in a conditional expression"
    if isinstance(parent, cst.Assert) and parent.test is expr:
        return "asserts on it"
    if isinstance(parent, (cst.CompIf, cst.BooleanOperation)):
        return "tests its truth value"
    if isinstance(parent, (cst.Index, cst.Slice)):
        return "uses it as an index or slice bound"
    if isinstance(parent, cst.Subscript):
        return "indexes it"
    if isinstance(parent, cst.FormattedStringExpression):
        return "formats it into an f-string"
    if isinstance(parent, cst.Attribute):
        return f"uses its attribute .{parent.attr.value}"
    if isinstance(parent, cst.Call) and parent.func is expr:
        return "calls it"
    if isinstance(parent, cst.Element) and isinstance(src.parents[parent], cst.Set):
        return "puts it in a set"
    if isinstance(parent, cst.DictElement) and parent.key is expr:
        return "uses it as a dict key"
    if isinstance(parent, cst.Arg):
        call = src.parents[parent]
        assert isinstance(call, cst.Call)
        return _call_problem(src, call, parent)
    return None


def _call_problem(src: SourceFile, call: cst.Call, arg: cst.Arg) -> str | None:
    func = call.func
    names = src.qualified_names(func)
    spelled = src.code(func)
    if isinstance(func, cst.Name) and (not names or any(q.startswith("builtins.") for q in names)):
        return None if func.value == "abs" else f"passes it to {spelled}()"
    if any(q.startswith("math.") for q in names):
        return f"passes it to {spelled}()"
    if arg.keyword is not None and arg.keyword.value in INT_KEYWORDS:
        return f"passes it as {arg.keyword.value}= to {spelled}()"
    name = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
    if name == "format" and isinstance(func, cst.Attribute):
        return "formats it into a string with .format()"
    if name in LOG_METHODS and isinstance(func, cst.Attribute) and not any(q.startswith("torch.") for q in names):
        return f"logs it with {spelled}()"
    if name in INT_ARGUMENT_CALLS:
        return f"passes it to {spelled}(), which needs Python ints there"
    return None
