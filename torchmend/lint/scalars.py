"""Python numbers that change between calls of a compiled function (TM202, TM206): dynamo specialises a compiled
function on the float values it reads, so a float argument, global or closure variable that the program changes
compiles it again for each new value. Lint sees the change where the source shows it: a float argument computed
inside the loop that makes the call, or a name read from outside the function that is bound more than once to a
float. The finding is where scan reports it: the first line of the compiled function that reads the value.

Judged as scan judges the run: a float that changes recompiles once, and torch then compiles it as a dynamic value
(automatic dynamic; every scan fixture of the kind shows one recompile on 2.11, 2.13, 2.14 and 2.15), so these are
one-time findings (severity note), not a recompile on each new value."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst
from libcst.metadata import GlobalScope

from torchmend.analysis import Kind, bind, callee, values
from torchmend.analysis.source import Context, SourceFile
from torchmend.lint.checks import LIKELY, Hit, nodes_in_body
from torchmend.lint.regions import Reached

ONCE = "its first new value recompiles once, then torch compiles it as a dynamic value (one-time)"


def _first_read(src: SourceFile, fn: cst.FunctionDef, name: str) -> cst.Name | None:
    for node in nodes_in_body(fn):
        if isinstance(node, cst.Name) and node.value == name:
            scope = src.scopes.get(node)
            if scope is not None and any(a.node is node for a in scope.accesses[node]):
                return node
    return None


def changing_numbers(r: Reached, ctx: Context) -> Iterator[Hit]:
    """TM206 / TM202 for the compiled function itself (not the defs it calls: their values come through it)."""
    if r.entry is not None:
        return
    yield from _free_names(r)
    yield from _arguments(r, ctx)


def _free_names(r: Reached) -> Iterator[Hit]:
    src, fn = r.src, r.fn
    v = values(src)
    done: set[str] = set()
    for node in nodes_in_body(fn):
        if not isinstance(node, cst.Name) or node.value in done:
            continue
        refs = src.referents(node)
        if len(refs) < 2 or any(src.enclosing(ref, cst.FunctionDef) is fn or ref is fn for ref in refs):
            continue
        if any(isinstance(ref, (cst.FunctionDef, cst.ClassDef, cst.Import, cst.ImportFrom)) for ref in refs):
            continue
        if v.kind(node) is not Kind.FLOAT:
            continue
        done.add(node.value)
        module_level = isinstance(src.scopes.get(refs[0]), GlobalScope)
        rule, where = ("TM206", "global") if module_level else ("TM202", "closure variable")
        what = f"the {where} float `{node.value}` is bound {len(refs)} times: {ONCE}"
        yield Hit(rule, node, LIKELY, what, node.value, once=True)


def _in_loop(src: SourceFile, node: cst.CSTNode) -> bool:
    for anc in src.ancestors(node):
        if isinstance(anc, (cst.For, cst.While)):
            return True
        if isinstance(anc, (cst.FunctionDef, cst.ClassDef)):
            return False
    return False


def _arguments(r: Reached, ctx: Context) -> Iterator[Hit]:
    src = r.site_src
    done: set[str] = set()
    for call in src.nodes_in(src.module, cst.Call):
        if not isinstance(call.func, (cst.Name, cst.Attribute)) or not call.args or not _in_loop(src, call):
            continue
        found = callee(src, call.func, ctx)
        if found is None or found.fn is not r.fn:
            continue
        binding = bind(call, r.fn, bound=found.bound)
        v = values(src)
        for name, arg in binding.args.items():
            value = arg.value
            if name in done or isinstance(value, (cst.Float, cst.Integer)) or v.kind(value) is not Kind.FLOAT:
                continue
            read = _first_read(r.src, r.fn, name)
            if read is None:
                continue
            done.add(name)
            what = (
                f"`{name}` receives a float that changes between calls (`{src.code(value)}` at line "
                f"{src.line_of(call)}): {ONCE}"
            )
            yield Hit("TM202", read, LIKELY, what, name, call_site=(src, call), once=True)
