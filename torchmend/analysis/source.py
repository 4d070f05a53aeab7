"""Parsed sources with the metadata codemods need, and the context they propose in.

A `SourceFile` is parsed once; its module's nodes are the identities proposals refer to. Nodes are
found by position (PositionProvider), never by regex; names by QualifiedNameProvider, so
`import torch as t; t.where` is recognised.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, TypeVar, cast, overload

import libcst as cst
from libcst.metadata import (
    Assignment,
    CodeRange,
    MetadataWrapper,
    ParentNodeProvider,
    PositionProvider,
    QualifiedNameProvider,
    ScopeProvider,
)
from libcst.metadata.base_provider import LazyValue

from torchmend.analysis import match as m
from torchmend.analysis.torch_api import spelling
from torchmend.analysis.window import is_large, window
from torchmend.model import Finding, Placement

N = TypeVar("N", bound=cst.CSTNode)


class SourceError(Exception):
    """A file a finding names cannot be read or parsed."""


class SourceFile:
    def __init__(
        self,
        path: str,
        text: str,
        focus: Collection[int] = (),
        whole: bool = False,
        torch_version: tuple[int, ...] | None = None,
    ) -> None:
        """`focus`: the lines findings point at; a large file is parsed around them (torchmend/analysis/window.py),
        unless `whole` (lint, which has no findings yet to focus on). `torch_version`: the release the code will run
        on, which spells the torch APIs codemods write (torch_api.py); None: the newest read."""
        self.path = path
        self.text = text
        self.torch_version = torch_version
        self._nodes_cache: dict[tuple[cst.CSTNode, Any], list[Any]] = {}
        self._statements: dict[int, cst.BaseStatement] | None = None  # statement_at's index
        self._window = window(text, focus) if is_large(text) and not whole else None
        try:
            parsed = cst.parse_module(self._window.text if self._window else text)
        except cst.ParserSyntaxError as e:
            raise SourceError(f"{path} does not parse: {e.message} (line {e.raw_line})") from e
        # unsafe_skip_copy: the wrapper's module *is* `parsed`, so proposals and the engine share node identities.
        self.wrapper = MetadataWrapper(parsed, unsafe_skip_copy=True)
        self.module = self.wrapper.module
        self.positions: dict[cst.CSTNode, CodeRange] = dict(self.wrapper.resolve(PositionProvider))
        self.parents: dict[cst.CSTNode, cst.CSTNode] = dict(self.wrapper.resolve(ParentNodeProvider))
        self._qnames = self.wrapper.resolve(QualifiedNameProvider)
        self.scopes = self.wrapper.resolve(ScopeProvider)
        if self._window is not None:  # a stub is no statement of the file: no line finds it
            stubs = self._window.stub_texts
            for stmt in self.module.body:
                if m.matches(stmt, m.SimpleStatementLine([m.Expr(m.SimpleString())])):
                    string = cast(cst.Expr, cast(cst.SimpleStatementLine, stmt).body[0]).value
                    if cast(cst.SimpleString, string).value in stubs:
                        del self.positions[stmt]

    def restore(self, code: str) -> str:
        """The file's text for this module's (changed) code: in a large file, the left-out text put back."""
        return self._window.restore(code) if self._window else code

    # --- positions ----------------------------------------------------------------------------------

    def line_of(self, node: cst.CSTNode) -> int:
        return self.positions[node].start.line

    def statement_at(self, line: int) -> cst.BaseStatement | None:
        """The innermost statement whose span covers `line`: a simple statement line, or a compound
        statement whose header covers it (`if x:` over several lines included)."""
        if self._statements is None:  # built once: codemods ask for many lines of one file
            self._statements = self._statements_by_line()
        return self._statements.get(line)

    def _statements_by_line(self) -> dict[int, cst.BaseStatement]:
        """Each line to the innermost statement covering it (the first found where two are equally deep)."""
        best: dict[int, tuple[int, cst.BaseStatement]] = {}
        for node, rng in self.positions.items():
            if not isinstance(node, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
                continue
            depth = sum(1 for _ in self.ancestors(node))
            for line in range(rng.start.line, self._header_end(node, rng) + 1):
                if line not in best or depth > best[line][0]:
                    best[line] = (depth, node)
        return {line: node for line, (_, node) in best.items()}

    def _header_end(self, node: cst.BaseStatement, rng: CodeRange) -> int:
        if isinstance(node, cst.Match):  # no body of its own: the header ends before the first case
            first_case = self.positions.get(node.cases[0]) if node.cases else None
            return max(rng.start.line, first_case.start.line - 1) if first_case is not None else rng.end.line
        if isinstance(node, cst.BaseCompoundStatement):
            body = self.positions.get(node.body)
            if body is not None:
                # The body of `if x: y` starts on the header line; an indented block on the next one.
                first = node.body.body[0] if isinstance(node.body, cst.IndentedBlock) and node.body.body else None
                start = self.positions[first].start.line - 1 if first is not None else body.start.line
                return max(rng.start.line, start)
        return rng.end.line

    def ancestors(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        while node in self.parents:
            node = self.parents[node]
            yield node

    @overload
    def enclosing(self, node: cst.CSTNode, kind: type[N]) -> N | None: ...  # the result's type follows `kind`
    @overload
    def enclosing(self, node: cst.CSTNode, kind: tuple[type, ...]) -> cst.CSTNode | None: ...

    def enclosing(self, node: cst.CSTNode, kind: type | tuple[type, ...]) -> cst.CSTNode | None:
        return next((a for a in self.ancestors(node) if isinstance(a, kind)), None)

    def function_at(self, line: int) -> cst.FunctionDef | None:
        stmt = self.statement_at(line)
        if stmt is None:
            return None
        if isinstance(stmt, cst.FunctionDef) and self.positions[stmt].start.line == line:
            return stmt
        fn = self.enclosing(stmt, cst.FunctionDef)
        return fn if isinstance(fn, cst.FunctionDef) else None

    @overload
    def nodes_in(self, root: cst.CSTNode, kind: type[N]) -> list[N]: ...  # the element type follows `kind`
    @overload
    def nodes_in(self, root: cst.CSTNode, kind: tuple[type, ...]) -> list[cst.CSTNode]: ...

    def nodes_in(self, root: cst.CSTNode, kind: type | tuple[type, ...]) -> list[Any]:
        """Every node of `kind` under `root` (root included), in source order (an enclosing node before the
        nodes inside it). Walks only `root`'s subtree. (The overloads above give the precise element type.)
        Cached per (root, kind): libcst nodes are immutable, and the codemods ask the same questions of a file
        for every finding (a walk per call cost most of a codemod's time)."""
        key = (root, kind)
        cached = self._nodes_cache.get(key)
        if cached is not None:
            return list(cached)
        found: list[Any] = []

        class _Collect(cst.CSTVisitor):
            def on_visit(self, node: cst.CSTNode) -> bool:
                if isinstance(node, kind):
                    found.append(node)
                return True

        root.visit(_Collect())
        self._nodes_cache[key] = found
        return list(found)

    def code(self, node: cst.CSTNode) -> str:
        return self.module.code_for_node(node)

    # --- bindings -----------------------------------------------------------------------------------

    def referents(self, name: cst.Name) -> list[cst.CSTNode]:
        """The nodes that bind what this read of `name` refers to (its assignments, in scope analysis)."""
        scope = self.scopes.get(name)
        if scope is None:
            return []
        for access in scope.accesses:
            if access.node is name:
                return [r.node for r in access.referents if isinstance(r, Assignment)]
        return []

    def assigned_value(self, target: cst.CSTNode) -> cst.BaseExpression | None:
        """The value of `target = value` or `target: T = value` (a single plain target), else None."""
        parent = self.parents.get(target)
        if isinstance(parent, cst.AssignTarget):
            assign = self.parents.get(parent)
            if isinstance(assign, cst.Assign) and len(assign.targets) == 1:
                return assign.value
        if isinstance(parent, cst.AnnAssign) and parent.value is not None:
            return parent.value
        return None

    # --- names --------------------------------------------------------------------------------------

    def qualified_names(self, node: cst.CSTNode) -> set[str]:
        value = self._qnames.get(node, set())
        if isinstance(value, LazyValue):  # libcst computes some providers' values on first use
            value = value()
        return {q.name for q in value}

    def is_qualified(self, node: cst.CSTNode, *names: str) -> bool:
        return bool(self.qualified_names(node) & set(names))

    @cached_property
    def torch_alias(self) -> str | None:
        """The module-level name bound to `torch` by `import torch` / `import torch as t`, if any."""
        for stmt in self.module.body:
            if not isinstance(stmt, cst.SimpleStatementLine):
                continue
            for small in stmt.body:
                if isinstance(small, cst.Import):
                    for alias in small.names:
                        if m.matches(alias.name, m.Name("torch")):
                            # An import's `as` names a Name (only a `with` item's may be a tuple).
                            return cast(cst.Name, alias.asname.name).value if alias.asname else "torch"
        return None

    def torch_expr(self, dotted: str) -> tuple[cst.BaseExpression, tuple[tuple[str, str | None], ...]]:
        """An expression for `torch.<dotted>` (the API's newest spelling) as this file's torch release spells it
        (torch_api.py) and the file names torch, and the import it needs (if any)."""
        alias = self.torch_alias
        imports: tuple[tuple[str, str | None], ...] = () if alias else (("torch", None),)
        return cst.parse_expression(f"{alias or 'torch'}.{spelling(dotted, self.torch_version)}"), imports


@dataclass
class Context:
    """What a codemod may look at: the project's sources, parsed on demand (read through `read`)."""

    project_root: str
    read: Callable[[str], str]
    whole_files: bool = False  # parse large files whole (lint), not around the findings' lines
    torch_version: tuple[int, ...] | None = None  # the release the code runs on (torch_api.py); None: the newest
    # what the run showed of each whole-model compile that broke inside (profiler/placement.py): compile placement
    placements: tuple[Placement, ...] = ()

    def __post_init__(self) -> None:
        self._files: dict[str, SourceFile] = {}
        self._texts: dict[str, str] = {}  # read, not parsed (text_of)
        self._focus: dict[str, set[int]] = {}

    def focus(self, findings: Iterable[Finding]) -> None:
        """The lines these findings point at, per file: in a large file, the part libcst parses (window.py).
        Call before the files are read."""
        for f in findings:
            for loc in (f, f.user_frame, f.call_site, f.compiled_function, f.entry):
                if loc is not None and loc.path:
                    self._focus.setdefault(os.path.realpath(loc.path), set()).add(loc.line)

    def text_of(self, path: str) -> str:
        """A file's text without parsing it (a cheap look before the parse: does it compile anything?)."""
        path = os.path.realpath(path)
        if path in self._files:
            return self._files[path].text
        if path not in self._texts:
            try:
                self._texts[path] = self.read(path)
            except OSError as e:
                raise SourceError(f"cannot read {path}: {e.strerror or e}") from e
        return self._texts[path]

    def file(self, path: str) -> SourceFile:
        path = os.path.realpath(path)
        if path not in self._files:
            text = self.text_of(path)
            self._texts.pop(path, None)
            self._files[path] = SourceFile(
                path, text, self._focus.get(path, ()), whole=self.whole_files, torch_version=self.torch_version
            )
        return self._files[path]

    def in_project(self, path: str) -> bool:
        real = os.path.realpath(path)
        root = os.path.realpath(self.project_root)
        parts = real.split(os.sep)
        if "site-packages" in parts or "dist-packages" in parts:
            return False
        return real.startswith(root + os.sep)

    def loaded(self) -> Sequence[SourceFile]:
        return list(self._files.values())


def simple_names(node: cst.CSTNode) -> set[str]:
    """Every plain Name read in an expression (attribute bases included, attribute names not)."""
    names: set[str] = set()

    class _V(cst.CSTVisitor):
        def visit_Name(self, n: cst.Name) -> None:
            names.add(n.value)

        def visit_Attribute(self, n: cst.Attribute) -> bool:
            n.value.visit(self)
            return False

    node.visit(_V())
    return names
