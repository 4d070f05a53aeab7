"""From a finding to the class that owns the attribute: around its line, the one module class that sets it,
or (for `fn.__self__.<attr>`) the class of the object whose method was compiled."""

from __future__ import annotations

import os
import re

import libcst as cst

from torchmend.analysis import callee, compile_site, compile_target
from torchmend.analysis.source import Context, SourceFile
from torchmend.codemods.base import NoFix, Refuse, Result
from torchmend.codemods.fixes.module_buffer.module import (
    classes_in,
    is_module,
    lineage_of,
    registers,
    sets_in_init,
)
from torchmend.codemods.fixes.module_buffer.plan import names, plan_for, proposal
from torchmend.model import Finding, Location, Where

# `self.calls`, or the last attribute of a path to a submodule (`self.block.calls`, `self._modules['b'].calls`).
_VARIABLE = re.compile(r"(?P<base>.+)\.(?P<attr>[A-Za-z_]\w*)")

STOPGAP = (
    "as a stopgap, raise torch._dynamo.config.recompile_limit (8 by default) at start-up; each new "
    "value then costs one more compile"
)


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
    classes = classes_in(src)
    found = []
    for cls in classes.values():
        if is_module(src, cls, classes) and (sets_in_init(src, cls, attr) or registers(src, cls, attr)):
            found.append(cls)
    if len(found) != 1:
        what = "no module class" if not found else f"{len(found)} module classes ({names(found)})"
        raise Refuse(
            f"cannot tell which class {finding.variable} belongs to: {what} in {finding.file} set "
            f"self.{attr} in __init__",
            "fix it where that class is defined (its own TM201 finding)",
        )
    return found[0]


# a guard that compares the attribute to a string, a bool or None: module state that no buffer can stand for
_NOT_A_NUMBER = re.compile(r"(?:==|!=|\bis(?: not)?)\s*(?P<value>'[^']*'|\"[^\"]*\"|True\b|False\b|None\b)")


def propose_buffer(finding: Finding, ctx: Context) -> Result:
    """The shared fix: TM201 and TM250 for the same attribute produce the same edit (the engine merges them)."""
    stopgap = f"; {STOPGAP}" if finding.rule == "TM250" else ""
    match = _VARIABLE.fullmatch(finding.variable or "")
    if match is not None and match["base"].split(".")[-1] == "__self__":
        return _bound_method_buffer(finding, ctx, match["attr"], stopgap)
    if finding.where != Where.PROJECT:
        return NoFix(
            finding,
            "the attribute's module is defined outside your project; torchmend never edits libraries",
            f"keep that attribute constant while the module runs compiled{stopgap}",
        )
    if match is None:
        guard = f"the guard `{finding.guard}`" if finding.guard else "a guard"
        what = f"`{finding.variable}`" if finding.variable else "no named variable"
        return NoFix(
            finding,
            f"{guard} keeps failing on {what}, which is not an attribute of a module in your "
            "project that this fix can turn into a buffer",
            f"fix the finding for that variable and this one goes away{stopgap}",
        )
    attr = match["attr"]
    state = _NOT_A_NUMBER.search(finding.guard or "")
    if state is not None:  # `self.attention_type == 'block_sparse'`, `self.rescaled == False`: a mode, not a count
        kind = "a string" if state["value"][0] in "'\"" else "a bool" if state["value"] in ("True", "False") else "None"
        return NoFix(
            finding,
            f"`self.{attr}` holds {kind} (the guard `{finding.guard}`): a mode switch, not a number a buffer could "
            "hold",
            "when it changes once (a one-time switch, as here when the count is 1) the recompile is paid once; if it "
            f"keeps changing, set self.{attr} before compiling, or keep the code that reads it outside the compiled "
            f"function{stopgap}",
        )
    src = ctx.file(finding.path)
    try:
        cls = _class_for(src, finding, match["base"], attr)
    except Refuse as r:
        return NoFix(finding, r.reason, r.advice + stopgap if r.advice else stopgap.lstrip("; "))
    return _buffer_in(finding, src, cls, attr, stopgap)


def _buffer_in(finding: Finding, src: SourceFile, cls: cst.ClassDef, attr: str, stopgap: str) -> Result:
    try:
        classes = classes_in(src)
        if any(registers(src, c, attr) for c in lineage_of(cls, classes)):
            return NoFix(finding, f"self.{attr} is already a registered buffer", skipped=True)
        plan = plan_for(src, cls, attr)
    except Refuse as r:
        return NoFix(finding, r.reason, r.advice + stopgap if r.advice else stopgap.lstrip("; "))
    return proposal(plan, finding)


def _bound_method_buffer(finding: Finding, ctx: Context, attr: str, stopgap: str) -> Result:
    """`torch.compile(teacher.update)`: dynamo guards on `fn.__self__.<attr>` inside its wrapper (in torch's
    external_utils.py); the attribute belongs to the class of the object whose method was compiled, found
    from the user's line that calls it (or compiles it), possibly in another file of the project."""
    places: list[Location | Finding] = [loc for loc in (finding.user_frame, finding.call_site) if loc is not None]
    if finding.where == Where.PROJECT:
        places.insert(0, finding)
    owners: dict[int, tuple[SourceFile, cst.ClassDef]] = {}
    looked: list[str] = []
    unknown: list[str] = []
    for loc in places:
        if not ctx.in_project(loc.path):
            continue
        src = ctx.file(loc.path)
        stmt = src.statement_at(loc.line)
        for call in src.nodes_in(stmt, cst.Call) if stmt is not None else []:
            target = compile_target(src, call)
            found = callee(src, target if target is not None else call.func, ctx)
            compiled = found is not None and (target is not None or found.compiled_at is not None)
            if found is not None and compiled and found.bound and found.owner is not None:
                owners[id(found.owner)] = (found.src, found.owner)
            elif found is None:
                unknown += _unknown_object(src, call)
        looked.append(f"line {loc.line} of {os.path.relpath(loc.path, ctx.project_root)}")
        if owners:
            break
    advice = (
        f'make `{attr}` a buffer of the class whose method you compile (`self.register_buffer("{attr}", '
        f"torch.tensor(0), persistent=False)` and update it in place){stopgap}"
    )
    if len(owners) != 1:
        where = " or ".join(looked) or "no line of your project"
        what = (
            f"{len(owners)} compiled methods of different classes"
            if owners
            else unknown[0]
            if unknown
            else "no compiled bound method (`torch.compile(obj.method)`) whose object's class torchmend can find"
        )
        return NoFix(
            finding,
            f"the guard is on `{finding.variable}`, an attribute of the object whose method was "
            f"compiled; at {where} torchmend sees {what}",
            advice,
        )
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
