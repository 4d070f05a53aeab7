"""Save the plain module, not torch.compile's wrapper (TM107): `model = torch.compile(model)` becomes
`model.compile()`, or the save names the uncompiled module (`torch.save(model.state_dict(), ...)` for
`compiled.state_dict()`). The keys then carry no `_orig_mod.` prefix."""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst
from libcst.metadata import Assignment

from torchmend.analysis import match as m
from torchmend.analysis.compiled_saves import CompiledUse, compiled_saves, compiled_state_dicts
from torchmend.analysis.names import referents
from torchmend.analysis.source import Context, SourceFile
from torchmend.codemods.base import UNSAFE, Codemod, Invalid, NoFix, Proposal, Refuse, Result, Valid
from torchmend.codemods.fixes.branch_to_where.condition import short
from torchmend.model import Finding, Where

_ADVICE = (
    "save the plain module's state: torch.save(model._orig_mod.state_dict(), path), or compile in place with "
    "model.compile() instead of model = torch.compile(model)"
)
_PICKLED = (
    "the run failed loading a whole module pickled with torch.load(weights_only=True), which refuses any pickled "
    "nn.Module, compiled or not: compiling in place would not make this load work"
)
_PICKLED_ADVICE = (
    "save the weights instead, torch.save(model._orig_mod.state_dict(), path), and load them into a fresh module "
    "with load_state_dict (or load with weights_only=False when you trust the file)"
)
# What only an OptimizedModule has: a name read this way needs the wrapper, which model.compile() does not make.
# `forward` too: the wrapper's is compiled, a module's own forward called directly is not (only its __call__ is).
_WRAPPER_ATTRS = frozenset(
    {"_orig_mod", "__wrapped__", "dynamo_ctx", "_torchdynamo_orig_callable", "get_compiler_config", "forward"}
)
_KEYS_NOTE = (
    "the checkpoint's keys lose their `_orig_mod.` prefix: a loader elsewhere that expects the prefix (one that "
    "loads into a compiled model) must take the keys as they are now"
)
_WHOLE_NOTE = (
    "the file holds the module itself pickled: torch.load(weights_only=False) gives back your module, not the "
    "OptimizedModule wrapper; weights_only=True (the default) still refuses a pickled module unless its classes "
    "are allowlisted (torch.serialization.safe_globals)"
)


@dataclass(frozen=True)
class _Edit:
    node: cst.CSTNode
    new: cst.CSTNode
    why: str
    notes: tuple[str, ...]


def _reads_binding(src: SourceFile, name: cst.Name, target: cst.Name) -> bool:
    return any(a.node is target for a in referents(src, name))


def _wrapper_use(src: SourceFile, target: cst.Name) -> str | None:
    """How the file uses the compiled name as an OptimizedModule (`model._orig_mod`, `isinstance(x,
    OptimizedModule)`, `type(model)`), or None."""
    if any(n.value == "OptimizedModule" for n in src.nodes_in(src.module, cst.Name)):  # code, not a docstring
        return "the file names OptimizedModule (a check for the wrapper, which model.compile() does not make)"
    for attr in src.nodes_in(src.module, cst.Attribute):
        base = attr.value
        if attr.attr.value in _WRAPPER_ATTRS and isinstance(base, cst.Name) and _reads_binding(src, base, target):
            return f"`{short(attr)}` (line {src.line_of(attr)}) reads the wrapper's own attribute"
    for call in src.nodes_in(src.module, cst.Call):
        args = call.args
        if m.matches(call.func, m.Name("type")) and len(args) == 1 and isinstance(args[0].value, cst.Name):
            if _reads_binding(src, args[0].value, target):
                return f"`{short(call)}` (line {src.line_of(call)}) looks at the wrapper's type"
    return None


def _loads_into(src: SourceFile, target: cst.Name) -> list[int]:
    """The lines that load a state dict into the compiled name (they took `_orig_mod.` keys until now)."""
    lines = []
    for call in src.nodes_in(src.module, cst.Call):
        func = call.func
        if m.matches(func, m.Attribute(value=m.Name(), attr=m.Name("load_state_dict"))):
            assert isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name)
            if _reads_binding(src, func.value, target):
                lines.append(src.line_of(call))
    return lines


def _in_place(src: SourceFile, use: CompiledUse, target: cst.Name, first: cst.Arg) -> _Edit:
    """`model = torch.compile(model, **kw)` -> `model.compile(**kw)`."""
    problem = _wrapper_use(src, target)
    if problem is not None:
        raise Refuse(f"`{target.value}` is used as the compiled wrapper: {problem}", _ADVICE)
    assert isinstance(first.value, cst.Name)
    if any(isinstance(b.node, (cst.FunctionDef, cst.ClassDef)) for b in referents(src, first.value)):
        raise Refuse(f"`{target.value}` is a function or class, not a module: it has no .compile()", _ADVICE)
    call = cst.Call(
        cst.Attribute(cst.Name(target.value), cst.Name("compile")),
        args=use.call.args[1:],
        whitespace_before_args=use.call.whitespace_before_args,
    )
    notes = [_KEYS_NOTE]
    loads = _loads_into(src, target)
    if loads:
        where = ", ".join(map(str, loads))
        notes.append(
            f"`{target.value}.load_state_dict` (line {where}) now takes keys without the prefix, as this script "
            "saves them: a checkpoint saved before this change has it (strip it with torch.nn.modules.utils."
            'consume_prefix_in_state_dict_if_present(state, "_orig_mod."))'
        )
    if use.whole:
        notes.append(_WHOLE_NOTE)
    if any(isinstance(b.node, cst.Param) for b in referents(src, first.value)):
        notes.append(f"`{target.value}` is compiled in place: the caller's module is compiled too (it was not)")
    why = (
        f"compile `{target.value}` in place with `{target.value}.compile()`: it stays the module itself, so what "
        "is saved has the module's own keys (no `_orig_mod.` prefix) and no OptimizedModule wrapper"
    )
    return _Edit(use.binding, cst.Expr(call), why, tuple(notes))


def _same_object(src: SourceFile, use: CompiledUse, model: cst.Name) -> str | None:
    """Why `model` may not be the module compiled at the save (None: it is): it is read in another scope, or is
    bound again after the compile (anywhere: in a loop a later line runs before the save too), or deleted."""
    scope = src.scopes.get(model)
    if scope is None or src.scopes.get(use.name) is not scope:
        return "the save is in another scope than the compile"
    start, end = src.line_of(use.binding), src.line_of(use.name)
    for a in scope.assignments[model.value]:
        pos = src.positions.get(a.node) if isinstance(a, Assignment) else None
        if pos is not None and pos.start.line >= start:
            return f"`{model.value}` is bound again on line {pos.start.line}, after the compile"
    for d in src.nodes_in(src.module, cst.Del):
        if model.value in {n.value for n in src.nodes_in(d, cst.Name)} and start < src.line_of(d) < end:
            return f"`{model.value}` is deleted on line {src.line_of(d)}"
    return None


def _plain_name(src: SourceFile, use: CompiledUse, model: cst.Name) -> _Edit:
    """`compiled = torch.compile(model)`: the save names `model` where it named `compiled`."""
    compiled = use.name.value
    problem = _same_object(src, use, model)
    if problem is not None:
        raise Refuse(
            f"`{model.value}` may not be the module compiled into `{compiled}` at the save: {problem}", _ADVICE
        )
    what = model.value if use.whole else f"{model.value}.state_dict()"
    why = (
        f"save `{what}`, the module `{compiled}` compiles: the same parameters, under the module's own keys "
        "(no `_orig_mod.` prefix)" + (", not the OptimizedModule wrapper" if use.whole else "")
    )
    notes = (_WHOLE_NOTE,) if use.whole else (_KEYS_NOTE,)
    return _Edit(use.name, use.name.with_changes(value=model.value), why, notes)


def _edit(src: SourceFile, use: CompiledUse) -> _Edit:
    binding = use.binding
    target = binding.targets[0].target if isinstance(binding, cst.Assign) else binding.target
    args = use.call.args
    first = args[0] if args and args[0].keyword is None and not args[0].star else None
    if first is None or not isinstance(target, cst.Name):
        raise Refuse(f"`{short(use.call)}` names no model as its first argument", _ADVICE)
    if isinstance(first.value, cst.Name) and first.value.value == target.value:
        return _in_place(src, use, target, first)
    if isinstance(first.value, cst.Name):
        return _plain_name(src, use, first.value)
    raise Refuse(
        f"the uncompiled module has no name of its own (`{short(use.call)}` on line {src.line_of(use.call)})",
        f"name it first (`model = {short(first.value)}`, then `{target.value} = torch.compile(model)`) and save "
        f"model.state_dict(); or save {target.value}._orig_mod.state_dict()",
    )


def _uses(finding: Finding, src: SourceFile) -> list[CompiledUse]:
    """The compiled models behind the finding: saved on its line (lint's finding, at the save), else, at a
    `load_state_dict` (scan's, where the run failed), every compiled model whose state_dict() the file takes."""
    stmt = src.statement_at(finding.line)
    if stmt is None:
        raise Refuse(f"line {finding.line} holds no statement", _ADVICE)
    calls = src.nodes_in(stmt, cst.Call)
    saves = [s.use for s in compiled_saves(src) if s.save in calls]
    if saves:
        return saves
    if any(src.is_qualified(c.func, "torch.save") for c in calls):
        raise Refuse("the save on this line takes no compiled model (fixed already)")
    if any(m.matches(c.func, m.Attribute(attr=m.Name("load_state_dict"))) for c in calls):
        uses = list(compiled_state_dicts(src, src.module))
        if not uses:
            raise Refuse(
                "this file takes no state_dict() of a name bound to torch.compile(...): the checkpoint was saved "
                "in another file, or through a function's parameter",
                "compile in place with model.compile() where the model is compiled (`torchmend lint` reports a "
                "save of a compiled model where it sees one), or take the prefix off here: "
                'torch.nn.modules.utils.consume_prefix_in_state_dict_if_present(state, "_orig_mod.")',
            )
        return uses
    if any(src.is_qualified(c.func, "torch.load") for c in calls):
        raise Refuse(_PICKLED, _PICKLED_ADVICE)
    raise Refuse(f"line {finding.line} neither saves nor loads a compiled model's checkpoint", _ADVICE)


class CompiledSave(Codemod):
    """Save the module itself, not torch.compile's wrapper of it.

    What it does:
        TM107: a checkpoint taken from a compiled model. scan reports it where the run fails loading it back
        (unexpected `_orig_mod.` keys in `load_state_dict`, or `torch.load(weights_only=True)` refusing the
        OptimizedModule); lint at the `torch.save` of a name bound to `torch.compile(...)` or of its
        `state_dict()` (a checkpoint dict holding it too), since the script that loads it is often another.

    Why is this bad:
        `torch.compile(model)` returns an OptimizedModule wrapping the model: its `state_dict()` has every key
        prefixed with `_orig_mod.`, so a fresh uncompiled module rejects it, and `torch.save` of the wrapper
        pickles the OptimizedModule. The run dies after training, and every tool that reads the checkpoint has
        to know about the wrapper.

    Example:
        model = torch.compile(model)
        torch.save(model.state_dict(), path)

    Fix:
        model.compile()
        torch.save(model.state_dict(), path)

        `model = torch.compile(model, **kw)` (the compile rebinds the module's own name) becomes
        `model.compile(**kw)`, nn.Module's in-place compile: `model` stays the module, so the script's own saves
        and its own `load_state_dict` into `model` both use the module's keys. Not when the file uses the name as
        the wrapper (`model._orig_mod`, `model.forward(...)`, `type(model)`, a check for OptimizedModule). Where
        the compiled model has a name of its own (`compiled = torch.compile(model)`), the save names the module:
        `compiled.state_dict()` becomes `model.state_dict()`, `torch.save(compiled, ...)` becomes
        `torch.save(model, ...)`, when `model` is still the same module at the save. A module saved whole is then
        pickled as itself: `torch.load(weights_only=False)` gives back your module (it runs uncompiled: compile
        it again), and `torch.load(weights_only=True)`, the default, still refuses it, as it refuses any pickled
        module whose classes are not allowlisted (torch 2.13): a scan finding at such a load is left to you (save
        the state_dict() and load it into a fresh module). A checkpoint saved already loads into the plain module
        once its keys lose the prefix: torch.nn.modules.utils.consume_prefix_in_state_dict_if_present(state,
        "_orig_mod.").

    Fix safety:
        Unsafe: the checkpoint's keys change (they lose `_orig_mod.`), which is the fix for a loader into the plain
        module and breaks a loader elsewhere that expects the prefix: one that loads into a compiled model, or
        a resume from a checkpoint saved before the change (its keys still have the prefix). The parameters and
        the training are the same; `model.compile()` also compiles the module for every other name it has (a
        caller's). The re-run checks that the script now runs to its end with the same numbers.
    """

    rules = ("TM107",)
    name = "save-plain-module"
    INVALID = (
        Invalid(
            """
            import torch
            from torch import nn

            model = nn.Linear(4, 1)
            model = torch.compile(model)
            model(torch.randn(2, 4)).sum().backward()
            torch.save(model.state_dict(), "model.pt")  # tm: TM107
            """,
            """
            import torch
            from torch import nn

            model = nn.Linear(4, 1)
            model.compile()
            model(torch.randn(2, 4)).sum().backward()
            torch.save(model.state_dict(), "model.pt")  # tm: TM107
            """,
        ),
        # scan's finding, where the run failed: the fresh module's load_state_dict; the compile keeps its options
        Invalid(
            """
            import torch
            from torch import nn

            def main():
                model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
                model = torch.compile(model, mode="max-autotune", dynamic=False)
                model(torch.randn(2, 4)).sum().backward()
                torch.save({"model": model.state_dict(), "step": 1}, "ckpt.pt")
                fresh = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
                fresh.load_state_dict(torch.load("ckpt.pt")["model"])  # tm: TM107
            """,
            """
            import torch
            from torch import nn

            def main():
                model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
                model.compile(mode="max-autotune", dynamic=False)
                model(torch.randn(2, 4)).sum().backward()
                torch.save({"model": model.state_dict(), "step": 1}, "ckpt.pt")
                fresh = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
                fresh.load_state_dict(torch.load("ckpt.pt")["model"])  # tm: TM107
            """,
        ),
        # the compiled model has a name of its own: save the module it compiles
        Invalid(
            """
            import torch
            from torch import nn

            model = nn.Linear(4, 1)
            fast = torch.compile(model)
            fast(torch.randn(2, 4)).sum().backward()
            torch.save(fast.state_dict(), "model.pt")  # tm: TM107
            torch.save(fast, "whole.pt")  # tm: TM107
            """,
            """
            import torch
            from torch import nn

            model = nn.Linear(4, 1)
            fast = torch.compile(model)
            fast(torch.randn(2, 4)).sum().backward()
            torch.save(model.state_dict(), "model.pt")  # tm: TM107
            torch.save(model, "whole.pt")  # tm: TM107
            """,
        ),
    )
    VALID = (
        # the wrapper's own attribute is read: model.compile() would not make it
        Valid(
            """
            import torch
            from torch import nn

            model = nn.Linear(4, 1)
            model = torch.compile(model)
            torch.save(model.state_dict(), "model.pt")  # tm: TM107
            raw = model._orig_mod
            """,
        ),
        # the module has no name of its own
        Valid(
            """
            import torch
            from torch import nn

            model = torch.compile(nn.Linear(4, 1))
            torch.save(model.state_dict(), "model.pt")  # tm: TM107
            """,
        ),
        # `model` is another module by the time `fast` is saved
        Valid(
            """
            import torch
            from torch import nn

            model = nn.Linear(4, 1)
            fast = torch.compile(model)
            model = nn.Linear(4, 1)
            torch.save(fast.state_dict(), "model.pt")  # tm: TM107
            """,
        ),
        # scan's finding at a weights_only load of the whole model: compiling in place would not make it load
        Valid(
            """
            import torch
            from torch import nn

            model = nn.Linear(4, 1)
            model = torch.compile(model)
            torch.save(model, "model.pt")
            restored = torch.load("model.pt", weights_only=True)  # tm: TM107
            """,
        ),
    )

    def propose(self, finding: Finding, ctx: Context) -> Result:
        if finding.where != Where.PROJECT:
            return NoFix(finding, f"the checkpoint is taken in {finding.file}, outside your project", _ADVICE)
        src = ctx.file(finding.path)
        try:
            edits: dict[cst.CSTNode, _Edit] = {}
            for use in _uses(finding, src):
                edit = _edit(src, use)
                edits.setdefault(edit.node, edit)
        except Refuse as e:
            return NoFix(finding, e.reason, e.advice)
        chosen = list(edits.values())
        notes = tuple(dict.fromkeys(n for e in chosen for n in e.notes))
        return Proposal(
            (finding,),
            finding.rule,
            src.path,
            replace={e.node: e.new for e in chosen},
            safety=UNSAFE,
            why="; ".join(dict.fromkeys(e.why for e in chosen)),
            note="; ".join(notes),
            alternative=_ADVICE,
        )
