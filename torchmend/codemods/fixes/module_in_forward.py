"""Parameters and modules built while forward runs (TM199 by GB id: GB0264, GB0119, GB0228): run the method that
builds them eagerly, or let dynamo trace a bare `nn.Parameter(...)`."""

from __future__ import annotations

from dataclasses import replace

import libcst as cst

from torchmend import rules
from torchmend.analysis.calls import callee, is_compiled
from torchmend.analysis.dynamo_config import has_switch
from torchmend.analysis.entry import compile_site_for
from torchmend.analysis.names import method_of
from torchmend.analysis.source import Context, SourceFile
from torchmend.codemods.base import SAFE, UNSAFE, Codemod, Invalid, NoFix, Proposal, Result, Valid
from torchmend.codemods.dynamo_config import setting
from torchmend.codemods.fixes.host_random import disabled
from torchmend.model import Finding, Location, Where

# The methods torch.compile enters a module through: disabling one of them runs the whole module eagerly.
ENTRY_METHODS = ("forward", "__call__")
PARAM_CTOR = "graph_break_on_nn_param_ctor"
_MAX_DEPTH = 6  # constructions followed through other __init__s, callers followed upward


def _advice(finding: Finding) -> str:
    return rules.gb_advice(finding.gb_id, finding.function) or rules.BY_CODE["TM199"].advice


def _project_frame(finding: Finding, ctx: Context) -> Location | None:
    """The finding's own line when it is in the project, else the project frame that reached the library."""
    if finding.where == Where.PROJECT:
        return Location(
            file=finding.file, line=finding.line, function=finding.function, path=finding.path, code=finding.code
        )
    frame = finding.user_frame
    return frame if frame is not None and ctx.in_project(frame.path) else None


def _called_name(call: cst.Call) -> str | None:
    if isinstance(call.func, cst.Name):
        return call.func.value
    if isinstance(call.func, cst.Attribute):
        return call.func.attr.value
    return None


def _family(src: SourceFile, cls: cst.ClassDef) -> set[str]:
    """The class's name and the names of the classes of this file that derive from it, at any depth."""
    names = {cls.name.value}
    classes = src.nodes_in(src.module, cst.ClassDef)
    grew = True
    while grew:
        grew = False
        for c in classes:
            bases = {b.value.value if isinstance(b.value, cst.Name) else None for b in c.bases}
            bases |= {b.value.attr.value for b in c.bases if isinstance(b.value, cst.Attribute)}
            if c.name.value not in names and bases & names:
                names.add(c.name.value)
                grew = True
    return names


def _builders(src: SourceFile, fn: cst.FunctionDef, depth: int = 0) -> list[cst.FunctionDef]:
    """The functions of the file, other than an `__init__`, in which what `fn` makes is built: `fn` itself, or for
    a class's `__init__` the functions that construct that class (or a subclass of it), followed through the
    `__init__`s of other classes that construct it."""
    if fn.name.value != "__init__":
        return [fn]
    cls = src.enclosing(fn, cst.ClassDef)
    if cls is None or depth > _MAX_DEPTH:
        return []
    names = _family(src, cls)
    found: list[cst.FunctionDef] = []
    for call in src.nodes_in(src.module, cst.Call):
        if _called_name(call) not in names:
            continue
        outer = src.enclosing(call, cst.FunctionDef)
        if outer is None:
            continue  # built at module level: not while forward runs
        for b in _builders(src, outer, depth + 1):
            if b not in found:
                found.append(b)
    return found


def _is_entry(src: SourceFile, fn: cst.FunctionDef) -> bool:
    """A function torch.compile enters: a module's forward / __call__, or a function this file compiles."""
    return (src.enclosing(fn, cst.ClassDef) is not None and fn.name.value in ENTRY_METHODS) or is_compiled(src, fn)


def _resolve(src: SourceFile, call: cst.Call, caller: cst.FunctionDef, ctx: Context) -> cst.FunctionDef | None:
    """The def of this file that `call` (in `caller`) runs: through the analysis, else `self.<name>` in the
    caller's class and its bases."""
    found = callee(src, call.func, ctx)
    if found is not None and found.src is src:
        return found.fn
    func = call.func
    cls = src.enclosing(caller, cst.ClassDef)
    if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self" and cls:
        return method_of(src, cls, func.attr.value)
    return None


def reached_from_forward(src: SourceFile, builder: cst.FunctionDef, ctx: Context) -> list[cst.FunctionDef]:
    """The defs that a compiled function (a forward) calls and through which `builder` is reached: callers are
    followed by the called name in this file (calls from an `__init__` are construction, not forward, and are not
    followed); a call from a forward counts when the def it runs is on that way."""
    chain: list[cst.FunctionDef] = []
    from_entry: list[tuple[cst.Call, cst.FunctionDef, cst.FunctionDef]] = []
    todo = [(builder, 0)]
    while todo:
        fn, depth = todo.pop(0)
        if fn in chain or depth > _MAX_DEPTH:
            continue
        chain.append(fn)
        for call in src.nodes_in(src.module, cst.Call):
            caller = src.enclosing(call, cst.FunctionDef) if _called_name(call) == fn.name.value else None
            if caller is None or caller is fn or caller.name.value == "__init__":
                continue
            if _is_entry(src, caller):
                from_entry.append((call, caller, fn))
            else:
                todo.append((caller, depth + 1))
    entries: list[cst.FunctionDef] = []
    for call, caller, fn in from_entry:
        target = _resolve(src, call, caller, ctx) or fn  # `self.encoder.use(...)` unresolved: the def of that name
        if target in chain and target not in entries:
            entries.append(target)
    return entries


def _qualname(src: SourceFile, fn: cst.FunctionDef) -> str:
    cls = src.enclosing(fn, cst.ClassDef)
    return f"{cls.name.value}.{fn.name.value}" if cls is not None else fn.name.value


class EagerModuleBuilder(Codemod):
    """Run the method that builds modules (or parameters) inside forward eagerly: `@torch.compiler.disable`.

    What it does:
        TM199 (a graph break of no other rule), dispatched on PyTorch's ids for a parameter or module built while
        compiled code runs: GB0264 (the `torch.nn.Parameter()` constructor, reached from an `nn.Linear` or any
        module's `__init__`; GB0228 in its place when `graph_break_on_nn_param_ctor` is already off) and GB0119 (an
        uninitialized nn.Module). The usual shape is a one-time reconfiguration
        in forward: a model switches its attention implementation when the input is too short for it
        (`if self.attention_type == "block_sparse" and seq_len <= limit: self.set_attention_type("original_full")`),
        and the switch walks the layers and builds a new attention module in each. The method that forward calls
        and that leads to the construction (found by following its callers by name in the file, up to a forward or
        a compiled function) gets `@torch.compiler.disable`; if that is refused, the method that constructs the
        module. A bare `nn.Parameter(...)` (made lazily in forward, or by a method forward calls that rebuilds a
        table) gets `torch._dynamo.config.graph_break_on_nn_param_ctor = False` before the compile call first: dynamo
        then traces the constructor (it cannot when the parameter is made inside a module's `__init__`), which
        removes every break; the decorator, when a method is found, is its fallback, and `fix --yes` without
        --unsafe-fixes applies the decorator in its place. A submodule cast
        in forward (`self.m = self.m.to(dtype)`, GB0264 in `Module._apply`) is left with its advice: the setting
        trades its break for a recompile.

    Why is this bad:
        Dynamo cannot construct a module while tracing: every `nn.Parameter` of the new module breaks the graph
        (the fixture's two-block encoder: 5 of its 6 breaks, on torch 2.13), and GB0119 breaks again at the
        module's class. All of it runs once, but the model's first call is cut into many graphs.

    Example:
        class Encoder(nn.Module):
            def use(self, kind):
                for block in self.blocks:
                    block.use(kind)  # builds a new attention module per block: TM199, GB0264 and GB0119

            def forward(self, h):
                if self.kind == "window" and h.shape[1] <= 2 * self.window:
                    self.use("full")
                ...

    Fix:
        class Encoder(nn.Module):
            @torch.compiler.disable
            def use(self, kind):
                for block in self.blocks:
                    block.use(kind)

    Fix safety:
        Safe for the decorator: the method runs as it does eagerly (the modules are built by the same code, from the
        same random stream, in the same order), and outside compiled code the decorator changes nothing. One graph
        break stays at the call in forward, on the calls that take the branch (TM105, GB0099), and the guard on the
        switched attribute fails once afterwards (a one-time recompile). Unsafe for the config line: dynamo then
        makes the parameter a graph input that the compiled code fills (what PyTorch calls unclear semantics,
        pytorch#157452), for everything compiled after the line; verify compares the losses and weights.
    """

    gb_ids = ("GB0264", "GB0119", "GB0228")
    name = "eager-module-builder"
    INVALID = (
        Invalid(
            """
            import torch
            from torch import nn


            class Attention(nn.Module):
                def __init__(self, width):
                    super().__init__()  # tm: TM199 gb_id=GB0119 function=__init__
                    self.q = nn.Linear(width, width)  # tm: TM199 gb_id=GB0264 where=library function=__init__


            class Block(nn.Module):
                def use(self, kind):
                    fresh = Attention(self.width)
                    fresh.q = self.attn.q
                    self.attn = fresh


            class Encoder(nn.Module):
                def use(self, kind):
                    for block in self.blocks:
                        block.use(kind)

                def forward(self, h):
                    if self.kind == "window" and h.shape[1] <= 16:
                        self.use("full")
                    return self.blocks[0](h)
            """,
            """
            import torch
            from torch import nn


            class Attention(nn.Module):
                def __init__(self, width):
                    super().__init__()  # tm: TM199 gb_id=GB0119 function=__init__
                    self.q = nn.Linear(width, width)  # tm: TM199 gb_id=GB0264 where=library function=__init__


            class Block(nn.Module):
                def use(self, kind):
                    fresh = Attention(self.width)
                    fresh.q = self.attn.q
                    self.attn = fresh


            class Encoder(nn.Module):
                @torch.compiler.disable
                def use(self, kind):
                    for block in self.blocks:
                        block.use(kind)

                def forward(self, h):
                    if self.kind == "window" and h.shape[1] <= 16:
                        self.use("full")
                    return self.blocks[0](h)
            """,
        ),
        # a parameter made lazily in forward: dynamo may trace the constructor once the config allows it
        Invalid(
            """
            import torch
            from torch import nn


            class Head(nn.Module):
                def forward(self, x):
                    if self.w is None:
                        self.w = nn.Parameter(torch.zeros(x.shape[-1], 4))  # tm: TM199 gb_id=GB0264
                    return x @ self.w


            model = torch.compile(Head())
            """,
            """
            import torch
            from torch import nn


            class Head(nn.Module):
                def forward(self, x):
                    if self.w is None:
                        self.w = nn.Parameter(torch.zeros(x.shape[-1], 4))  # tm: TM199 gb_id=GB0264
                    return x @ self.w


            torch._dynamo.config.graph_break_on_nn_param_ctor = False
            model = torch.compile(Head())
            """,
        ),
    )
    VALID = (
        # the module is built in forward itself: disabling forward would run the whole model eagerly
        Valid(
            """
            import torch
            from torch import nn


            class Bias(nn.Module):
                def __init__(self, n):
                    super().__init__()  # tm: TM199 gb_id=GB0119 function=__init__


            class Net(nn.Module):
                def forward(self, x):
                    if self.grow:
                        self.bias = Bias(x.shape[-1])
                    return x
            """,
        ),
    )

    def propose(self, finding: Finding, ctx: Context) -> Result:
        if finding.function == "_apply":
            return NoFix(
                finding,
                "a submodule cast in forward (nn.Module._apply builds the new parameter): turning "
                f"`{PARAM_CTOR}` off trades the break for a recompile when the dtype changes (torch 2.13: 1 break -> 1 "
                "recompile), and on torch 2.13 and later a cast that changes nothing does not break",
                _advice(finding),
            )
        # a bare nn.Parameter(...) (not made by a module's __init__): the config line where no builder method is found
        bare = finding.gb_id == "GB0264" and finding.function != "__init__"
        frame = _project_frame(finding, ctx)
        if frame is None:
            if bare:
                return self._config(finding, ctx)
            return NoFix(
                finding,
                f"no source-level fix for TM199 (PyTorch's {finding.gb_id}): the module is built outside your project",
                _advice(finding),
            )
        src = ctx.file(frame.path)
        fn = src.function_at(frame.line)
        if fn is None:
            if bare:
                return self._config(finding, ctx)
            return NoFix(finding, f"line {frame.line} of {frame.file} is not inside a function", _advice(finding))
        builders = _builders(src, fn)
        in_entry = [b for b in builders if _is_entry(src, b)]
        reached = {id(b): reached_from_forward(src, b, ctx) for b in builders if b not in in_entry}
        entries = [e for b in builders for e in reached.get(id(b), [])]
        entries = [e for i, e in enumerate(entries) if e not in entries[:i]]
        if not entries and bare:
            return self._config(finding, ctx)
        if not entries and in_entry:
            names = ", ".join(f"`{_qualname(src, b)}`" for b in in_entry)
            return NoFix(
                finding,
                f"the module is built in {names}, a function torch.compile compiles: disabling it would run the "
                "whole compiled code eagerly",
                _advice(finding),
            )
        if not entries:
            return NoFix(
                finding,
                f"no forward of {frame.file} reaches where the module is built"
                + (f" ({', '.join(f'`{_qualname(src, b)}`' for b in builders)})" if builders else ""),
                _advice(finding),
            )
        if any(disabled(src, e) for e in entries):
            return NoFix(finding, f"`{_qualname(src, entries[0])}` is already disabled for torch.compile", skipped=True)
        inner = [b for b in builders if reached.get(id(b)) and b not in entries and not disabled(src, b)]
        candidates = [self._disable(finding, src, entries)] + ([self._disable(finding, src, inner)] if inner else [])
        if bare:  # dynamo can trace this constructor: the config line removes every break, the decorator all but one
            config = self._config(finding, ctx)
            if isinstance(config, NoFix) and config.skipped:
                return config  # the file turns the switch off already
            if isinstance(config, Proposal):
                candidates.insert(0, config)
        return replace(candidates[0], fallbacks=tuple(candidates[1:]))

    def _disable(self, finding: Finding, src: SourceFile, fns: list[cst.FunctionDef]) -> Proposal:
        disable, imports = src.torch_expr("compiler.disable")
        names = ", ".join(f"`{_qualname(src, f)}`" for f in fns)
        return Proposal(
            (finding,),
            finding.rule,
            src.path,
            replace={f: f.with_changes(decorators=[*f.decorators, cst.Decorator(disable)]) for f in fns},
            imports=imports,
            safety=SAFE,
            shape="disable-module-builder",
            why=f"run {names} eagerly (torch.compiler.disable): it builds modules (new nn.Parameters) while forward "
            "runs, which dynamo cannot trace, one graph break per parameter; now one break at its call",
            note="the modules are built as without compile; one graph break stays where forward calls it, on the "
            "calls that take that path, and a guard on what it switched fails once afterwards (one recompile)",
            alternative="choose that configuration before torch.compile (call the method once on the model, or set "
            "the config value that selects it), so that forward finds the modules built",
        )

    def _config(self, finding: Finding, ctx: Context) -> Result:
        site = compile_site_for(finding, ctx)
        if isinstance(site, str):
            return NoFix(finding, f"PyTorch's {finding.gb_id}, a bare nn.Parameter(...): {site}", _advice(finding))
        if has_switch(site.src, PARAM_CTOR):
            return NoFix(finding, f"{site.src.path} already sets `torch._dynamo.config.{PARAM_CTOR}`", skipped=True)
        return setting(
            (finding,),
            site,
            PARAM_CTOR,
            "False",
            why="let dynamo trace the `nn.Parameter(...)` constructor (`torch._dynamo.config."
            f"{PARAM_CTOR} = False` before compiling), so building or casting a parameter in forward does not "
            "break the graph",
            note="the setting holds for everything compiled after this line: a parameter made in compiled code "
            "becomes a graph input the graph fills; it does not help a parameter made inside a module's __init__ "
            "(dynamo never builds those)",
            safety=UNSAFE,
        )
