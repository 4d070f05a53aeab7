"""Where a Python number read inside compiled code must stay a Python number: control flow, an index, a size,
a builtin. Made a tensor there, it would be a data-dependent graph break.

`python_use` answers a `PythonUse`: what kind of use it is (`UseKind`), on which line, and the callee, keyword or
attribute it names; `PythonUse.text` is its words, for people. Callers decide on the kind, never on the words."""

from __future__ import annotations

import enum
from dataclasses import dataclass

import libcst as cst

from torchmend.analysis.names import builtin_or_math, is_torch, reads
from torchmend.analysis.source import SourceFile
from torchmend.analysis.torch_ops import FACTORIES, FILL_VALUE_POSITION, SIZE_KEYWORDS, SIZE_TAKING
from torchmend.analysis.values import values


class UseKind(enum.Enum):
    """How the number is used where it must stay a Python number."""

    NOT = enum.auto()  # `not n`
    AND_OR = enum.auto()  # `n and ...`, `... or n`
    CONDITION = enum.auto()  # the test of an `if` or a `while`
    CONDITIONAL_EXPRESSION = enum.auto()  # the test of `a if n else b`
    ASSERT = enum.auto()
    INDEX = enum.auto()  # an index or a slice bound
    FORMATTED = enum.auto()  # inside an f-string
    ITERATED = enum.auto()  # `for _ in n`
    ATTRIBUTE = enum.auto()  # `n.<name>`: a Python number's attribute
    BUILTIN = enum.auto()  # passed to the builtin or math function <name>
    SIZE_KEYWORD = enum.auto()  # passed as the keyword <name>=, a size or dimension
    FACTORY_SIZE = enum.auto()  # passed to the tensor factory <name>() as a size
    SIZE_ARGUMENT = enum.auto()  # passed to <name>() as a size, a dimension or an option


@dataclass(frozen=True)
class PythonUse:
    """The first place where the number must stay a Python number: its kind, its line, and the name the kind
    speaks of (the callee, the keyword or the attribute; empty for the others)."""

    kind: UseKind
    line: int
    name: str = ""

    @property
    def text(self) -> str:
        """The use in words, to follow "`n` is": "used in the condition of an `if`/`while`"."""
        return _WORDS[self.kind].format(name=self.name)


_WORDS = {
    UseKind.NOT: "used in `not`",
    UseKind.AND_OR: "used in `and`/`or`",
    UseKind.CONDITION: "used in the condition of an `if`/`while`",
    UseKind.CONDITIONAL_EXPRESSION: "used in the condition of a conditional expression",
    UseKind.ASSERT: "used in an assert",
    UseKind.INDEX: "used as an index or slice",
    UseKind.FORMATTED: "formatted into a string",
    UseKind.ITERATED: "iterated over",
    UseKind.ATTRIBUTE: "used as a Python number (`.{name}`)",
    UseKind.BUILTIN: "passed to {name}()",
    UseKind.SIZE_KEYWORD: "passed as `{name}=`, a size or dimension",
    UseKind.FACTORY_SIZE: "passed to {name}() as a size",
    UseKind.SIZE_ARGUMENT: "passed to {name}() as a size, dimension or option that must be a Python number",
}


def _call_use(src: SourceFile, call: cst.Call, arg: cst.Arg, line: int) -> PythonUse | None:
    """Why a number passed as `arg` to `call` must stay a number, or None."""
    builtin = builtin_or_math(src, call.func)
    if builtin and builtin != "abs":
        return PythonUse(UseKind.BUILTIN, line, builtin)
    if arg.keyword is not None and arg.keyword.value in SIZE_KEYWORDS:
        return PythonUse(UseKind.SIZE_KEYWORD, line, arg.keyword.value)
    func = call.func
    leaf = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
    positional = [a for a in call.args if a.keyword is None and not a.star]
    pos = next((i for i, a in enumerate(positional) if a is arg), -1)
    torch_function = is_torch(src, func)
    method = isinstance(func, cst.Attribute) and not torch_function
    if leaf in FACTORIES and pos >= 0 and pos != FILL_VALUE_POSITION.get(leaf, -1):
        return PythonUse(UseKind.FACTORY_SIZE, line, leaf)
    if leaf in SIZE_TAKING and pos >= (0 if method else 1):
        return PythonUse(UseKind.SIZE_ARGUMENT, line, leaf)
    return None


def python_use(
    src: SourceFile, fn: cst.FunctionDef, uses: list[cst.Name], scalar: str, passed_on: list[str] | None = None
) -> PythonUse | None:
    """The first place in `fn` where the number read at `uses` must stay a Python number:
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
                    return PythonUse(UseKind.NOT, line)
            elif isinstance(parent, cst.BooleanOperation):
                return PythonUse(UseKind.AND_OR, line)
            elif isinstance(parent, (cst.If, cst.While)) and parent.test is node:
                return PythonUse(UseKind.CONDITION, line)
            elif isinstance(parent, cst.IfExp) and parent.test is node:
                return PythonUse(UseKind.CONDITIONAL_EXPRESSION, line)
            elif isinstance(parent, cst.Assert):
                return PythonUse(UseKind.ASSERT, line)
            elif isinstance(parent, (cst.SubscriptElement, cst.Index, cst.Slice)):
                return PythonUse(UseKind.INDEX, line)
            elif isinstance(parent, cst.FormattedStringExpression):
                return PythonUse(UseKind.FORMATTED, line)
            elif isinstance(parent, cst.For) and parent.iter is node:
                return PythonUse(UseKind.ITERATED, line)
            elif isinstance(parent, cst.Attribute) and parent.value is node:
                return PythonUse(UseKind.ATTRIBUTE, line, parent.attr.value)
            elif isinstance(parent, cst.Arg):
                call = src.parents.get(parent)
                if isinstance(call, cst.Call):
                    use = _call_use(src, call, parent, line)
                    if use is not None:
                        return use
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
