"""The compiled region, as the source shows it: the functions a file compiles (`@torch.compile`, `torch.compile(f)`,
`torch.compile(model)`, `model.compile()`), and every def they call that the shared analysis can name
(analysis: `candidate_callees`, `loop_element_callee`), followed across the project's files; an object
that may be of several classes (`model = A() if c else B()`) has the forward of each followed. Calls behind an
`is_compiling()` gate are not followed (dynamo never traces them); a def torch.compile is told to skip
(`torch.compiler.disable`) is recorded as such and not entered."""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from torchmend.analysis import (
    candidate_callees,
    compile_target,
    is_method,
    module_forwards,
    self_attr_values,
)
from torchmend.analysis import match as m
from torchmend.analysis.calls import Callee
from torchmend.analysis.containers import container_forwards, loop_element_callee
from torchmend.analysis.entry import compile_sites
from torchmend.analysis.gating import already_gated
from torchmend.analysis.names import def_named, module_files
from torchmend.analysis.source import Context, SourceError, SourceFile
from torchmend.lint.defaults import by_default
from torchmend.lint.gates import compile_gated, setting

_DISABLE = {"torch.compiler.disable", "torch._dynamo.disable", "torch._disable_dynamo"}
MAX_FUNCTIONS = 400  # per compiled entry: a bound on the walk, not a limit real code reaches


@dataclass(frozen=True, eq=False)
class Reached:
    """A def that runs inside compiled code; `entry` is the compiled def it was reached from (itself for an
    entry), `site` the compile (decorator, `torch.compile(...)` or `.compile()` call) in `site_src`."""

    fn: cst.FunctionDef
    src: SourceFile
    site: cst.CSTNode
    site_src: SourceFile
    entry: Reached | None = None
    bound: bool = False  # a method reached through its instance: its first parameter is the object
    setting: str | None = None  # reached only under a test of a setting (`self.config.mask_time_prob > 0`)
    via: list[tuple[SourceFile, cst.Call]] = field(default_factory=list)  # the calls of the region that run it

    @property
    def root(self) -> Reached:
        return self.entry or self


@dataclass(frozen=True, eq=False)
class CompiledStep:
    """`torch.compile(opt.step)`: an optimizer's step compiled, whoever defines the optimizer class."""

    src: SourceFile
    call: cst.Call  # the torch.compile(...) call
    receiver: cst.BaseExpression  # `opt`


@dataclass(frozen=True, eq=False)
class DisabledCall:
    """A call, inside compiled code, of a def that torch.compile skips."""

    src: SourceFile
    call: cst.Call
    callee: Callee
    caller: Reached


@dataclass
class Region:
    functions: list[Reached] = field(default_factory=list)
    steps: list[CompiledStep] = field(default_factory=list)
    disabled: list[DisabledCall] = field(default_factory=list)


def calls_in(fn: cst.FunctionDef) -> list[cst.Call]:
    """The calls in a def's own body, in source order (not those of defs, classes or lambdas nested in it:
    a nested def runs only when called, and is then followed as a callee)."""
    found: list[cst.Call] = []

    class _Calls(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            found.append(node)

        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return False

        def visit_ClassDef(self, node: cst.ClassDef) -> bool:
            return False

        def visit_Lambda(self, node: cst.Lambda) -> bool:
            return False

    for stmt in fn.body.body if isinstance(fn.body, cst.IndentedBlock) else [fn.body]:
        stmt.visit(_Calls())
    return found


def _entries(src: SourceFile, ctx: Context, region: Region) -> list[Reached]:
    found: list[Reached] = []
    for site in compile_sites(src):
        node = site.node
        if isinstance(node, cst.Decorator):
            if isinstance(site.statement, cst.FunctionDef):
                fn = site.statement
                found.append(Reached(fn, src, node, src, bound=is_method(src, fn)))
            continue
        if not isinstance(node, cst.Call):
            continue
        target = compile_target(src, node)
        if target is None:  # model.compile(): nn.Module.compile, in place
            if not isinstance(node.func, cst.Attribute):
                continue
            hits = module_forwards(src, node.func.value, ctx)
        else:
            if isinstance(target, cst.Attribute) and m.matches(target.attr, m.Name("step")):
                region.steps.append(CompiledStep(src, node, target.value))
            hits = candidate_callees(src, target, ctx) or container_forwards(src, target, ctx)
        if target is None and not hits and isinstance(node.func, cst.Attribute):  # `seq = nn.Sequential(...)`
            hits = container_forwards(src, node.func.value, ctx)  # then `seq.compile()`
        # `model = A() if c else B(); torch.compile(model)`: each class's forward is compiled in some run
        found += [Reached(hit.fn, hit.src, node, src, bound=hit.bound) for hit in hits]
    return found


def _resolve(src: SourceFile, call: cst.Call, ctx: Context) -> list[Callee]:
    """The defs the call may run: one, or one per class its object may hold (`self.enc = A() if c else B()`)."""
    found = candidate_callees(src, call.func, ctx)
    if not found and isinstance(call.func, cst.Name):
        loop = loop_element_callee(src, call.func, ctx)  # for block in self.blocks: block(x)
        found = [loop] if loop is not None else []
    if not found and isinstance(call.func, cst.Name):  # for block in self.blocks (of several classes): block(x)
        refs = src.referents(call.func)
        holder = src.parents.get(refs[0]) if len(refs) == 1 else None
        if isinstance(holder, cst.For) and holder.target is refs[0]:
            found = container_forwards(src, holder.iter, ctx)
    if not found:  # self.net(x), self.heads["a"](x), with `self.net = nn.Sequential(...)`
        found = container_forwards(src, call.func, ctx)
    return found


def _built_when(src: SourceFile, call: cst.Call, found: Callee) -> str | None:
    """The setting under which `self.encoder` holds `found`'s class, when the default configuration builds another
    one: `self.encoder = A(config) if config.do_stable_layer_norm else B(config)`, or the same as an if/else in
    `__init__` (defaults.py reads the config's default). None when the default builds this class, or when it is
    not known."""
    func = call.func
    if found.owner is None or not (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name)):
        return None
    mine = found.owner.name.value
    for value in self_attr_values(src, func):
        if isinstance(value, cst.IfExp):
            default = by_default(src, value.test)
            arms = [(value.body, True), (value.orelse, False)]
            for arm, holds in arms:
                if _builds(src, arm, mine) and default is not None and default is not holds:
                    return " ".join(src.code(value.test).split())
        elif _builds(src, value, mine):
            test = setting(src, value)
            if test is not None and by_default(src, test) is None and _per_instance(src, test):
                continue  # `if not self.is_sparse:` of a flag the parent gives each layer: both classes are built
            if test is not None:
                return " ".join(src.code(test).split())
    return None


def _per_instance(src: SourceFile, test: cst.BaseExpression) -> bool:
    """A test in `__init__` of what the code building the module passes it, not of a configuration: every name it
    reads is a parameter of that `__init__` other than a config (`is_sparse`, `layer_idx`), directly or through
    the attribute `__init__` stores it in (`self.is_sparse = is_sparse`). A parent that builds one per layer gives
    each its own value (Switch Transformers' `is_sparse` from the layer index), so both arms are built."""
    fn = src.enclosing(test, cst.FunctionDef)
    if not isinstance(fn, cst.FunctionDef) or fn.name.value != "__init__":
        return False
    params = {p.name.value for p in fn.params.params} - {"self", "config"}
    read: list[str] = []
    for node in src.nodes_in(test, (cst.Attribute, cst.Name)):
        if isinstance(node, cst.Attribute) and m.matches(node.value, m.Name("self")):
            stored = self_attr_values(src, node)
            if not stored or not all(isinstance(v, cst.Name) and v.value in params for v in stored):
                return False
            read.append(node.attr.value)
        elif isinstance(node, cst.Name) and not isinstance(src.parents.get(node), cst.Attribute):
            if node.value in ("True", "False", "None"):
                continue
            if node.value not in params:
                return False
            read.append(node.value)
    return bool(read)


def forward_replaced(found: Callee, ctx: Context) -> str | None:
    """`@use_experts_implementation class Experts(nn.Module)`: a class decorator whose def assigns the class's
    `forward` (`cls.forward = ...`) may run another implementation than the one the class defines, chosen by a
    setting lint cannot read; the decorator's name, or None."""
    owner = found.owner
    if owner is None or found.fn.name.value != "forward":
        return None
    for dec in owner.decorators:
        target = dec.decorator.func if isinstance(dec.decorator, cst.Call) else dec.decorator
        defs = [(hit.src, hit.fn) for hit in candidate_callees(found.src, target, ctx)]
        if not defs and isinstance(target, cst.Name):
            defs = _reexported(found.src, target.value, ctx)
        if any(
            m.matches(t.target, m.Attribute(attr=m.Name("forward")))
            for dsrc, fn in defs
            for a in dsrc.nodes_in(fn, cst.Assign)
            for t in a.targets
        ):
            return " ".join(found.src.code(target).split())
    return None


def _reexported(src: SourceFile, name: str, ctx: Context) -> list[tuple[SourceFile, cst.FunctionDef]]:
    """The def `from pkg import name` reaches through a package `__init__` that re-exports it under
    `if TYPE_CHECKING:` (a lazily imported package: transformers' `integrations`)."""
    found = []
    for imp in src.nodes_in(src.module, cst.ImportFrom):
        if isinstance(imp.names, cst.ImportStar) or not any(
            isinstance(a.name, cst.Name) and a.name.value == name for a in imp.names
        ):
            continue
        for path in module_files(src, ctx, imp):
            try:
                init = ctx.file(path)
            except SourceError:
                continue
            for inner in init.nodes_in(init.module, cst.ImportFrom):
                if isinstance(inner.names, cst.ImportStar) or not any(
                    isinstance(a.name, cst.Name) and a.name.value == name for a in inner.names
                ):
                    continue
                for other in module_files(init, ctx, inner):
                    try:
                        hit = def_named(ctx.file(other), name, None)
                    except SourceError:
                        continue
                    if hit is not None:
                        found.append(hit)
    return found


def _builds(src: SourceFile, value: cst.BaseExpression, name: str) -> bool:
    return isinstance(value, cst.Call) and src.code(value.func).rsplit(".", 1)[-1] == name


def constant(found: Callee) -> bool:
    """A def whose result dynamo takes as a constant or from a cache (`@lru_cache`, `@functools.cache`,
    `assume_constant_result` under any name): its body does not run in the graph."""
    for dec in found.fn.decorators:
        target = dec.decorator.func if isinstance(dec.decorator, cst.Call) else dec.decorator
        name = found.src.code(target).rsplit(".", 1)[-1]
        if "cache" in name or "constant" in name:
            return True
    return False


def disabled(found: Callee) -> bool:
    """A def wrapped in torch.compiler.disable (or torch._dynamo.disable): dynamo calls it without tracing."""
    for dec in found.fn.decorators:
        target = dec.decorator.func if isinstance(dec.decorator, cst.Call) else dec.decorator
        if found.src.is_qualified(target, *_DISABLE):
            return True
    return False


def compiled_region(src: SourceFile, ctx: Context) -> Region:
    """What the file `src` compiles, and everything that code calls that the source lets lint name."""
    region = Region()
    queue = _entries(src, ctx, region)
    seen: set[int] = set()
    reached: dict[int, Reached] = {}
    for r in queue:
        seen.add(id(r.fn))
        reached.setdefault(id(r.fn), r)
    region.functions.extend(queue)
    while queue and len(region.functions) < MAX_FUNCTIONS:
        here = queue.pop(0)
        for call in calls_in(here.fn):
            if already_gated(here.src, call) or compile_gated(here.src, call):
                continue
            for found in _resolve(here.src, call, ctx):
                if constant(found):
                    continue
                if disabled(found):
                    region.disabled.append(DisabledCall(here.src, call, found, here))
                    continue
                if id(found.fn) in seen:
                    if id(found.fn) in reached:
                        reached[id(found.fn)].via.append((here.src, call))
                    continue
                seen.add(id(found.fn))
                test = setting(here.src, call)
                when = here.setting or (" ".join(here.src.code(test).split()) if test is not None else None)
                when = when or _built_when(here.src, call, found)
                replaced = forward_replaced(found, ctx)
                when = when or (f"@{replaced} keeps this forward" if replaced else None)
                hit = Reached(
                    found.fn, found.src, here.site, here.site_src, here.root, found.bound, when, [(here.src, call)]
                )
                reached[id(found.fn)] = hit
                region.functions.append(hit)
                queue.append(hit)
    return region
