"""A break inside a library, fixed from the user's script: the end user's remedies. The library is read, never
edited; one line goes right before the script's compile call, with an import of the library module it names.

- `rebind_disabled`: a library function that should run eagerly (a helper drawing host random numbers, TM110) is
  re-bound from the script, `mod.fn = torch.compiler.disable(mod.fn)`: a module-level def, or a plain method of a
  module-level class. Code of that module looks the name up when it calls it, so it reaches the disabled function;
  a module that imported the function by name keeps the original (verification judges the run).
- `library_logger`: a Logger method called through a logger bound at the library module's top level
  (`logger.warning_once(...)`). From torch 2.14, where the call's arguments allow it,
  `reorderable_logging_functions.add(mod.logger.method)` keeps the message (logged after the graph); otherwise
  `ignore_logging_functions.add(mod.logger.method)` makes the call a no-op in compiled code (its message is dropped
  there). Both match that one logger's bound method, not every logger's (measured on 2.13, 2.14 and 2.15)."""

from __future__ import annotations

import os
from dataclasses import replace

import libcst as cst
from libcst.helpers import get_full_name_for_node

from torchmend.analysis.dynamo_config import REORDER, REORDERS, has_member, logger_plan
from torchmend.analysis.entry import CompileSite, compile_site_for
from torchmend.analysis.source import Context, SourceFile
from torchmend.codemods.base import SAFE, UNSAFE, NoFix, Proposal, Safety
from torchmend.codemods.dynamo_config import add_member
from torchmend.model import Finding

IGNORE = "ignore_logging_functions"
_SITE_DIRS = ("site-packages", "dist-packages")


def library_module(path: str) -> str | None:
    """The dotted module a file under site-packages (or dist-packages) is imported as; None elsewhere."""
    parts = os.path.normpath(path).split(os.sep)
    roots = [i for i, p in enumerate(parts) if p in _SITE_DIRS]
    if not roots or not parts[-1].endswith(".py"):
        return None
    names = parts[roots[-1] + 1 :]
    names[-1] = names[-1][: -len(".py")]
    if names[-1] == "__init__":
        names.pop()
    return ".".join(names) if names and all(n.isidentifier() for n in names) else None


def _owner_path(src: SourceFile, fn: cst.FunctionDef) -> str | None:
    """`fn` or `Cls.fn` for a module-level def or a plain method of a module-level class; None otherwise."""
    owner = src.enclosing(fn, (cst.FunctionDef, cst.ClassDef))
    if owner is None:
        return fn.name.value
    if isinstance(owner, cst.ClassDef) and src.enclosing(owner, (cst.FunctionDef, cst.ClassDef)) is None:
        if fn.decorators:  # staticmethod, classmethod, property: re-binding the plain function would change them
            return None
        return f"{owner.name.value}.{fn.name.value}"
    return None


def _rebinds(src: SourceFile, target: str) -> bool:
    """The script already assigns `target` (a re-binding written before)."""
    return any(
        get_full_name_for_node(t.target) == target for a in src.nodes_in(src.module, cst.Assign) for t in a.targets
    )


def rebind_disabled(
    finding: Finding, ctx: Context, src: SourceFile, fn: cst.FunctionDef, *, why: str, note: str, shape: str
) -> Proposal | NoFix:
    """`mod.fn = torch.compiler.disable(mod.fn)` in the script, before its compile call."""
    module = library_module(src.path)
    owned = _owner_path(src, fn)
    if module is None or owned is None:
        where = "a module-level function or a plain method" if module else "a module torchmend can name"
        return NoFix(finding, f"`{fn.name.value}` in {finding.file} is not {where}, so the script cannot re-bind it")
    site = compile_site_for(finding, ctx)
    if isinstance(site, str):
        return NoFix(finding, site)
    target = f"{module}.{owned}"
    if _rebinds(site.src, target):
        return NoFix(finding, f"{site.src.path} already re-binds `{target}`", skipped=True)
    disable, imports = site.src.torch_expr("compiler.disable")
    code = f"{target} = {cst.Module([]).code_for_node(disable)}({target})\n"
    stmt = cst.parse_statement(code)
    return Proposal(
        (finding,),
        finding.rule,
        site.src.path,
        why=why,
        safety=UNSAFE,
        insert_before={site.statement: [stmt]},
        imports=(*imports, (module, None)),
        note=note,
        shape=shape,
    )


def _releases_logger(ctx: Context) -> bool:
    version = ctx.torch_version
    return version is None or version[:2] >= REORDERS["logger"]


def library_logger(finding: Finding, ctx: Context, src: SourceFile, call: cst.Call) -> Proposal | NoFix | None:
    """The library's logger call kept (2.14+: reordered) or made a no-op in compiled code, from the script; None
    when the call is not a Logger method of a logger bound at the library module's top level."""
    module = library_module(src.path)
    func = call.func
    if module is None or not isinstance(func, cst.Attribute) or not isinstance(func.value, cst.Name):
        return None
    keep = logger_plan(src, call) is not None and _releases_logger(ctx)
    name = func.value.value
    refs = src.referents(func.value)
    if not refs or any(src.function_at(src.line_of(r)) is not None for r in refs):
        return None  # a logger made inside a function: the script cannot name it
    site = compile_site_for(finding, ctx)
    if isinstance(site, str):
        return None
    member = f"{module}.{name}.{func.attr.value}"
    option, safety = (REORDER, SAFE) if keep else (IGNORE, UNSAFE)
    if has_member(site.src, option, member):
        return NoFix(finding, f"`{member}` is already in `torch._dynamo.config.{option}` ({site.src.path})")
    return _logger_proposal(finding, site, module, member, option, safety)


def _logger_proposal(
    finding: Finding, site: CompileSite, module: str, member: str, option: str, safety: Safety
) -> Proposal:
    if option == REORDER:
        why = f"keep the library's log message: dynamo runs `{member}(...)` after the graph instead of breaking it"
        note = "the message is logged after the graph's work rather than in the middle of it"
    else:
        why = (
            f"make the library's `{member}(...)` a no-op in compiled code (the run's torch cannot log it after "
            "the graph), so the graph does not break"
        )
        note = (
            "that logger's message is no longer logged from compiled code (it still is when the code runs "
            "eagerly); from torch 2.14 it can be kept instead (reorderable_logging_functions)"
        )
    proposal = add_member(
        (finding,),
        site,
        option,
        member,
        why=why,
        note=note,
        alternative="raise that library logger's level so it does not log, before compiling",
        safety=safety,
    )
    return replace(proposal, imports=(*proposal.imports, (module, None)))
