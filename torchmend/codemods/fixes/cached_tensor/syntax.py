"""Small libcst helpers for the cached-tensor fix: `self.<attr>`, a class's methods, the names code uses and binds."""

from __future__ import annotations

import libcst as cst

from torchmend.analysis import match as m


def self_attr(attr: str) -> m.Attribute:
    return m.Attribute(value=m.Name("self"), attr=m.Name(attr))


def methods(cls: cst.ClassDef) -> list[cst.FunctionDef]:
    return [s for s in cls.body.body if isinstance(s, cst.FunctionDef)]


class _NamesUsed(cst.CSTVisitor):
    def __init__(self, skip: cst.CSTNode | None) -> None:
        super().__init__()
        self.names: set[str] = set()
        self.skip = skip

    def on_visit(self, node: cst.CSTNode) -> bool:
        return node is not self.skip and super().on_visit(node)

    def visit_Name(self, node: cst.Name) -> None:
        self.names.add(node.value)

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        node.value.visit(self)  # `a.b` uses a, not b
        return False

    def visit_Arg(self, node: cst.Arg) -> bool:
        node.value.visit(self)  # `f(mask=m)` uses m, not mask
        return False


def names_used(node: cst.CSTNode, skip: cst.CSTNode | None = None) -> set[str]:
    """Plain names in a piece of code (but not in `skip`, a node inside it): attribute and keyword names left out."""
    visitor = _NamesUsed(skip)
    node.visit(visitor)
    return visitor.names


def target_names(target: cst.CSTNode) -> set[str]:
    """Plain names an assignment target binds (`a`, `a, (b, *c)`); none for `self.x` or `x[i]`."""
    if isinstance(target, cst.Name):
        return {target.value}
    if isinstance(target, (cst.Tuple, cst.List)):
        return {n for e in target.elements for n in target_names(e.value)}
    if isinstance(target, cst.StarredElement):
        return target_names(target.value)
    return set()


def bound_in(fn: cst.FunctionDef) -> set[str]:
    """Names the function binds: its parameters and every plain name it assigns (the function's locals)."""
    params = fn.params
    names = {p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)}
    for star in (params.star_arg, params.star_kwarg):
        if isinstance(star, cst.Param):
            names.add(star.name.value)
    for node in m.findall(fn.body, m.AssignTarget() | m.AnnAssign() | m.AugAssign() | m.For() | m.NamedExpr()):
        if isinstance(node, (cst.AssignTarget, cst.AnnAssign, cst.AugAssign, cst.For, cst.NamedExpr)):  # all are
            names |= target_names(node.target)
    for item in m.findall(fn.body, m.WithItem(asname=m.AsName())):
        if isinstance(item, cst.WithItem) and item.asname is not None:  # as the matcher required
            names |= target_names(item.asname.name)
    names.discard("self")
    return names
