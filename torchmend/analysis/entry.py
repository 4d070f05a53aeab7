"""Where the user's script compiles: the statement a process-wide setting (`torch._dynamo.config.<option>`)
must come before. Dynamo reads its config when it traces, so a line placed right before the
`torch.compile(...)` / `model.compile()` call (or the `@torch.compile` def) holds for everything that call
compiles, wherever in the project the compiled code lives."""

from __future__ import annotations

import os
import weakref
from dataclasses import dataclass

import libcst as cst

from torchmend.analysis import match as m
from torchmend.analysis.calls import compile_decorator, compile_target, compiled_functions
from torchmend.analysis.names import os_same
from torchmend.analysis.source import Context, SourceError, SourceFile
from torchmend.model import Finding


@dataclass(frozen=True, eq=False)
class CompileSite:
    """A compile call (or `@torch.compile` def) and the statement that holds it in its block."""

    src: SourceFile
    node: cst.CSTNode  # the torch.compile(...) / x.compile() call, or the decorator
    statement: cst.BaseStatement  # what a config line goes right before


def _module_compile_call(call: cst.Call) -> bool:
    """`model.compile()` / `model.compile(mode=...)`: nn.Module.compile (keywords only; `re.compile(p)` has a
    positional pattern)."""
    return m.matches(call.func, m.Attribute(attr=m.Name("compile"))) and all(a.keyword is not None for a in call.args)


def compile_sites(src: SourceFile) -> list[CompileSite]:
    """Every compile of this file, in source order."""
    found: list[CompileSite] = []
    for fn in src.nodes_in(src.module, cst.FunctionDef):
        dec = compile_decorator(src, fn)
        if dec is not None:
            found.append(CompileSite(src, dec, fn))
    for call in src.nodes_in(src.module, cst.Call):
        if isinstance(src.parents.get(call), cst.Decorator):
            continue
        if compile_target(src, call) is None and not (
            _module_compile_call(call) and not src.is_qualified(call.func, "re.compile")
        ):
            continue
        stmt = src.enclosing(call, (cst.SimpleStatementLine, cst.BaseCompoundStatement))
        if isinstance(stmt, cst.BaseStatement):
            found.append(CompileSite(src, call, stmt))
    return sorted(found, key=lambda s: src.line_of(s.statement))


def _scripts(ctx: Context) -> list[str]:
    """The project's top-level scripts: .py files in the project root, and in folders of it that are not
    packages (a vendored library is a package: its compile calls are not the user's)."""
    root = ctx.project_root
    found: list[str] = []
    try:
        entries = sorted(os.scandir(root), key=lambda e: e.name)
    except OSError:
        return found
    for entry in entries:
        if entry.name.startswith("."):
            continue
        if entry.is_file() and entry.name.endswith(".py"):
            found.append(entry.path)
        elif entry.is_dir() and not os.path.exists(os.path.join(entry.path, "__init__.py")):
            try:
                found += sorted(e.path for e in os.scandir(entry.path) if e.is_file() and e.name.endswith(".py"))
            except OSError:
                continue
    return found


def _sites_in(ctx: Context, path: str) -> list[CompileSite]:
    try:
        if "compile" not in ctx.text_of(path):  # most scripts compile nothing: not parsed at all
            return []
        src = ctx.file(path)
    except SourceError:
        return []
    if src in _SITES:  # asked once per finding a codemod places a line for: parsed trees do not change
        return _SITES[src]
    try:
        sites = compile_sites(src)
    except Exception:  # a file libcst cannot read is not where the user compiles
        sites = []
    _SITES[src] = sites
    return sites


_SITES: weakref.WeakKeyDictionary[SourceFile, list[CompileSite]] = weakref.WeakKeyDictionary()


def _nearest(sites: list[CompileSite], line: int) -> CompileSite:
    """The first compile inside the innermost function that holds `line` (its decorators included), else the
    file's first: in a test file each test compiles its own model, and the one that ran is the test's."""
    src = sites[0].src
    spans = []
    for fn in src.nodes_in(src.module, cst.FunctionDef):
        end = src.positions[fn].end.line
        start = min([src.positions[d].start.line for d in fn.decorators] + [src.positions[fn].start.line])
        if start <= line <= end:
            spans.append((start, end))
    if spans:
        start, end = max(spans)  # the innermost: the latest start among those that hold the line
        inside = [s for s in sites if start <= src.line_of(s.statement) <= end]
        if inside:
            return inside[0]
    return sites[0]


def compile_site_for(finding: Finding, ctx: Context) -> CompileSite | str:
    """The compile that reaches the finding's code, or why it cannot be told. In order: the finding's own
    file when it compiles the function the finding is in; the file of the compiled function or call site the
    run recorded (the compile in the function that holds the recorded line, else the file's first); else the one
    script of the project that compiles (the earliest compile in it)."""
    own: list[CompileSite] = []
    if ctx.in_project(finding.path):
        own = _sites_in(ctx, finding.path)
        if own:
            src = own[0].src
            fn = src.function_at(finding.line)
            compiled = compiled_functions(src)
            for site in own:
                if fn is not None and compiled.get(fn) is site.node:
                    return site
    for loc in (finding.compiled_function, finding.call_site, finding.user_frame, finding.entry):
        if loc is not None and ctx.in_project(loc.path):
            sites = _sites_in(ctx, loc.path)
            if sites:
                return _nearest(sites, loc.line)
    by_file: dict[str, list[CompileSite]] = {}
    for path in _scripts(ctx):
        sites = _sites_in(ctx, path)
        if sites:
            by_file[path] = sites
    if own and not any(os_same(own[0].src.path, p) for p in by_file):
        by_file[own[0].src.path] = own
    if len(by_file) == 1:
        return next(iter(by_file.values()))[0]
    if not by_file:
        return "no torch.compile(...) or model.compile() call found in the project's scripts"
    names = ", ".join(os.path.relpath(p, ctx.project_root) for p in by_file)
    return f"several scripts compile ({names}): torchmend cannot tell which one runs this code"
