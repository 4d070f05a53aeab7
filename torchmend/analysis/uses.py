"""Where a Python number read inside compiled code must stay a Python number: control flow, an index, a size,
a builtin. Made a tensor there, it would be a data-dependent graph break."""

from __future__ import annotations

import libcst as cst

from torchmend.analysis.names import builtin_or_math, is_torch, reads
from torchmend.analysis.source import SourceFile
from torchmend.analysis.torch_ops import FACTORIES, FILL_VALUE_POSITION, SIZE_KEYWORDS, SIZE_TAKING
from torchmend.analysis.values import values


def call_problem(src: SourceFile, call: cst.Call, arg: cst.Arg) -> str | None:
    """Why a number passed as `arg` to `call` must stay a number, or None."""
    builtin = builtin_or_math(src, call.func)
    if builtin and builtin != "abs":
        return f"passed to {builtin}()"
    if arg.keyword is not None and arg.keyword.value in SIZE_KEYWORDS:
        return f"passed as `{arg.keyword.value}=`, a size or dimension"
    func = call.func
    leaf = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
    positional = [a for a in call.args if a.keyword is None and not a.star]
    pos = next((i for i, a in enumerate(positional) if a is arg), -1)
    torch_function = is_torch(src, func)
    method = isinstance(func, cst.Attribute) and not torch_function
    if leaf in FACTORIES and pos >= 0 and pos != FILL_VALUE_POSITION.get(leaf, -1):
        return f"passed to {leaf}() as a size"
    if leaf in SIZE_TAKING and pos >= (0 if method else 1):
        return f"passed to {leaf}() as a size, dimension or option that must be a Python number"
    return None


def python_use(
    src: SourceFile, fn: cst.FunctionDef, uses: list[cst.Name], scalar: str, passed_on: list[str] | None = None
) -> tuple[int, str] | None:
    """(line, what) of the first place in `fn` where the number read at `uses` must stay a Python number:
    control flow, an index, a size, a builtin: a tensor there would be a data-dependent graph break.
    Follows it through arithmetic and local assignments; stops where it meets a tensor. Functions it is
    passed to that torchmend cannot see into are added to `passed_on`."""
    kinds = values(src)

    def tensor(e: cst.BaseExpression) -> bool:
        return kinds.maybe_tensor(e, exclude=(scalar,))

    seen: set[str] = set()
    todo = list(uses)
    while todo:
        node: cst.CSTNode = todo.pop(0)
        while True:
            parent = src.parents.get(node)
            if parent is None:
                break
            line = src.line_of(parent) if parent in src.positions else src.line_of(node)
            if isinstance(parent, cst.BinaryOperation):
                other = parent.right if parent.left is node else parent.left
                if tensor(other):
                    break  # the result is a tensor: from here on it is tensor code
            elif isinstance(parent, cst.ComparisonTarget):
                pass
            elif isinstance(parent, cst.Comparison):
                others = [parent.left, *(c.comparator for c in parent.comparisons)]
                came_from = getattr(node, "comparator", node)
                if any(tensor(o) for o in others if o is not came_from):
                    break
            elif isinstance(parent, cst.UnaryOperation):
                if isinstance(parent.operator, cst.Not):
                    return line, "used in `not`"
            elif isinstance(parent, cst.BooleanOperation):
                return line, "used in `and`/`or`"
            elif isinstance(parent, (cst.If, cst.While)) and parent.test is node:
                return line, "used in the condition of an `if`/`while`"
            elif isinstance(parent, cst.IfExp) and parent.test is node:
                return line, "used in the condition of a conditional expression"
            elif isinstance(parent, cst.Assert):
                return line, "used in an assert"
            elif isinstance(parent, (cst.SubscriptElement, cst.Index, cst.Slice)):
                return line, "used as an index or slice"
            elif isinstance(parent, cst.FormattedStringExpression):
                return line, "formatted into a string"
            elif isinstance(parent, cst.For) and parent.iter is node:
                return line, "iterated over"
            elif isinstance(parent, cst.Attribute) and parent.value is node:
                return line, f"used as a Python number (`.{parent.attr.value}`)"
            elif isinstance(parent, cst.Arg):
                call = src.parents.get(parent)
                if isinstance(call, cst.Call):
                    problem = call_problem(src, call, parent)
                    if problem:
                        return line, problem
                    func = call.func
                    if (
                        passed_on is not None
                        and not is_torch(src, func)
                        and not (isinstance(func, cst.Attribute) and tensor(func.value))
                    ):
                        passed_on.append(src.code(func))
                break
            elif isinstance(parent, (cst.Assign, cst.AnnAssign, cst.AugAssign)):
                targets = [t.target for t in parent.targets] if isinstance(parent, cst.Assign) else [parent.target]
                if isinstance(parent, cst.AugAssign) and tensor(parent.target):
                    break
                for t in targets:  # a local that now holds the number: follow its reads too
                    names = (
                        [t]
                        if isinstance(t, cst.Name)
                        else [e.value for e in t.elements]
                        if isinstance(t, (cst.Tuple, cst.List))
                        else []
                    )
                    for n in names:
                        if isinstance(n, cst.Name) and n.value not in seen:
                            seen.add(n.value)
                            todo.extend(r for r in reads(src, fn, n.value) if src.line_of(r) >= src.line_of(parent))
                break
            elif isinstance(parent, (cst.BaseSmallStatement, cst.BaseStatement, cst.Lambda, cst.Param)):
                break
            node = parent
    return None
