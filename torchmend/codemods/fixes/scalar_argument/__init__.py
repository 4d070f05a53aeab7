"""Pass a changing Python number to a compiled function as a tensor, at its call sites (TM202).

The package: sites.py finds the calls of the compiled function and the argument behind the parameter
(bound as Python binds it); device.py picks the device of the new tensor from what the number meets.
"""

from __future__ import annotations

import libcst as cst

from torchmend.analysis import (
    NUMBERS,
    functions_for,
    is_method,
    is_tensor_construction,
    python_use,
    reads,
    self_name,
    values,
)
from torchmend.analysis.binding import packed_key
from torchmend.analysis.source import Context, SourceFile
from torchmend.codemods.base import UNSAFE, Answer, Codemod, Delegate, Invalid, NoFix, Proposal, Result, Valid
from torchmend.codemods.fixes.scalar_argument.device import (
    Path,
    apply,
    cheap,
    device_source,
    meets_of,
    params_reached,
)
from torchmend.codemods.fixes.scalar_argument.sites import bind_argument, call_key, calls_compiled, params_of
from torchmend.codemods.fixes.scalar_argument.words import KEEP_NUMBER, NONE_ADVICE, NONE_WHY, call_names, number_kind
from torchmend.codemods.fixes.scalar_argument.wrapped import (
    STAR_ADVICE,
    STAR_WHY,
    Unbound,
    bind_through,
    compiled_def,
    guarded_name,
    none_guard,
    star_parameter,
    wrapper_for,
)
from torchmend.model import Finding


class ScalarArgument(Codemod):
    """Pass a changing float or int argument to a compiled function as a tensor.

    What it does:
        TM202: a Python float or int argument of a compiled function (or of a compiled module's forward)
        that takes a new value on each call: an annealed temperature, a loss weight, a step-dependent scale.

    Why is this bad:
        Dynamo treats a Python number argument as a constant and guards on its value
        (`temperature == 1.0`): a new value fails the guard and recompiles the function. A tensor is a
        graph input instead, so a new value needs no recompile. Making the tensor inside the compiled
        function does not help: dynamo still guards on the number it is made from.

    Example:
        loss = distill_loss(model(x), y, temperature)

    Fix:
        loss = distill_loss(model(x), y, torch.tensor(temperature, device=x.device))

    Fix safety:
        Unsafe: the function now receives a 0-d tensor. `torch.tensor(<float>)` is float32 (the default
        dtype), so a float64 computation sees the value rounded to float32; `torch.tensor(<int>)` is int64.
        The device is that of the tensor the number meets in the function. Every call of the same compiled
        object in the file is changed; the compiled function itself is left alone. Not offered when the
        function uses the number in Python control flow or as a size, index or range (a tensor there is a
        data-dependent graph break), or when the call site or the argument cannot be found.
    """

    rules = ("TM202",)
    name = "scalar-argument-to-tensor"
    delegates_to = ("TM206",)  # a name no parameter binds: dynamo names a closure variable as it names an argument
    INVALID = (
        # a decorated function; the device comes from a plain-name argument of `model(x)`
        Invalid(
            """
            import torch
            from torch import nn

            @torch.compile  # tm-compiled
            def distill_loss(logits, y, t):
                return nn.functional.cross_entropy(logits / t, y)  # tm: TM202 variable=t guard=t==2.0

            def main(model, x, y):
                for step in range(10):
                    t = 2.0 - step * 0.1
                    loss = distill_loss(model(x), y, t)  # tm-call-site
            """,
            """
            import torch
            from torch import nn

            @torch.compile  # tm-compiled
            def distill_loss(logits, y, t):
                return nn.functional.cross_entropy(logits / t, y)  # tm: TM202 variable=t guard=t==2.0

            def main(model, x, y):
                for step in range(10):
                    t = 2.0 - step * 0.1
                    loss = distill_loss(model(x), y, torch.tensor(t, device=x.device))  # tm-call-site
            """,
        ),
        # a module's forward: `self` is skipped; the device follows `h` back to `x`; keyword argument
        Invalid(
            """
            import torch as T
            from torch import nn

            class Net(nn.Module):
                def forward(self, x, *, temperature):
                    h = T.relu(self.fc(x))
                    return self.out(h) / temperature  # tm: TM202 variable=temperature

            def main():
                model = T.compile(Net())
                for step in range(10):
                    x = T.randn(4, 8)
                    model(x, temperature=1.0 + step)  # tm-call-site
            """,
            """
            import torch as T
            from torch import nn

            class Net(nn.Module):
                def forward(self, x, *, temperature):
                    h = T.relu(self.fc(x))
                    return self.out(h) / temperature  # tm: TM202 variable=temperature

            def main():
                model = T.compile(Net())
                for step in range(10):
                    x = T.randn(4, 8)
                    model(x, temperature=T.tensor(1.0 + step, device=x.device))  # tm-call-site
            """,
        ),
        # the optimizer step: `scale` meets `lr`; two call sites of the same function
        Invalid(
            """
            import torch

            @torch.compile  # tm-compiled
            def step(p, scale, lr):
                p.add_(p.grad.mul(scale * lr))  # tm: TM202 variable=scale

            def train(params, lr):
                for i, p in enumerate(params):
                    step(p, 0.5 ** i, lr)  # tm-call-site
                step(params[0], 1.0, lr)
            """,
            """
            import torch

            @torch.compile  # tm-compiled
            def step(p, scale, lr):
                p.add_(p.grad.mul(scale * lr))  # tm: TM202 variable=scale

            def train(params, lr):
                for i, p in enumerate(params):
                    step(p, torch.tensor(0.5 ** i, device=lr.device), lr)  # tm-call-site
                step(params[0], torch.tensor(1.0, device=lr.device), lr)
            """,
        ),
    )
    VALID = (
        # already a tensor at the call site
        Valid(
            """
            import torch

            @torch.compile  # tm-compiled
            def f(x, t):
                return x / t  # tm: TM202 variable=t

            def main(x):
                for i in range(3):
                    f(x, torch.tensor(i + 1.0, device=x.device))  # tm-call-site
            """,
        ),
        # Python control flow on it inside the compiled function
        Valid(
            """
            import torch

            @torch.compile  # tm-compiled
            def f(x, t):
                if t > 1.0:
                    x = x * 2
                return x / t  # tm: TM202 variable=t

            def main(x):
                for i in range(3):
                    f(x, i + 1.0)  # tm-call-site
            """,
        ),
        # a size
        Valid(
            """
            import torch

            @torch.compile  # tm-compiled
            def f(x, n):
                return x.view(n, -1)  # tm: TM202 variable=n

            def main(x):
                for n in (2, 4):
                    f(x, n)  # tm-call-site
            """,
        ),
        # passed through *args at the call site
        Valid(
            """
            import torch

            @torch.compile  # tm-compiled
            def f(x, t):
                return x / t  # tm: TM202 variable=t

            def main(x, args):
                f(*args)  # tm-call-site
            """,
        ),
    )

    def propose(self, finding: Finding, ctx: Context) -> Answer:
        name = guarded_name(finding)
        if not name:
            return NoFix(finding, "the recompile names no variable", "see the guard in the finding")
        if none_guard(finding.guard) and packed_key(name) is None:
            return NoFix(finding, f"`{name}` {NONE_WHY}", NONE_ADVICE)
        src = ctx.file(finding.path)
        fns = functions_for(src, finding)
        if not fns:
            return NoFix(
                finding,
                f"line {finding.line} is not inside a `def` (a compiled lambda?): torchmend "
                "rewrites calls of a def or of a module's forward",
                f"pass `{name}` as `torch.tensor({name}, device=...)` where you call it",
            )
        star = star_parameter(fns, name)
        if star is not None:  # the whole tuple or dict, not one number in it (`len(args) == 2`)
            return NoFix(finding, f"`{name}` is {star}: {STAR_WHY}", STAR_ADVICE)
        fn = next((f for f in fns if any(p.name.value == name for p in [*params_of(f)[0], *params_of(f)[1]])), None)
        if fn is None:
            packed = packed_key(name)
            wrapper = wrapper_for(fns, *packed) if packed else None
            if packed and wrapper is None:  # the compiled wrapper lives in another file (a base class's)
                compiled = compiled_def(ctx, finding)
                wrapper = wrapper_for([compiled], *packed) if compiled is not None else None
            if packed and wrapper is not None:
                return self._through_wrapper(finding, ctx, wrapper, *packed)
            if packed and none_guard(finding.guard):  # the wrapper is not found (a library's): still not a number
                return NoFix(
                    finding,
                    f"`{name}` (an argument a wrapper's *{packed[0]} passes on) {NONE_WHY}",
                    NONE_ADVICE,
                )
            if not name.isidentifier():
                return NoFix(
                    finding,
                    f"`{name}` reaches the compiled function through *args or **kwargs, and neither "
                    f"{call_names([f.name.value for f in fns])} has a `*{packed[0]}` parameter to bind it to"
                    if packed
                    else f"`{name}` is not a parameter torchmend can bind to a call",
                    "pass it as a named parameter, or wrap it yourself: `torch.tensor(v, device=...)`",
                )
            # Dynamo names a closure variable as it names an argument (`warmup == 0.1`): it may be one.
            return Delegate(finding, "TM206")
        if name == self_name(src, fn):
            return NoFix(finding, f"`{name}` is the module itself")
        uses = reads(src, fn, name)
        passed_on: list[str] = []
        problem = python_use(src, fn, uses, name, passed_on)
        if problem is not None:
            return NoFix(
                finding,
                f"`{name}` is {problem.text} at line {problem.line} in {fn.name.value}(): as a tensor it would "
                "make a data-dependent graph break",
                KEEP_NUMBER,
            )
        site = finding.call_site
        if site is None:
            return NoFix(
                finding,
                f"torchmend did not see where {fn.name.value}() is called from",
                f"pass `{name}` as `torch.tensor({name}, device=...)` where you call it",
            )
        if not ctx.in_project(site.path):
            return NoFix(finding, f"{fn.name.value}() is called from {site.path}, outside the project")
        csrc = ctx.file(site.path)
        return self._at_call_sites(finding, src, fn, name, uses, csrc, site.line, passed_on, ctx)

    def _through_wrapper(
        self, finding: Finding, ctx: Context, wrapper: cst.FunctionDef, star: str, key: int | str
    ) -> Result:
        """The guard names the *args / **kwargs of a wrapper that dynamo compiled in place of the function it
        forwards to: bind them at the call site, check the wrapped def's parameter, fix the call (see wrapped.py)."""
        found = bind_through(finding, ctx, wrapper, star, key)
        if isinstance(found, Unbound):
            if found.said and none_guard(finding.guard):
                return NoFix(finding, f"{found.said}; it {NONE_WHY}", NONE_ADVICE)
            return NoFix(finding, found.reason, "pass it by name and wrap it yourself: `torch.tensor(v, device=...)`")
        line = found.csrc.line_of(found.call)
        said = (
            f"`{finding.variable}` is `{found.csrc.code(found.arg.value)}` at line {line}, passed on by "
            f"{wrapper.name.value}() to {found.fn.name.value}()'s `{found.param}`"
        )
        if none_guard(finding.guard):
            return NoFix(finding, f"{said}; it {NONE_WHY}", NONE_ADVICE)
        uses = reads(found.src, found.fn, found.param)
        passed_on: list[str] = []
        problem = python_use(found.src, found.fn, uses, found.param, passed_on)
        if problem is not None:
            return NoFix(
                finding,
                f"{said}, which is {problem.text} at line {problem.line} in {found.fn.name.value}(): as a tensor it "
                "would make a data-dependent graph break",
                KEEP_NUMBER,
            )
        return self._at_call_sites(finding, found.src, found.fn, found.param, uses, found.csrc, line, passed_on, ctx)

    def _at_call_sites(
        self,
        finding: Finding,
        src: SourceFile,
        fn: cst.FunctionDef,
        name: str,
        uses: list[cst.Name],
        csrc: SourceFile,
        line: int,
        passed_on: list[str],
        ctx: Context,
    ) -> Result:
        skip_first = is_method(src, fn)
        stmt = csrc.statement_at(line)
        calls: list[cst.Call] = csrc.nodes_in(stmt, cst.Call) if stmt is not None else []
        sure = [c for c in calls if calls_compiled(csrc, c, fn, skip_first, ctx)]
        if not sure:  # an object torchmend cannot trace back: the one call on the line that takes the argument
            sure = [
                c
                for c in calls
                if bind_argument(fn, c, name, skip_first)[0] is not None
                and not any(q.startswith(("torch.", "builtins.")) for q in csrc.qualified_names(c.func))
            ]
        if len(sure) != 1:
            return NoFix(
                finding,
                f"cannot tell which call at line {line} calls {fn.name.value}()"
                if sure
                else f"no call of {fn.name.value}() found at line {line}",
                f"pass `{name}` as `torch.tensor({name}, device=...)` where you call it",
            )
        call = sure[0]
        arg, why_not = bind_argument(fn, call, name, skip_first)
        if arg is None:
            return NoFix(
                finding,
                f"cannot tell which argument at line {line} is `{name}`: {why_not}",
                f"pass `{name}` by name and wrap it: `{name}=torch.tensor(v, device=...)`",
            )
        key = call_key(csrc, call)
        sites = [c for c in csrc.nodes_in(csrc.module, cst.Call) if c is call or call_key(csrc, c) == key]
        meets: list[tuple[str, Path]] = []
        seen: set[str] = set()
        skip = {name, self_name(src, fn) or ""}
        for expr in meets_of(src, uses, name):
            meets += params_reached(src, fn, expr, skip, seen)
        others: list[tuple[str, Path]] = [
            (p.name.value, ()) for p in params_of(fn)[0] + params_of(fn)[1] if p.name.value not in skip
        ]
        tensor_expr, imports = csrc.torch_expr("tensor")
        replace: dict[cst.CSTNode, cst.CSTNode] = {}
        lines: list[int] = []
        devices: list[str] = []
        for c in sites:
            a, _ = bind_argument(fn, c, name, skip_first)
            if (
                a is None
                or is_tensor_construction(csrc, a.value)
                or (isinstance(a.value, cst.Name) and values(csrc).is_tensor(a.value))
            ):
                continue  # already a tensor
            device = self._device(src, csrc, fn, c, a, meets, others, skip_first)
            args = [cst.Arg(a.value)]
            if device is not None:
                devices.append(csrc.code(device))
                args = [
                    cst.Arg(a.value, comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))),
                    cst.Arg(
                        cst.Attribute(device.deep_clone(), cst.Name("device")),
                        keyword=cst.Name("device"),
                        equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")),
                    ),
                ]
            replace[a.value] = cst.Call(tensor_expr.deep_clone(), args)
            lines.append(csrc.line_of(c))
        if not replace:
            return NoFix(finding, f"`{name}` is already passed as a tensor", skipped=True)
        return self._proposal(finding, csrc, fn, name, call, replace, imports, lines, devices, passed_on)

    def _device(
        self,
        src: SourceFile,
        csrc: SourceFile,
        fn: cst.FunctionDef,
        call: cst.Call,
        scalar: cst.Arg,
        meets: list[tuple[str, Path]],
        others: list[tuple[str, Path]],
        skip_first: bool,
    ) -> cst.BaseExpression | None:
        """At this call: where to take the device from: the argument for the parameter the number meets
        (nearest first), else another tensor argument, else None."""
        for params, need_evidence in ((meets, False), (others, True)):
            for p, path in params:
                a, _ = bind_argument(fn, call, p, skip_first)
                if a is None or a is scalar:
                    continue
                evident = values(src).param_maybe_tensor(fn, p) or values(csrc).maybe_tensor(a.value)
                if not evident and (need_evidence or values(csrc).kind(a.value) in NUMBERS):
                    continue  # `alpha = 0.5` at the caller: a number has no device
                if path and cheap(a.value):
                    return apply(a.value, path)
                source = device_source(a.value, scalar.value)
                if source is not None:
                    return source
        return None

    def _proposal(
        self,
        finding: Finding,
        csrc: SourceFile,
        fn: cst.FunctionDef,
        name: str,
        call: cst.Call,
        replace: dict[cst.CSTNode, cst.CSTNode],
        imports: tuple[tuple[str, str | None], ...],
        lines: list[int],
        devices: list[str],
        passed_on: list[str],
    ) -> Proposal:
        where = f"line{'s' if len(lines) > 1 else ''} {', '.join(map(str, lines))}"
        distinct = list(dict.fromkeys(devices))
        on = (
            f"on `{distinct[0]}`'s device"
            if len(distinct) == 1
            else f"on the device of {', '.join(f'`{d}`' for d in distinct)}"
            if distinct
            else "on the default device (no tensor argument to take the device from)"
        )
        if distinct and len(devices) < len(lines):
            on += " (the default device where a call has no tensor argument to take it from)"
        kind = number_kind(finding.guard)
        dtype = (
            "`torch.tensor(<float>)` is float32 (the default dtype): a float64 computation sees the value "
            "rounded to float32"
            if kind == "float"
            else "`torch.tensor(<int>)` is int64"
            if kind == "int"
            else "`torch.tensor(v)` is float32 for a float, int64 for an int"
        )
        return Proposal(
            (finding,),
            finding.rule,
            csrc.path,
            replace=replace,
            imports=imports,
            safety=UNSAFE,
            why=f"pass `{name}` to {csrc.code(call.func)}() as a 0-d tensor {on} ({where}), so a new value is a "
            "new input instead of a recompile",
            note=f"{fn.name.value}() now receives a tensor for `{name}`; {dtype}. torchmend checked that "
            f"{fn.name.value}() does not branch on it or use it as a size or index"
            + (
                f"; it did not look inside {call_names(passed_on)}, which "
                f"{'also get' if len(set(passed_on)) > 1 else 'also gets'} it."
                if passed_on
                else "."
            ),
            alternative="keep the number and accept one recompile: after it, dynamo treats a changing float as "
            "symbolic (torch._dynamo.config.specialize_float=False, the default)",
        )
