"""Turn an int/float attribute of an nn.Module that changes into a registered buffer (TM201, TM250).

Dynamo treats a plain number on a module as a constant and guards on its value, so `self.calls += 1`
recompiles on every call until the recompile limit. A 0-dim tensor buffer is data instead: one graph
reads and updates it. The rewrite covers every place the class family touches the attribute, so it
is all-or-nothing: if one use needs a Python number, nothing is proposed.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, replace
from typing import Iterator

import libcst as cst
import libcst.matchers as m

from torchmend.codemods.analysis import Kind, callee, compile_site, compile_target, values
from torchmend.codemods.base import Invalid, Valid, UNSAFE, Codemod, NoFix, Proposal, Result
from torchmend.codemods.source import Context, SourceFile
from torchmend.codemods.torch_ops import (
    AUGMENTED_IN_PLACE,
    INT_ARGUMENT_CALLS,
    INT_KEYWORDS,
    LOG_METHODS,
    MODULE_CLASSES,
)
from torchmend.model import Finding, Where

# `self.calls`, or the last attribute of a path to a submodule (`self.block.calls`, `self._modules['b'].calls`).
_VARIABLE = re.compile(r"(?P<base>.+)\.(?P<attr>[A-Za-z_]\w*)")

_NOT_MODULES = {"Parameter", "Buffer", "UninitializedParameter", "UninitializedBuffer"}

_BINARY = {binop: aug for aug, (_, binop) in AUGMENTED_IN_PLACE.items()}

_STOPGAP = ("as a stopgap, raise torch._dynamo.config.recompile_limit (8 by default) at start-up; each new "
            "value then costs one more compile")


class _Refuse(Exception):
    """Internal: one use of the attribute rules the fix out (carries the NoFix's reason and advice)."""

    def __init__(self, reason: str, advice: str = "") -> None:
        super().__init__(reason)
        self.reason, self.advice = reason, advice


@dataclass
class _Uses:
    """Every place the class family touches `<self>.<attr>`."""

    writes: list[cst.BaseSmallStatement] = field(default_factory=list)  # Assign | AnnAssign | AugAssign
    reads: list[cst.Attribute] = field(default_factory=list)  # read in a computation (not in its own update)
    # `x.<attr>` elsewhere in the file: (line, code, what it does with it where a number is needed, or None)
    outside_reads: list[tuple[int, str, str | None]] = field(default_factory=list)


# --- classes -----------------------------------------------------------------------------------------


def _classes(src: SourceFile) -> dict[str, cst.ClassDef]:
    found: dict[str, cst.ClassDef] = {}
    for cls in src.nodes_in(src.module, cst.ClassDef):
        found.setdefault(cls.name.value, cls)  # type: ignore[attr-defined]
    return found


def _bases_in_file(cls: cst.ClassDef, classes: dict[str, cst.ClassDef]) -> list[cst.ClassDef]:
    return [classes[b.value.value] for b in cls.bases
            if b.keyword is None and isinstance(b.value, cst.Name) and b.value.value in classes]


def _lineage(cls: cst.ClassDef, classes: dict[str, cst.ClassDef]) -> list[cst.ClassDef]:
    """The class and its bases defined in this file, most derived first."""
    order, todo = [], [cls]
    while todo:
        c = todo.pop(0)
        if c not in order:
            order.append(c)
            todo.extend(_bases_in_file(c, classes))
    return order


def _is_module(src: SourceFile, cls: cst.ClassDef, classes: dict[str, cst.ClassDef]) -> bool:
    for c in _lineage(cls, classes):
        for base in c.bases:
            if base.keyword is None and any(_is_module_name(q) for q in src.qualified_names(base.value)):
                return True
    return False


def _is_module_name(name: str) -> bool:
    if name in MODULE_CLASSES or name.startswith("torch.nn.modules."):
        return True
    parts = name.split(".")
    return len(parts) == 3 and parts[:2] == ["torch", "nn"] and parts[2][:1].isupper() and parts[2] not in _NOT_MODULES


def _methods(cls: cst.ClassDef) -> Iterator[tuple[cst.FunctionDef, str]]:
    """Instance methods defined in the class body, with the name their first parameter gives `self`."""
    for stmt in cls.body.body:
        if not isinstance(stmt, cst.FunctionDef):
            continue
        if any(m.matches(d.decorator, m.Name("staticmethod") | m.Name("classmethod")) for d in stmt.decorators):
            continue
        params = [*stmt.params.posonly_params, *stmt.params.params]
        if params:
            yield stmt, params[0].name.value


def _method(cls: cst.ClassDef, name: str) -> cst.FunctionDef | None:
    return next((f for f, _ in _methods(cls) if f.name.value == name), None)


def _accesses(src: SourceFile, fn: cst.FunctionDef, self_name: str, attr: str) -> list[cst.Attribute]:
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
            if isinstance(anc, cst.ClassDef) or (isinstance(anc, (cst.FunctionDef, cst.Lambda)) and any(
                    p.name.value == self_name for p in [*anc.params.posonly_params, *anc.params.params])):
                inner = True
        if not inner:
            found.append(node)
    return found


def _registers(src: SourceFile, cls: cst.ClassDef, attr: str) -> bool:
    """Whether the class already calls `register_buffer("<attr>", ...)`."""
    for call in src.nodes_in(cls, cst.Call):
        assert isinstance(call, cst.Call)
        if (m.matches(call.func, m.Attribute(attr=m.Name("register_buffer"))) and call.args
                and isinstance(call.args[0].value, cst.SimpleString)
                and call.args[0].value.evaluated_value == attr):
            return True
    return False


def _sets_in_init(src: SourceFile, cls: cst.ClassDef, attr: str) -> bool:
    init = _method(cls, "__init__")
    self_name = next((s for f, s in _methods(cls) if f is init), None)
    return init is not None and self_name is not None and any(
        _target_kind(src, a) == "write" for a in _accesses(src, init, self_name, attr))


def _class_level(cls: cst.ClassDef, attr: str) -> bool:
    """Whether the class body itself binds the name (a class attribute, method or property)."""
    for stmt in cls.body.body:
        if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)) and stmt.name.value == attr:
            return True
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                targets = ([t.target for t in small.targets] if isinstance(small, cst.Assign)
                           else [small.target] if isinstance(small, cst.AnnAssign) else [])
                if any(m.matches(t, m.Name(attr)) for t in targets):
                    return True
    return False


# --- how a use is read -------------------------------------------------------------------------------


def _target_kind(src: SourceFile, node: cst.Attribute) -> str | None:
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


def _read_problem(src: SourceFile, node: cst.Attribute) -> str | None:
    """Why a tensor would not do where the number is read, or None (arithmetic, returned, passed on...)."""
    expr: cst.CSTNode = node
    parent = src.parents[expr]
    while True:  # climb through arithmetic, comparisons and tuples: what matters is where their value goes
        if isinstance(parent, cst.BinaryOperation):
            if isinstance(parent.operator, cst.Modulo) and isinstance(
                    parent.left, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)):
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


# --- values ------------------------------------------------------------------------------------------


_KIND_WORDS = {Kind.INT: "int", Kind.FLOAT: "float", Kind.BOOL: "a bool", Kind.NONE: "None", Kind.TENSOR: "a tensor"}


def _kind(src: SourceFile, expr: cst.BaseExpression) -> str:
    """'int', 'float', 'unknown', or what the value is when it is not a number ('a string', ...)."""
    if isinstance(expr, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)):
        return "a string"
    if isinstance(expr, (cst.List, cst.Tuple, cst.Set, cst.Dict, cst.ListComp, cst.SetComp, cst.DictComp,
                         cst.GeneratorExp, cst.Lambda, cst.Imaginary)):
        return f"a {type(expr).__name__.lower()}"
    return _KIND_WORDS.get(values(src).kind(expr), "unknown")


def _float_value(src: SourceFile, expr: cst.BaseExpression) -> cst.BaseExpression:
    """An int-valued expression written as a float (`0` -> `0.0`), for a buffer that must be floating point."""
    if isinstance(expr, cst.Integer) and re.fullmatch(r"[0-9_]+", expr.value):
        return cst.Float(expr.value + ".0", lpar=expr.lpar, rpar=expr.rpar)
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.expression, cst.Integer):
        return expr.with_changes(expression=_float_value(src, expr.expression))
    if _kind(src, expr) == "float":
        return expr
    return cst.Call(cst.Name("float"), [cst.Arg(expr)])


def _parenthesized(expr: cst.BaseExpression) -> cst.BaseExpression:
    if expr.lpar or isinstance(expr, (cst.Name, cst.Attribute, cst.Integer, cst.Float, cst.Call, cst.Subscript)):
        return expr
    return expr.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


def _self_update(src: SourceFile, write: cst.BaseSmallStatement) -> tuple[type, cst.BaseExpression] | None:
    """(augmented operator, operand) for `x.a += v` and for `x.a = x.a <op> v`, else None."""
    if isinstance(write, cst.AugAssign):
        return type(write.operator), write.value
    if isinstance(write, cst.Assign) and isinstance(write.value, cst.BinaryOperation):
        target, left = write.targets[0].target, write.value.left
        if (type(write.value.operator) in _BINARY and not left.lpar
                and m.matches(left, m.Attribute(value=m.Name(), attr=m.Name()))
                and src.code(left) == src.code(target)):
            return _BINARY[type(write.value.operator)], write.value.right
    return None


# --- the plan ----------------------------------------------------------------------------------------


@dataclass
class _Plan:
    src: SourceFile
    owner: cst.ClassDef
    attr: str
    self_name: str
    init: cst.Assign | cst.AnnAssign
    uses: _Uses
    dtype: str  # "int" | "float"


def _owner_and_family(src: SourceFile, cls: cst.ClassDef, attr: str) -> tuple[cst.ClassDef, list[cst.ClassDef]]:
    classes = _classes(src)
    lineage = _lineage(cls, classes)
    for c in lineage:
        if _class_level(c, attr):
            raise _Refuse(f"`{attr}` is also bound in the body of class {c.name.value} (a class attribute or "
                          "method), so it cannot become a buffer",
                          f"set it only in __init__ (self.{attr} = 0) and run the fix again")
    with_init = [c for c in lineage if _sets_in_init(src, c, attr)]
    if not with_init:
        raise _Refuse(f"self.{attr} is never set in __init__ of {cls.name.value}, so there is nowhere to "
                      "register the buffer",
                      f"set it in __init__ after super().__init__() (self.{attr} = 0) and run the fix again")
    owner = with_init[-1]  # the most basic class that sets it: the buffer belongs there
    family = [c for c in classes.values() if owner in _lineage(c, classes)]
    if not _is_module(src, owner, classes):
        raise _Refuse(f"{owner.name.value} does not subclass torch.nn.Module (as far as this file shows), so it "
                      "has no register_buffer")
    return owner, family


def _collect(src: SourceFile, family: list[cst.ClassDef], attr: str) -> _Uses:
    uses = _Uses()
    mine: set[cst.Attribute] = set()
    for c in family:
        for fn, self_name in _methods(c):
            for node in _accesses(src, fn, self_name, attr):
                mine.add(node)
                _classify(src, node, attr, uses)
    family_set = set(family)
    for node in src.nodes_in(src.module, cst.Attribute):
        assert isinstance(node, cst.Attribute)
        if node in mine or node.attr.value != attr:
            continue
        parent = src.parents[node]
        if (isinstance(parent, cst.Call) and parent.func is node) or (
                isinstance(parent, cst.Attribute) and parent.value is node):
            continue  # `opt.step()`, `x.step.y`: a method or an object of that name, not this number
        cls = src.enclosing(node, cst.ClassDef)
        if m.matches(node.value, m.Name("self")) and cls is not None and cls not in family_set:
            continue  # another class's own attribute of the same name
        if _target_kind(src, node):
            raise _Refuse(f"line {src.line_of(node)} sets `{src.code(node)}` outside {_names(family)}, "
                          "which would replace the buffer with a Python number",
                          f"change it to `{src.code(node)}.fill_(value)` (or drop it) and run the fix again")
        uses.outside_reads.append((src.line_of(node), src.code(node), _read_problem(src, node)))
    return uses


def _classify(src: SourceFile, node: cst.Attribute, attr: str, uses: _Uses) -> None:
    """File one `<self>.<attr>` of the family under writes or reads, or refuse."""
    kind = _target_kind(src, node)
    line = src.line_of(node)
    stmt = next((a for a in src.ancestors(node) if isinstance(a, cst.BaseSmallStatement)), None)
    if kind == "write":
        if isinstance(stmt, cst.Assign) and len(stmt.targets) != 1:
            raise _Refuse(f"line {line} sets self.{attr} in a chained assignment (a = b = ...)",
                          "split it into one assignment per target and run the fix again")
        if not (isinstance(stmt, cst.AnnAssign) and stmt.value is None):  # a bare annotation sets nothing
            uses.writes.append(stmt)
        return
    if kind:
        raise _Refuse(f"self.{attr} is {kind} at line {line}; a buffer can only be assigned or updated",
                      "assign it with a plain `=` or `+=` and run the fix again")
    problem = _read_problem(src, node)
    if problem:
        raise _Refuse(f"self.{attr} must stay a Python number: line {line} {problem}, and as a tensor that would "
                      "be a data-dependent graph break (or change what the code prints or does)",
                      "keep it a number and let dynamo treat it as dynamic instead "
                      "(torch._dynamo.config.allow_unspec_int_on_nn_module = True, for ints), or move that use "
                      "out of the compiled code")
    if stmt is None or not _in_own_update(src, stmt, node):
        uses.reads.append(node)


def _in_own_update(src: SourceFile, stmt: cst.BaseSmallStatement, node: cst.Attribute) -> bool:
    """Whether `node` is read in the value of a write to the same attribute (`self.a = self.a * 2`)."""
    if isinstance(stmt, cst.Assign) and len(stmt.targets) == 1:
        return src.code(stmt.targets[0].target) == src.code(node)
    if isinstance(stmt, (cst.AugAssign, cst.AnnAssign)):
        return src.code(stmt.target) == src.code(node)
    return False


def _names(family: list[cst.ClassDef]) -> str:
    return "/".join(c.name.value for c in family)


def _plan(src: SourceFile, cls: cst.ClassDef, attr: str) -> _Plan:
    owner, family = _owner_and_family(src, cls, attr)
    uses = _collect(src, family, attr)
    init_fn = _method(owner, "__init__")
    assert init_fn is not None
    in_init = [w for w in uses.writes if init_fn in set(src.ancestors(w))]
    first = in_init[0]
    line = src.line_of(first)
    if isinstance(first, cst.AugAssign):
        raise _Refuse(f"__init__ changes self.{attr} (line {line}) before it sets it")
    stmt_line = src.parents[first]
    if src.parents[stmt_line] is not init_fn.body:
        raise _Refuse(f"self.{attr} is first set inside a block of __init__ (line {line}); the buffer must be "
                      "registered on every path", f"set it unconditionally first (self.{attr} = 0) and run the "
                      "fix again")
    super_at = next((i for i, s in enumerate(init_fn.body.body) if m.findall(
        s, m.Call(func=m.Attribute(attr=m.Name("__init__"))))), None)
    at = next(i for i, s in enumerate(init_fn.body.body) if s is stmt_line)
    if super_at is None or super_at > at:
        raise _Refuse(f"self.{attr} is set before super().__init__() (line {line}); register_buffer needs the "
                      "module initialised", "move the assignment after super().__init__() and run the fix again")
    float_ops = False
    for w in uses.writes:
        update = _self_update(src, w)
        if isinstance(w, cst.AugAssign) and type(w.operator) not in AUGMENTED_IN_PLACE:
            raise _Refuse(f"line {src.line_of(w)} updates self.{attr} with `{src.code(w.operator).strip()}`, "
                          "which has no in-place tensor method", f"write it as `self.{attr} = ...` and run the fix "
                          "again")
        value = update[1] if update else w.value
        assert value is not None
        kind = _kind(src, value)
        if kind not in ("int", "float", "unknown"):
            raise _Refuse(f"line {src.line_of(w)} gives self.{attr} {kind}, not a number, so it cannot be a "
                          "tensor buffer", "keep the number in its own attribute and the other value in another")
        float_ops |= kind == "float" or (update is not None and update[0] is cst.DivideAssign) or (
            isinstance(w, cst.AnnAssign) and m.matches(w.annotation.annotation, m.Name("float")))
    self_name = next(s for f, s in _methods(owner) if f is init_fn)
    return _Plan(src, owner, attr, self_name, first, uses, "float" if float_ops else "int")  # type: ignore[arg-type]


def _quote(src: SourceFile) -> str:
    strings = [n for n in src.nodes_in(src.module, cst.SimpleString) if isinstance(n, cst.SimpleString)]
    single = sum(1 for s in strings if s.quote == "'")
    return "'" if single > len(strings) - single else '"'


def _call_stmt(target: cst.BaseExpression, method: str, args: list[cst.Arg],
               like: cst.BaseSmallStatement) -> cst.Expr:
    call = cst.Call(cst.Attribute(target, cst.Name(method)), args)
    return cst.Expr(call, semicolon=like.semicolon)


def _proposal(plan: _Plan, finding: Finding) -> Proposal:
    src, attr = plan.src, plan.attr
    tensor, imports = src.torch_expr("tensor")
    init_value = plan.init.value
    assert init_value is not None
    if plan.dtype == "float":
        init_value = _float_value(src, init_value)
    q = _quote(src)
    no_space = cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(""))
    register = _call_stmt(cst.Name(plan.self_name), "register_buffer", [
        cst.Arg(cst.SimpleString(f"{q}{attr}{q}")),
        cst.Arg(cst.Call(tensor, [cst.Arg(init_value)])),
        cst.Arg(cst.Name("False"), keyword=cst.Name("persistent"), equal=no_space),
    ], plan.init)
    edits: dict[cst.CSTNode, cst.CSTNode] = {plan.init: register}
    in_place = not plan.uses.reads
    full_like_imports: tuple[tuple[str, str | None], ...] = ()
    for w in plan.uses.writes:
        if w is plan.init:
            continue
        target = w.targets[0].target if isinstance(w, cst.Assign) else w.target  # type: ignore[union-attr]
        update = _self_update(src, w)
        if update is not None:
            op, operand = update
            if in_place:
                edits[w] = _call_stmt(target, AUGMENTED_IN_PLACE[op][0], [cst.Arg(operand)], w)
            elif isinstance(w, cst.AugAssign):
                value = cst.BinaryOperation(target.deep_clone(), AUGMENTED_IN_PLACE[op][1](), _parenthesized(operand))
                edits[w] = cst.Assign([cst.AssignTarget(target)], value, semicolon=w.semicolon)
            continue  # `self.a = self.a + v` rebinds already: a buffer accepts it as it is
        value = w.value
        assert value is not None
        if in_place:
            edits[w] = _call_stmt(target, "fill_", [cst.Arg(value)], w)
        else:
            full_like, full_like_imports = src.torch_expr("full_like")
            call = cst.Call(full_like, [cst.Arg(target.deep_clone()), cst.Arg(value)])
            edits[w] = cst.Assign([cst.AssignTarget(target)], call, semicolon=w.semicolon)
    how = "updated in place" if in_place else "rebound to a new tensor on each update"
    why = (f"make self.{attr} a non-persistent 0-dim tensor buffer, {how}: dynamo then reads its value instead of "
           "guarding on it and recompiling when it changes")
    alternative = ("keep it a Python int and set torch._dynamo.config.allow_unspec_int_on_nn_module = True at "
                   "start-up: dynamo then recompiles once for a dynamic int instead of once per value"
                   if plan.dtype == "int" else "")
    return Proposal((finding,), finding.rule, src.path, why=why, safety=UNSAFE, replace=edits,
                    imports=tuple(dict.fromkeys(imports + full_like_imports)), note=_note(plan, in_place),
                    alternative=alternative)


def _note(plan: _Plan, in_place: bool) -> str:
    attr = plan.attr
    if plan.dtype == "float":
        dtype = ("a float tensor of torch's default dtype (float32 unless you changed it), like the parameters: it "
                 "follows model.to(dtype)/.half() and exists on every device (MPS has no float64), but it keeps "
                 "about 7 significant digits where the Python float kept 16; write torch.tensor(v, "
                 "dtype=torch.float64) if the extra precision matters")
    else:
        dtype = ("an int64 tensor (it only ever holds ints here; if it should hold floats, start it at 0.0: an "
                 "int64 buffer cannot take a float in place)")
    parts = [f"self.{attr} becomes {dtype}.",
             "It is registered with persistent=False, so state_dict() and existing checkpoints do not change, and "
             "it moves with module.to(device)."]
    if not in_place:
        lines = sorted({plan.src.line_of(r) for r in plan.uses.reads})
        parts.append(f"It is read in computations (line {', '.join(map(str, lines))}): arithmetic with it now "
                     "runs in tensor precision (float32 when mixed with Python floats) instead of Python's double, "
                     "so results can differ around 1e-7; and updates rebind it instead of changing it in place, "
                     "since an in-place update would invalidate a value autograd saved for backward.")
    outside = plan.uses.outside_reads
    needs_number = [(f"line {line} {problem}", code) for line, code, problem in outside if problem]
    if needs_number:
        parts.append(f"Outside the class, {'; '.join(n for n, _ in needs_number)}: it gets a tensor there now, "
                     f"so write {needs_number[0][1]}.item() where a Python number is needed.")
    else:
        where = f" (line {', '.join(str(line) for line, _, _ in outside)} of this file)" if outside else ""
        parts.append(f"Code that reads {attr}{where} gets a tensor now: print shows tensor(3) and json cannot "
                     "encode it; use .item() where a Python number is needed.")
    return " ".join(parts)


# --- from a finding to the class ---------------------------------------------------------------------


def _class_for(src: SourceFile, finding: Finding, base: str, attr: str) -> cst.ClassDef:
    """The class behind the finding: the one around its line for `self.<attr>`, else the only module class
    in the file that sets self.<attr> in __init__ (or registers it as a buffer already)."""
    if base == "self":
        stmt = src.statement_at(finding.line)
        if stmt is not None:
            cls = stmt if isinstance(stmt, cst.ClassDef) else src.enclosing(stmt, cst.ClassDef)
            if isinstance(cls, cst.ClassDef):
                return cls
    classes = _classes(src)
    found = []
    for cls in classes.values():
        if _is_module(src, cls, classes) and (_sets_in_init(src, cls, attr) or _registers(src, cls, attr)):
            found.append(cls)
    if len(found) != 1:
        what = "no module class" if not found else f"{len(found)} module classes ({_names(found)})"
        raise _Refuse(f"cannot tell which class {finding.variable} belongs to: {what} in {finding.file} set "
                      f"self.{attr} in __init__", "fix it where that class is defined (its own TM201 finding)")
    return found[0]


def propose_buffer(finding: Finding, ctx: Context) -> Result:
    """The shared fix: TM201 and TM250 for the same attribute produce the same edit (the engine merges them)."""
    stopgap = f"; {_STOPGAP}" if finding.rule == "TM250" else ""
    match = _VARIABLE.fullmatch(finding.variable or "")
    if match is not None and match["base"].split(".")[-1] == "__self__":
        return _bound_method_buffer(finding, ctx, match["attr"], stopgap)
    if finding.where != Where.PROJECT:
        return NoFix(finding, "the attribute's module is defined outside your project; torchmend never edits "
                     "libraries", f"keep that attribute constant while the module runs compiled{stopgap}")
    if match is None:
        guard = f"the guard `{finding.guard}`" if finding.guard else "a guard"
        what = f"`{finding.variable}`" if finding.variable else "no named variable"
        return NoFix(finding, f"{guard} keeps failing on {what}, which is not an attribute of a module in your "
                     "project that this fix can turn into a buffer",
                     f"fix the finding for that variable and this one goes away{stopgap}")
    attr = match["attr"]
    src = ctx.file(finding.path)
    try:
        cls = _class_for(src, finding, match["base"], attr)
    except _Refuse as r:
        return NoFix(finding, r.reason, r.advice + stopgap if r.advice else stopgap.lstrip("; "))
    return _buffer_in(finding, src, cls, attr, stopgap)


def _buffer_in(finding: Finding, src: SourceFile, cls: cst.ClassDef, attr: str, stopgap: str) -> Result:
    try:
        classes = _classes(src)
        if any(_registers(src, c, attr) for c in _lineage(cls, classes)):
            return NoFix(finding, f"self.{attr} is already a registered buffer", skipped=True)
        plan = _plan(src, cls, attr)
    except _Refuse as r:
        return NoFix(finding, r.reason, r.advice + stopgap if r.advice else stopgap.lstrip("; "))
    return _proposal(plan, finding)


def _bound_method_buffer(finding: Finding, ctx: Context, attr: str, stopgap: str) -> Result:
    """`torch.compile(teacher.update)`: dynamo guards on `fn.__self__.<attr>` inside its wrapper (in torch's
    external_utils.py); the attribute belongs to the class of the object whose method was compiled, found
    from the user's line that calls it (or compiles it), possibly in another file of the project."""
    places = [loc for loc in (finding.user_frame, finding.call_site) if loc is not None]
    if finding.where == Where.PROJECT:
        places.insert(0, finding)  # type: ignore[arg-type]
    owners: dict[int, tuple[SourceFile, cst.ClassDef]] = {}
    looked: list[str] = []
    unknown: list[str] = []
    for loc in places:
        if not ctx.in_project(loc.path):
            continue
        src = ctx.file(loc.path)
        stmt = src.statement_at(loc.line)
        for call in src.nodes_in(stmt, cst.Call) if stmt is not None else []:
            target = compile_target(src, call)  # type: ignore[arg-type]
            found = callee(src, target if target is not None else call.func, ctx)  # type: ignore[attr-defined]
            compiled = found is not None and (target is not None or found.compiled_at is not None)
            if compiled and found.bound and found.owner is not None:  # type: ignore[union-attr]
                owners[id(found.owner)] = (found.src, found.owner)  # type: ignore[union-attr]
            elif found is None:
                unknown += _unknown_object(src, call)  # type: ignore[arg-type]
        looked.append(f"line {loc.line} of {os.path.relpath(loc.path, ctx.project_root)}")
        if owners:
            break
    advice = (f"make `{attr}` a buffer of the class whose method you compile (`self.register_buffer(\"{attr}\", "
              f"torch.tensor(0), persistent=False)` and update it in place){stopgap}")
    if len(owners) != 1:
        where = " or ".join(looked) or "no line of your project"
        what = f"{len(owners)} compiled methods of different classes" if owners else unknown[0] if unknown else \
            "no compiled bound method (`torch.compile(obj.method)`) whose object's class torchmend can find"
        return NoFix(finding, f"the guard is on `{finding.variable}`, an attribute of the object whose method was "
                     f"compiled; at {where} torchmend sees {what}", advice)
    src, cls = next(iter(owners.values()))
    return _buffer_in(finding, src, cls, attr, stopgap)


def _unknown_object(src: SourceFile, call: cst.Call) -> list[str]:
    """Why the class of a compiled bound method's object is not known: `torch.compile(teacher.update)` with
    `teacher` a parameter, an import, or assigned something torchmend cannot follow."""
    site = call if compile_target(src, call) is not None else compile_site(src, call.func)
    method = compile_target(src, site) if isinstance(site, cst.Call) else None
    if not isinstance(method, cst.Attribute):
        return []
    obj = method.value
    refs = src.referents(obj) if isinstance(obj, cst.Name) else []
    owner = src.enclosing(refs[0], cst.FunctionDef) if len(refs) == 1 else None
    if len(refs) == 1 and isinstance(refs[0], cst.Param) and isinstance(owner, cst.FunctionDef):
        why = f"a parameter of {owner.name.value}()"
    elif len(refs) == 1 and isinstance(refs[0], (cst.Import, cst.ImportFrom)):
        why = "imported, and its class is not defined in the project"
    else:
        why = "bound where torchmend cannot follow it to a class of the project"
    return [f"`{src.code(method)}` compiled, but `{src.code(obj)}` is {why}, so its class is not known"]


class ModuleScalarToBuffer(Codemod):
    """Turn an int/float attribute of an nn.Module that changes into a registered buffer.

    What it does:
        TM201: an int or float attribute of an nn.Module that changes between calls, typically a counter
        bumped in forward (`self.calls += 1`).

    Why is this bad:
        Dynamo treats a number stored on a module as a constant: it bakes the value into the graph and
        guards on it (`self.calls == 3`). Every new value fails the guard and compiles a new graph, until the
        recompile limit sends the module back to eager.

    Example:
        def __init__(self):
            super().__init__()
            self.calls = 0

        def forward(self, x):
            self.calls += 1
            return self.fc(x)

    Fix:
        def __init__(self):
            super().__init__()
            self.register_buffer("calls", torch.tensor(0), persistent=False)

        def forward(self, x):
            self.calls.add_(1)
            return self.fc(x)

    Fix safety:
        Unsafe: the attribute becomes a 0-dim tensor, and code that reads it as a number (printing, json,
        isinstance) sees a tensor. Ints stay exact (int64); a float attribute (a float value, or `/=`)
        becomes a buffer of the default float dtype (float32), which follows model.to(dtype) like the
        parameters but keeps about 7 significant digits instead of 16. The buffer is non-persistent, so
        state_dict() and checkpoints do not change. Every other assignment becomes `.fill_(v)`. Where the
        attribute is also read in a computation, updates rebind it (`self.calls = self.calls + 1`) instead
        of mutating it, so values autograd saved for backward stay valid. Uses that need a Python number
        (an `if` on it, range(), a shape, an index, formatting) or assignments from outside the class are
        refused. A model built on the meta device and materialised with to_empty() must set the buffer
        again afterwards, as for any buffer.
    """

    rules = ("TM201",)
    name = "module-scalar-to-buffer"
    INVALID = (
        # the counter of fixtures/scan/module_counter
        Invalid(
            """
            import torch
            from torch import nn


            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc = nn.Linear(16, 1)
                    self.forward_calls = 0

                def forward(self, x):  # tm-compiled
                    self.forward_calls += 1  # tm: TM201 variable=self.forward_calls
                    return self.fc(x)
            """,
            """
            import torch
            from torch import nn


            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc = nn.Linear(16, 1)
                    self.register_buffer("forward_calls", torch.tensor(0), persistent=False)

                def forward(self, x):  # tm-compiled
                    self.forward_calls.add_(1)  # tm: TM201 variable=self.forward_calls
                    return self.fc(x)
            """,
        ),
        # `import torch as t`, single quotes, a reset method, a float update: a float buffer and fill_
        Invalid(
            """
            import torch as t


            class Decay(t.nn.Module):
                kind = 'decay'

                def __init__(self):
                    super().__init__()
                    self.scale = 1  # starts at one

                def reset(self):
                    self.scale = 1

                def forward(self, x):
                    self.scale *= 0.5  # tm: TM201 variable=self.scale
                    return t.relu(x)
            """,
            """
            import torch as t


            class Decay(t.nn.Module):
                kind = 'decay'

                def __init__(self):
                    super().__init__()
                    self.register_buffer('scale', t.tensor(1.0), persistent=False)  # starts at one

                def reset(self):
                    self.scale.fill_(1)

                def forward(self, x):
                    self.scale.mul_(0.5)  # tm: TM201 variable=self.scale
                    return t.relu(x)
            """,
        ),
        # read in a computation: rebinding updates keep autograd's saved tensors intact; torch import added
        Invalid(
            """
            from torch import nn


            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc = nn.Linear(4, 4)
                    self.step = 0

                def forward(self, x):
                    y = self.fc(x) * self.step
                    self.step += 1  # tm: TM201 variable=self.step
                    return y

                def restart(self):
                    self.step = 0
            """,
            """
            from torch import nn
            import torch


            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc = nn.Linear(4, 4)
                    self.register_buffer("step", torch.tensor(0), persistent=False)

                def forward(self, x):
                    y = self.fc(x) * self.step
                    self.step = self.step + 1  # tm: TM201 variable=self.step
                    return y

                def restart(self):
                    self.step = torch.full_like(self.step, 0)
            """,
        ),
    )
    VALID = (
        # tested in an `if`: as a tensor that is a data-dependent graph break
        Valid(
            """
            import torch
            from torch import nn


            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.calls = 0

                def forward(self, x):
                    self.calls += 1  # tm: TM201 variable=self.calls
                    if self.calls > 10:
                        x = x * 2
                    return x
            """,
        ),
        # set from outside the class
        Valid(
            """
            import torch
            from torch import nn


            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.calls = 0

                def forward(self, x):
                    self.calls += 1  # tm: TM201 variable=self.calls
                    return x


            model = Net()
            model.calls = 5
            """,
        ),
        # already a buffer
        Valid(
            """
            import torch
            from torch import nn


            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.register_buffer('calls', torch.tensor(0), persistent=False)

                def forward(self, x):
                    self.calls.add_(1)  # tm: TM201 variable=self.calls
                    return x
            """,
        ),
    )

    def propose(self, finding: Finding, ctx: Context) -> Result:
        return propose_buffer(finding, ctx)


class RecompileLimitModuleScalar(Codemod):
    """Fix the module attribute behind a recompile limit by making it a buffer.

    What it does:
        TM250: a compiled function hit the recompile limit, and the guard that kept failing is on an
        int/float attribute of an nn.Module (`self.calls == 7`).

    Why is this bad:
        Each new value of the attribute failed a guard and compiled a new graph; after the limit (8 by
        default) dynamo stops compiling the function and runs it eagerly from then on.

    Example:
        def forward(self, x):  # recompile limit reached; last guard: self.calls == 7
            self.calls += 1
            return self.fc(x)

    Fix:
        self.register_buffer("calls", torch.tensor(0), persistent=False)  # in __init__
        self.calls.add_(1)  # in forward

    Fix safety:
        Unsafe: the same edit as for TM201, with the same caveats (the two findings share one proposal).
        When the failing guard is not on a module attribute, nothing is proposed: the finding names the
        guard, and torch._dynamo.config.recompile_limit can be raised as a stopgap.
    """

    rules = ("TM250",)
    name = "recompile-limit-module-scalar"
    INVALID = (
        Invalid(
            """
            import torch
            from torch import nn


            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.calls = 0

                def forward(self, x):  # tm: TM250 variable=self.calls
                    self.calls += 1
                    return x
            """,
            """
            import torch
            from torch import nn


            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.register_buffer("calls", torch.tensor(0), persistent=False)

                def forward(self, x):  # tm: TM250 variable=self.calls
                    self.calls.add_(1)
                    return x
            """,
        ),
    )
    VALID = (
        # the guard is on an argument, not on module state: advice only
        Valid(
            """
            import torch


            def f(x, scale):  # tm: TM250 variable=scale
                return x * scale
            """,
        ),
    )

    def propose(self, finding: Finding, ctx: Context) -> Result:
        result = propose_buffer(finding, ctx)
        if isinstance(result, Proposal):
            stopgap = _STOPGAP.replace("as a stopgap, ", "as a stopgap only, ")
            return replace(result, alternative=f"{result.alternative}; or, {stopgap}" if result.alternative
                           else stopgap[0].upper() + stopgap[1:])
        return result
