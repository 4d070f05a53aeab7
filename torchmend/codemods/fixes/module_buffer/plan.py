"""The edit: register the buffer in __init__, update it in place where it is written."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import cast

import libcst as cst

from torchmend.analysis import Kind, values
from torchmend.analysis import match as m
from torchmend.analysis.source import SourceFile
from torchmend.analysis.torch_ops import AUGMENTED_IN_PLACE
from torchmend.codemods.base import UNSAFE, Proposal, Refuse
from torchmend.codemods.fixes.module_buffer.module import (
    Uses,
    Write,
    accesses,
    class_level,
    classes_in,
    is_module,
    lineage_of,
    method_named,
    methods,
    read_problem,
    sets_in_init,
    target_kind,
)
from torchmend.model import Finding

_BINARY = {binop: aug for aug, (_, binop) in AUGMENTED_IN_PLACE.items()}


# --- values ------------------------------------------------------------------------------------------


_KIND_WORDS = {Kind.INT: "int", Kind.FLOAT: "float", Kind.BOOL: "a bool", Kind.NONE: "None", Kind.TENSOR: "a tensor"}


def _kind(src: SourceFile, expr: cst.BaseExpression) -> str:
    """'int', 'float', 'unknown', or what the value is when it is not a number ('a string', ...)."""
    if isinstance(expr, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)):
        return "a string"
    if isinstance(
        expr,
        (
            cst.List,
            cst.Tuple,
            cst.Set,
            cst.Dict,
            cst.ListComp,
            cst.SetComp,
            cst.DictComp,
            cst.GeneratorExp,
            cst.Lambda,
            cst.Imaginary,
        ),
    ):
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
        if (
            type(write.value.operator) in _BINARY
            and not left.lpar
            and m.matches(left, m.Attribute(value=m.Name(), attr=m.Name()))
            and src.code(left) == src.code(target)
        ):
            return _BINARY[type(write.value.operator)], write.value.right
    return None


def _pure(src: SourceFile, expr: cst.BaseExpression, attr_code: str) -> bool:
    """Whether `expr` is numbers and reads of the attribute only, combined by arithmetic: no autograd input."""
    if isinstance(expr, cst.BinaryOperation):
        return _pure(src, expr.left, attr_code) and _pure(src, expr.right, attr_code)
    if isinstance(expr, cst.UnaryOperation):
        return _pure(src, expr.expression, attr_code)
    if isinstance(expr, cst.Attribute) and src.code(expr) == attr_code:
        return True
    return isinstance(expr, (cst.Integer, cst.Float)) or _kind(src, expr) in ("int", "float")


_NOTHING_SAVED = (cst.Add, cst.Subtract)  # their backward needs neither operand


def _may_be_kept(src: SourceFile, read: cst.Attribute, attr: str) -> bool:
    """Whether the buffer itself may outlive this read: saved by autograd for backward, or passed on.

    Arithmetic with a fresh result is safe when the other operand is made of numbers and the attribute
    (nothing requires grad), or when the operation saves no operand (+, -, comparisons, unary minus).
    """
    parent = src.parents[read]
    if isinstance(parent, (cst.ComparisonTarget, cst.Comparison)) or (
        isinstance(parent, cst.UnaryOperation) and isinstance(parent.operator, cst.Minus)
    ):
        return False
    if isinstance(parent, cst.BinaryOperation):
        if isinstance(parent.operator, _NOTHING_SAVED):
            return False
        other = parent.right if parent.left is read else parent.left
        return not _pure(src, other, src.code(read))
    return True


# --- the plan ----------------------------------------------------------------------------------------


@dataclass
class _Plan:
    src: SourceFile
    owner: cst.ClassDef
    attr: str
    self_name: str
    init: cst.Assign | cst.AnnAssign
    uses: Uses
    dtype: str  # "int" | "float"


def _owner_and_family(src: SourceFile, cls: cst.ClassDef, attr: str) -> tuple[cst.ClassDef, list[cst.ClassDef]]:
    classes = classes_in(src)
    lineage = lineage_of(cls, classes)
    for c in lineage:
        if class_level(c, attr):
            raise Refuse(
                f"`{attr}` is also bound in the body of class {c.name.value} (a class attribute or "
                "method), so it cannot become a buffer",
                f"set it only in __init__ (self.{attr} = 0) and run the fix again",
            )
    with_init = [c for c in lineage if sets_in_init(src, c, attr)]
    if not with_init:
        raise Refuse(
            f"self.{attr} is never set in __init__ of {cls.name.value}, so there is nowhere to register the buffer",
            f"set it in __init__ after super().__init__() (self.{attr} = 0) and run the fix again",
        )
    owner = with_init[-1]  # the most basic class that sets it: the buffer belongs there
    family = [c for c in classes.values() if owner in lineage_of(c, classes)]
    if not is_module(src, owner, classes):
        raise Refuse(
            f"{owner.name.value} does not subclass torch.nn.Module (as far as this file shows), so it "
            "has no register_buffer"
        )
    return owner, family


def _collect(src: SourceFile, family: list[cst.ClassDef], attr: str) -> Uses:
    uses = Uses()
    mine: set[cst.Attribute] = set()
    for c in family:
        for fn, self_name in methods(c):
            for node in accesses(src, fn, self_name, attr):
                mine.add(node)
                _classify(src, node, attr, uses)
    family_set = set(family)
    for node in src.nodes_in(src.module, cst.Attribute):
        assert isinstance(node, cst.Attribute)
        if node in mine or node.attr.value != attr:
            continue
        parent = src.parents[node]
        if (isinstance(parent, cst.Call) and parent.func is node) or (
            isinstance(parent, cst.Attribute) and parent.value is node
        ):
            continue  # `opt.step()`, `x.step.y`: a method or an object of that name, not this number
        cls = src.enclosing(node, cst.ClassDef)
        if m.matches(node.value, m.Name("self")) and cls is not None and cls not in family_set:
            continue  # another class's own attribute of the same name
        if target_kind(src, node):
            raise Refuse(
                f"line {src.line_of(node)} sets `{src.code(node)}` outside {names(family)}, "
                "which would replace the buffer with a Python number",
                f"change it to `{src.code(node)}.fill_(value)` (or drop it) and run the fix again",
            )
        uses.outside_reads.append((src.line_of(node), src.code(node), read_problem(src, node)))
    return uses


def _classify(src: SourceFile, node: cst.Attribute, attr: str, uses: Uses) -> None:
    """File one `<self>.<attr>` of the family under writes or reads, or refuse."""
    kind = target_kind(src, node)
    line = src.line_of(node)
    stmt = next((a for a in src.ancestors(node) if isinstance(a, cst.BaseSmallStatement)), None)
    if kind == "write":
        if isinstance(stmt, cst.Assign) and len(stmt.targets) != 1:
            raise Refuse(
                f"line {line} sets self.{attr} in a chained assignment (a = b = ...)",
                "split it into one assignment per target and run the fix again",
            )
        if not (isinstance(stmt, cst.AnnAssign) and stmt.value is None):  # a bare annotation sets nothing
            uses.writes.append(cast(Write, stmt))  # a "write" is the target of one of these three
        return
    if kind:
        raise Refuse(
            f"self.{attr} is {kind} at line {line}; a buffer can only be assigned or updated",
            "assign it with a plain `=` or `+=` and run the fix again",
        )
    problem = read_problem(src, node)
    if problem:
        raise Refuse(
            f"self.{attr} must stay a Python number: line {line} {problem}, and as a tensor that would "
            "be a data-dependent graph break (or change what the code prints or does)",
            "keep it a number and let dynamo treat it as dynamic instead "
            "(torch._dynamo.config.allow_unspec_int_on_nn_module = True, for ints), or move that use "
            "out of the compiled code",
        )
    if stmt is None or not _in_own_update(src, stmt, node):
        uses.reads.append(node)


def _in_own_update(src: SourceFile, stmt: cst.BaseSmallStatement, node: cst.Attribute) -> bool:
    """Whether `node` is read in the value of a write to the same attribute (`self.a = self.a * 2`)."""
    if isinstance(stmt, cst.Assign) and len(stmt.targets) == 1:
        return src.code(stmt.targets[0].target) == src.code(node)
    if isinstance(stmt, (cst.AugAssign, cst.AnnAssign)):
        return src.code(stmt.target) == src.code(node)
    return False


def names(family: list[cst.ClassDef]) -> str:
    return "/".join(c.name.value for c in family)


def plan_for(src: SourceFile, cls: cst.ClassDef, attr: str) -> _Plan:
    owner, family = _owner_and_family(src, cls, attr)
    uses = _collect(src, family, attr)
    init_fn = method_named(owner, "__init__")
    assert init_fn is not None
    in_init = [w for w in uses.writes if init_fn in set(src.ancestors(w))]
    first = in_init[0]
    line = src.line_of(first)
    if isinstance(first, cst.AugAssign):
        raise Refuse(f"__init__ changes self.{attr} (line {line}) before it sets it")
    stmt_line = src.parents[first]
    if src.parents[stmt_line] is not init_fn.body:
        raise Refuse(
            f"self.{attr} is first set inside a block of __init__ (line {line}); the buffer must be "
            "registered on every path",
            f"set it unconditionally first (self.{attr} = 0) and run the fix again",
        )
    super_at = next(
        (i for i, s in enumerate(init_fn.body.body) if m.findall(s, m.Call(func=m.Attribute(attr=m.Name("__init__"))))),
        None,
    )
    at = next(i for i, s in enumerate(init_fn.body.body) if s is stmt_line)
    if super_at is None or super_at > at:
        raise Refuse(
            f"self.{attr} is set before super().__init__() (line {line}); register_buffer needs the module initialised",
            "move the assignment after super().__init__() and run the fix again",
        )
    float_ops = False
    for w in uses.writes:
        update = _self_update(src, w)
        if isinstance(w, cst.AugAssign) and type(w.operator) not in AUGMENTED_IN_PLACE:
            raise Refuse(
                f"line {src.line_of(w)} updates self.{attr} with `{src.code(w.operator).strip()}`, "
                "which has no in-place tensor method",
                f"write it as `self.{attr} = ...` and run the fix again",
            )
        value = update[1] if update else w.value
        assert value is not None
        kind = _kind(src, value)
        if kind not in ("int", "float", "unknown"):
            raise Refuse(
                f"line {src.line_of(w)} gives self.{attr} {kind}, not a number, so it cannot be a tensor buffer",
                "keep the number in its own attribute and the other value in another",
            )
        float_ops |= (
            kind == "float"
            or (update is not None and update[0] is cst.DivideAssign)
            or (isinstance(w, cst.AnnAssign) and m.matches(w.annotation.annotation, m.Name("float")))
        )
    self_name = next(s for f, s in methods(owner) if f is init_fn)
    return _Plan(src, owner, attr, self_name, first, uses, "float" if float_ops else "int")


def _quote(src: SourceFile) -> str:
    strings = [n for n in src.nodes_in(src.module, cst.SimpleString) if isinstance(n, cst.SimpleString)]
    single = sum(1 for s in strings if s.quote == "'")
    return "'" if single > len(strings) - single else '"'


def _call_stmt(target: cst.BaseExpression, method: str, args: list[cst.Arg], like: cst.BaseSmallStatement) -> cst.Expr:
    call = cst.Call(cst.Attribute(target, cst.Name(method)), args)
    return cst.Expr(call, semicolon=like.semicolon)


def _alternative(plan: _Plan) -> str:
    """The other way to fix an int counter (a dynamic int), and why not here when the code takes it modulo."""
    if plan.dtype != "int":
        return ""
    alternative = (
        "keep it a Python int and set torch._dynamo.config.allow_unspec_int_on_nn_module = True at "
        "start-up: dynamo then recompiles once for a dynamic int instead of once per value"
    )
    modulo = any(
        isinstance(p, cst.BinaryOperation) and isinstance(p.operator, cst.Modulo) and p.left is r
        for r in plan.uses.reads
        for p in [plan.src.parents.get(r)]
    )
    if modulo:  # measured on torch 2.13.0 and 2.15.0 (fixtures/verify/README.md)
        alternative += (
            " (not here as written: with the int dynamic, `% n` fails to compile on torch 2.13-2.15, "
            "BackendCompilerFailed in AOTAutograd's tensorify pass)"
        )
    return alternative


def proposal(plan: _Plan, finding: Finding, in_place: bool = True) -> Proposal:
    """The buffer, updated in place (`self.calls.add_(1)`), with the rebinding form as its fallback; with
    `in_place=False` the fallback itself: every update rebinds the attribute to a new tensor
    (`self.calls = self.calls + 1`), so nothing the forward read is mutated (profiler/hazards.py: on torch 2.13
    to 2.15 AOTAutograd's partitioner may recompute a read of a buffer in the backward after its in-place update)."""
    src, attr = plan.src, plan.attr
    tensor, imports = src.torch_expr("tensor")
    init_value = plan.init.value
    assert init_value is not None
    if plan.dtype == "float":
        init_value = _float_value(src, init_value)
    q = _quote(src)
    no_space = cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(""))
    register = _call_stmt(
        cst.Name(plan.self_name),
        "register_buffer",
        [
            cst.Arg(cst.SimpleString(f"{q}{attr}{q}")),
            cst.Arg(cst.Call(tensor, [cst.Arg(init_value)])),
            cst.Arg(cst.Name("False"), keyword=cst.Name("persistent"), equal=no_space),
        ],
        plan.init,
    )
    edits: dict[cst.CSTNode, cst.CSTNode] = {plan.init: register}
    # Every update is in place, so the buffer stays the tensor CUDA graphs captured (rebinding it to a graph
    # output fails under mode="reduce-overhead" once the next replay overwrites that output).
    for w in plan.uses.writes:
        if w is plan.init:
            continue
        target = w.targets[0].target if isinstance(w, cst.Assign) else w.target
        update = _self_update(src, w)
        if update is not None and not in_place:
            op, operand = update
            binop = next(b for b, a in _BINARY.items() if a is op)
            rebound = cst.BinaryOperation(target.deep_clone(), binop(), _parenthesized(operand))
            edits[w] = cst.Assign([cst.AssignTarget(target.deep_clone())], rebound, semicolon=w.semicolon)
            continue
        if update is not None:
            op, operand = update
            edits[w] = _call_stmt(target, AUGMENTED_IN_PLACE[op][0], [cst.Arg(operand)], w)
            continue
        value = w.value
        assert value is not None
        edits[w] = _call_stmt(target, "fill_", [cst.Arg(value)], w)
    # A read that autograd may save (or that escapes the expression) takes a snapshot: a later in-place
    # update would otherwise change a value saved for backward, and a Python number was a snapshot anyway.
    snapshots = [r for r in plan.uses.reads if _may_be_kept(src, r, attr)]
    for r in snapshots:
        edits[r] = cst.Call(cst.Attribute(r.deep_clone(), cst.Name("clone")), [])
    why = (
        f"make self.{attr} a non-persistent 0-dim tensor buffer, updated in place: dynamo then reads its value "
        'instead of guarding on it and recompiling when it changes, and CUDA graphs (mode="reduce-overhead") '
        "keep updating the same tensor"
    )
    alternative = _alternative(plan)
    if not in_place:
        return Proposal(
            (finding,),
            finding.rule,
            src.path,
            why=f"make self.{attr} a non-persistent 0-dim tensor buffer, rebound to a new tensor at each update "
            f"(self.{attr} = self.{attr} + 1): dynamo reads its value instead of guarding on it, and no value the "
            "forward read is changed in place (on torch 2.13-2.15 the in-place form can get wrong gradients); "
            'not for CUDA graphs (mode="reduce-overhead"), which need the update in place',
            safety=UNSAFE,
            replace=edits,
            imports=imports,
            note=_note(plan, snapshots),
            alternative=alternative,
            shape="buffer-rebound",
        )
    updated = any(w is not plan.init and _self_update(src, w) is not None for w in plan.uses.writes)
    fallback = proposal(plan, finding, in_place=False) if updated else None
    return Proposal(
        (finding,),
        finding.rule,
        src.path,
        why=why,
        safety=UNSAFE,
        replace=edits,
        imports=imports,
        note=_note(plan, snapshots),
        alternative=alternative,
        fallbacks=(fallback,) if fallback is not None else (),
        shape="buffer-in-place" if plan.uses.reads else "buffer-in-place-unread",
    )


def _note(plan: _Plan, snapshots: list[cst.Attribute]) -> str:
    attr = plan.attr
    if plan.dtype == "float":
        dtype = (
            "a float tensor of torch's default dtype (float32 unless you changed it), like the parameters: it "
            "follows model.to(dtype)/.half() and exists on every device (MPS has no float64), but it keeps "
            "about 7 significant digits where the Python float kept 16; write torch.tensor(v, "
            "dtype=torch.float64) if the extra precision matters"
        )
    else:
        dtype = (
            "an int64 tensor (it only ever holds ints here; if it should hold floats, start it at 0.0: an "
            "int64 buffer cannot take a float in place)"
        )
    parts = [
        f"self.{attr} becomes {dtype}.",
        "It is registered with persistent=False, so state_dict() and existing checkpoints do not change, and "
        "it moves with module.to(device).",
    ]
    if plan.uses.reads:
        lines = sorted({plan.src.line_of(r) for r in plan.uses.reads})
        parts.append(
            f"It is read in computations (line {', '.join(map(str, lines))}): arithmetic with it now "
            "runs in tensor precision (float32 when mixed with Python floats) instead of Python's double, "
            "so results can differ around 1e-7."
        )
    if snapshots:
        lines = sorted({plan.src.line_of(r) for r in snapshots})
        parts.append(
            f"Where autograd may save it or the value leaves the expression (line {', '.join(map(str, lines))}) "
            f"it is read as self.{attr}.clone(): the in-place updates would otherwise change a value saved for "
            'backward ("modified by an inplace operation") or one the caller kept.'
        )
    outside = plan.uses.outside_reads
    needs_number = [(f"line {line} {problem}", code) for line, code, problem in outside if problem]
    if needs_number:
        parts.append(
            f"Outside the class, {'; '.join(n for n, _ in needs_number)}: it gets a tensor there now, "
            f"so write {needs_number[0][1]}.item() where a Python number is needed."
        )
    else:
        where = f" (line {', '.join(str(line) for line, _, _ in outside)} of this file)" if outside else ""
        parts.append(
            f"Code that reads {attr}{where} gets a tensor now: print shows tensor(3) and json cannot "
            "encode it; use .item() where a Python number is needed."
        )
    return " ".join(parts)
