"""Structural patterns over libcst nodes: the part of `libcst.matchers` that torchmend uses, without importing it.

`import libcst.matchers` builds one frozen dataclass per node type (about 500) when it is imported: about a second of
a 2-core machine's time at the start of every `fix`, `lint` and `verify`, for matching a few dozen shapes. This
module keeps its spelling (`m.Call(func=m.Attribute(attr=m.Name("size")), args=[])`, `a | b`, `m.OneOf(...)`,
`m.matches`, `m.findall`) and its meaning for what is used here:

- a pattern names a node type and some of its fields; a field not named matches anything;
- a field's value is a pattern (the field holds a node that matches it), a string or a bool (equal), None (the field
  is None) or a list of those (a sequence of exactly that length, element by element);
- the first positional argument is the node type's first field (`m.Name("x")` is `m.Name(value="x")`);
- a node matches a pattern of its own class only (by class name, as libcst's matchers compare), a MaybeSentinel
  matches nothing; `findall` visits the tree in libcst's order, the root first, and keeps descending into matches.

tests/unit/test_match.py checks each of these against libcst.matchers itself.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, ClassVar

import libcst as cst


class OneOf:
    """Matches what any of its options matches (`a | b` makes one)."""

    def __init__(self, *options: Pattern | OneOf) -> None:
        flat: list[Pattern] = []
        for option in options:
            flat.extend(option.options if isinstance(option, OneOf) else (option,))
        self.options: tuple[Pattern, ...] = tuple(flat)

    def __or__(self, other: Pattern | OneOf) -> OneOf:
        return OneOf(self, other)

    def __repr__(self) -> str:
        return " | ".join(map(repr, self.options))


class Pattern:
    """A node type and some of its fields' expected values."""

    node: ClassVar[type[cst.CSTNode]]
    _fields: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.node = getattr(cst, cls.__name__)
        cls._fields = tuple(f.name for f in dataclasses.fields(cls.node))

    def __init__(self, *args: Any, **fields: Any) -> None:
        if len(args) > 1:
            raise TypeError(f"{type(self).__name__} takes at most one positional field, got {len(args)}")
        if args:
            first = self._fields[0]
            if first in fields:
                raise TypeError(f"{type(self).__name__} got {first!r} twice")
            fields = {first: args[0], **fields}
        unknown = sorted(set(fields) - set(self._fields))
        if unknown:
            raise TypeError(f"{type(self).__name__} has no field {', '.join(unknown)}")
        self.fields: dict[str, Any] = fields

    def __or__(self, other: Pattern | OneOf) -> OneOf:
        return OneOf(self, other)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in self.fields.items())})"


def matches(node: object, pattern: Pattern | OneOf) -> bool:
    """Whether `node` (a libcst node, or anything else: then False) matches `pattern`."""
    if isinstance(pattern, OneOf):
        return any(matches(node, option) for option in pattern.options)
    if not isinstance(node, cst.CSTNode) or type(node).__name__ != pattern.node.__name__:
        return False
    return all(_field_matches(getattr(node, name), want) for name, want in pattern.fields.items())


def _field_matches(value: object, want: Any) -> bool:
    if isinstance(want, (Pattern, OneOf)):
        return matches(value, want)
    if want is None:
        return value is None
    if isinstance(want, bool):
        return value is want
    if isinstance(want, str):
        return value == want
    if isinstance(want, Sequence):
        return (
            isinstance(value, Sequence)
            and not isinstance(value, str)
            and len(value) == len(want)
            and all(_field_matches(v, w) for v, w in zip(value, want, strict=True))
        )
    raise TypeError(f"a pattern's field must be a pattern, a string, a bool, None or a list of them, not {want!r}")


class _Finder(cst.CSTVisitor):
    def __init__(self, pattern: Pattern | OneOf) -> None:
        self.pattern = pattern
        self.found: list[cst.CSTNode] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        if matches(node, self.pattern):
            self.found.append(node)
        return True


def findall(tree: object, pattern: Pattern | OneOf) -> list[cst.CSTNode]:
    """Every node under `tree` (itself included) that matches `pattern`, in visiting order."""
    if not isinstance(tree, cst.CSTNode):
        return []
    finder = _Finder(pattern)
    tree.visit(finder)
    return finder.found


class AnnAssign(Pattern):
    pass


class Arg(Pattern):
    pass


class AsName(Pattern):
    pass


class Assign(Pattern):
    pass


class AssignTarget(Pattern):
    pass


class AugAssign(Pattern):
    pass


class Attribute(Pattern):
    pass


class Call(Pattern):
    pass


class Comparison(Pattern):
    pass


class ComparisonTarget(Pattern):
    pass


class Expr(Pattern):
    pass


class For(Pattern):
    pass


class Index(Pattern):
    pass


class Integer(Pattern):
    pass


class Is(Pattern):
    pass


class Name(Pattern):
    pass


class NamedExpr(Pattern):
    pass


class Return(Pattern):
    pass


class SimpleStatementLine(Pattern):
    pass


class SimpleString(Pattern):
    pass


class Slice(Pattern):
    pass


class Subscript(Pattern):
    pass


class SubscriptElement(Pattern):
    pass


class WithItem(Pattern):
    pass
