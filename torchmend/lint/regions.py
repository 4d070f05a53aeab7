"""The compiled region, as the source shows it: the functions a file compiles (`@torch.compile`, `torch.compile(f)`,
`torch.compile(model)`, `model.compile()`), and every def they call that the shared analysis can name
(codemods/analysis: `callee`, `loop_element_callee`), followed across the project's files. Calls behind an
`is_compiling()` gate are not followed (dynamo never traces them); a def torch.compile is told to skip
(`torch.compiler.disable`) is recorded as such and not entered."""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst
import libcst.matchers as m

from torchmend.codemods.analysis import callee, compile_target, instance_class, is_method, method_of
from torchmend.codemods.analysis.calls import Callee, loop_element_callee
from torchmend.codemods.analysis.entry import compile_sites
from torchmend.codemods.gating import already_gated
from torchmend.codemods.source import Context, SourceFile
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


def _module_forward(src: SourceFile, obj: cst.BaseExpression, ctx: Context) -> Callee | None:
    owner = instance_class(src, obj, ctx)
    if owner is None:
        return None
    fn = method_of(owner[0], owner[1], "forward")
    return Callee(fn, owner[0], bound=True, owner=owner[1]) if fn is not None else None


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
            hit = _module_forward(src, node.func.value, ctx)
        else:
            if isinstance(target, cst.Attribute) and m.matches(target.attr, m.Name("step")):
                region.steps.append(CompiledStep(src, node, target.value))
            hit = callee(src, target, ctx) or _module_forward(src, target, ctx)
        if hit is not None:
            found.append(Reached(hit.fn, hit.src, node, src, bound=hit.bound))
    return found


def _resolve(src: SourceFile, call: cst.Call, ctx: Context) -> Callee | None:
    found = callee(src, call.func, ctx)
    if found is None and isinstance(call.func, cst.Name):
        found = loop_element_callee(src, call.func, ctx)  # for block in self.blocks: block(x)
    return found


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
    for r in queue:
        seen.add(id(r.fn))
    region.functions.extend(queue)
    while queue and len(region.functions) < MAX_FUNCTIONS:
        here = queue.pop(0)
        for call in calls_in(here.fn):
            if already_gated(here.src, call) or compile_gated(here.src, call):
                continue
            found = _resolve(here.src, call, ctx)
            if found is None or constant(found):
                continue
            if disabled(found):
                region.disabled.append(DisabledCall(here.src, call, found, here))
                continue
            if id(found.fn) in seen:
                continue
            seen.add(id(found.fn))
            test = setting(here.src, call)
            when = here.setting or (" ".join(here.src.code(test).split()) if test is not None else None)
            reached = Reached(found.fn, found.src, here.site, here.site_src, here.root, found.bound, when)
            region.functions.append(reached)
            queue.append(reached)
    return region
