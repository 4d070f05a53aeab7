"""Run a helper that draws from NumPy's or Python's random generator eagerly, out of the trace (TM110)."""

from __future__ import annotations

import os

import libcst as cst

from torchmend import rules
from torchmend.analysis.calls import is_compiled
from torchmend.analysis.source import Context, SourceError, SourceFile
from torchmend.codemods.base import UNSAFE, Codemod, Invalid, NoFix, Proposal, Result, Valid
from torchmend.codemods.fixes.library_side import rebind_disabled
from torchmend.model import Finding, Where

# Qualified-name prefixes of the host generators: NumPy's legacy functions and Generator factory, Python's module.
DISABLE = {"torch.compiler.disable", "torch._dynamo.disable"}
# The functions torch.compile enters a module through: disabling one of them runs the whole module eagerly.
ENTRY_METHODS = ("forward", "__call__", "_call_impl")

_IN_ENTRY_ADVICE = (
    "move the random draw into a helper function defined outside the compiled function and decorate that helper "
    "with @torch.compiler.disable, so the helper runs eagerly with NumPy's generator (one graph break at its call); "
    "or make the random values outside the compiled model (data collator, training loop) and pass them in"
)


def host_draws(src: SourceFile, root: cst.CSTNode) -> list[cst.Call]:
    """The calls under `root` to NumPy's or Python's random generator (`np.random.rand`, `random.random`, ...)."""
    return [
        c
        for c in src.nodes_in(root, cst.Call)
        if any(q.startswith(rules.HOST_RANDOM_MODULES) for q in src.qualified_names(c.func))
    ]


def helper_of(src: SourceFile, node: cst.CSTNode) -> cst.FunctionDef | None:
    """The def to run eagerly for a draw at `node`: the innermost def around it that is defined at module level or
    directly in a class body (a def nested in a function is re-created on every call, so its outer one is taken)."""
    for anc in src.ancestors(node):
        if isinstance(anc, cst.FunctionDef):
            owner = src.enclosing(anc, (cst.FunctionDef, cst.ClassDef))
            if owner is None or isinstance(owner, cst.ClassDef):
                return anc
    return None


def disabled(src: SourceFile, fn: cst.FunctionDef) -> bool:
    """Whether a def is decorated with torch.compiler.disable (or torch._dynamo.disable), called or not."""
    for dec in fn.decorators:
        target = dec.decorator.func if isinstance(dec.decorator, cst.Call) else dec.decorator
        if src.qualified_names(target) & DISABLE:
            return True
    return False


def _compiled_here(src: SourceFile, fn: cst.FunctionDef, finding: Finding) -> bool:
    """Whether `fn` is a function torch.compile enters itself (so disabling it would disable the compile)."""
    if src.enclosing(fn, cst.ClassDef) is not None and fn.name.value in ENTRY_METHODS:
        return True
    if is_compiled(src, fn):
        return True
    cf = finding.compiled_function
    if cf is not None and cf.path and src.path == os.path.realpath(cf.path):
        first = min([src.line_of(d) for d in fn.decorators] + [src.line_of(fn)])
        return first <= cf.line <= src.line_of(fn)
    return False


def _generator(src: SourceFile, fn: cst.FunctionDef) -> bool:
    """A `yield` of `fn` itself (not of a def or lambda nested in it)."""
    return any(src.enclosing(y, (cst.FunctionDef, cst.Lambda)) is fn for y in src.nodes_in(fn, cst.Yield))


class EagerHostRandom(Codemod):
    """Run the helper that draws from NumPy's (or Python's) random generator eagerly: `@torch.compiler.disable`.

    What it does:
        TM110: a graph break on a line that draws from NumPy's or Python's random generator inside compiled code,
        in a helper that compiled code calls: SpecAugment-style masking (`epsilon = np.random.rand(1).item()`,
        `np.random.choice(n, k, replace=False)`, Python ints from shapes and masks) in a module-level function or a
        method other than `forward`. The helper gets `@torch.compiler.disable` (innermost, under `@staticmethod`
        and the like), so dynamo does not trace it: it runs eagerly, with NumPy's own generator. A draw in the
        compiled function itself (`forward`, a `@torch.compile`d function) is reported with what to write instead:
        disabling that would run the whole model eagerly. PyTorch reports these breaks as GB0033 (data-dependent
        operator, `aten._local_scalar_dense`) and other breaks at the draw's line; Python's `random.random()` is a
        skipped builtin up to torch 2.13 (GB0007), and GB0297 / GB0298 are breaks of the generators themselves.
        A helper inside an installed library (site-packages, never edited) is re-bound from the script instead,
        before its compile call: `transformers.models.x.modeling_x.helper =
        torch.compiler.disable(transformers.models.x.modeling_x.helper)` (a module-level function or a plain
        method; the library's own calls look the name up when they run, so they reach the disabled one).

    Why is this bad:
        Dynamo traces NumPy calls as torch operations, and with `torch._dynamo.config.use_numpy_random_stream` off
        (the default) `np.random.*` then draws from torch's generator, not NumPy's: the compiled run sees other
        random numbers than the eager program. The values then go back to Python (`.item()`, `int()`, a Python
        loop over them), which breaks the graph several times per call, and more as other breaks are fixed and
        more of forward is traced. A rewrite to torch's generator does not help: the counts and spans are still
        Python ints that break the graph (measured on torch 2.13: as many breaks, and with
        `capture_scalar_outputs` a data-dependent guard error).

    Example:
        def span_mask(batch, length, prob, span):
            eps = np.random.rand(1).item()  # TM110: GB0033
            n = int(prob * length / span + eps)
            return np.stack([np.random.choice(length - span, n, replace=False) for _ in range(batch)])

    Fix:
        @torch.compiler.disable
        def span_mask(batch, length, prob, span):
            eps = np.random.rand(1).item()
            n = int(prob * length / span + eps)
            return np.stack([np.random.choice(length - span, n, replace=False) for _ in range(batch)])

    Fix safety:
        Unsafe. The helper's draws under compile come from NumPy's generator again, as in the eager program, no
        longer from the torch stream dynamo substituted: the patched compiled run draws the eager program's random
        numbers, so its losses and weights differ from the original compiled run's and verify compares them with
        the original's eager run ("the patched compiled run equals the original eager run"). One graph break is
        left at each call of the helper (TM105, GB0098): the call runs in Python between two graphs. Eagerly
        (without compile) nothing changes. To remove that break too, make the mask outside the compiled model (data
        collator, training loop) and pass it in as a tensor, with `capture_dynamic_output_shape_ops` on when a
        boolean-mask assignment applies it (the advice of GB0098, TM105).
    """

    rules = ("TM110",)
    name = "eager-host-random"
    INVALID = (
        Invalid(
            """
            import numpy as np
            import torch
            from torch import nn


            def span_mask(batch, length, prob, span):
                eps = np.random.rand(1).item()  # tm: TM110
                n = int(prob * length / span + eps)
                return np.stack([np.random.choice(length - span, n, replace=False) for _ in range(batch)])  # tm: TM110


            class Encoder(nn.Module):
                def forward(self, h):  # tm-compiled
                    if self.training:
                        mask = torch.from_numpy(span_mask(h.shape[0], h.shape[1], 0.2, 2))
                        h = h.masked_fill(mask[..., None], 0.0)
                    return h
            """,
            """
            import numpy as np
            import torch
            from torch import nn


            @torch.compiler.disable
            def span_mask(batch, length, prob, span):
                eps = np.random.rand(1).item()  # tm: TM110
                n = int(prob * length / span + eps)
                return np.stack([np.random.choice(length - span, n, replace=False) for _ in range(batch)])  # tm: TM110


            class Encoder(nn.Module):
                def forward(self, h):  # tm-compiled
                    if self.training:
                        mask = torch.from_numpy(span_mask(h.shape[0], h.shape[1], 0.2, 2))
                        h = h.masked_fill(mask[..., None], 0.0)
                    return h
            """,
        ),
        # a static method helper: the decorator goes under @staticmethod, on the function itself
        Invalid(
            """
            import numpy as np
            import torch
            from torch import nn


            class Crop(nn.Module):
                @staticmethod
                def offset(length, size):
                    return int(np.random.randint(0, length - size))  # tm: TM110

                def forward(self, x):  # tm-compiled
                    start = self.offset(x.shape[-1], 16)
                    return x[..., start : start + 16]
            """,
            """
            import numpy as np
            import torch
            from torch import nn


            class Crop(nn.Module):
                @staticmethod
                @torch.compiler.disable
                def offset(length, size):
                    return int(np.random.randint(0, length - size))  # tm: TM110

                def forward(self, x):  # tm-compiled
                    start = self.offset(x.shape[-1], 16)
                    return x[..., start : start + 16]
            """,
        ),
    )
    VALID = (
        # the draw in forward itself: disabling forward would run the whole model eagerly
        Valid(
            """
            import numpy as np
            import torch
            from torch import nn


            class Block(nn.Module):
                def forward(self, x):  # tm-compiled
                    if self.training and np.random.rand() > 0.5:  # tm: TM110
                        x = x.flip(-1)
                    return x
            """,
        ),
        # already run eagerly
        Valid(
            """
            import numpy as np
            import torch


            @torch.compiler.disable
            def jitter():
                return np.random.rand(1).item()  # tm: TM110
            """,
        ),
    )

    def propose(self, finding: Finding, ctx: Context) -> Result:
        rule = rules.BY_CODE["TM110"]
        library = finding.where != Where.PROJECT
        try:
            src = ctx.file(finding.path)
        except SourceError:
            return NoFix(finding, f"the draw is in {finding.file}, outside your project", rule.advice)
        stmt = src.statement_at(finding.line)
        fn = helper_of(src, stmt) if stmt is not None else None
        if fn is None:
            return NoFix(
                finding, f"line {finding.line} is not inside a function that compiled code calls", _IN_ENTRY_ADVICE
            )
        name = fn.name.value
        if not host_draws(src, fn):
            return NoFix(finding, f"no call to NumPy's or Python's random generator in `{name}`", rule.advice)
        if _compiled_here(src, fn, finding):
            return NoFix(
                finding,
                f"the draw is in `{name}`, the function torch.compile compiles: disabling it would run the whole "
                "compiled code eagerly",
                _IN_ENTRY_ADVICE,
            )
        if disabled(src, fn):
            return NoFix(finding, f"`{name}` is already disabled for torch.compile", skipped=True)
        if fn.asynchronous is not None or _generator(src, fn):
            return NoFix(
                finding,
                f"`{name}` is a generator or a coroutine: its body runs when it is iterated, not when it is called",
                _IN_ENTRY_ADVICE,
            )
        why = (
            f"run `{name}` eagerly (torch.compiler.disable): dynamo no longer traces its random draws, whose "
            "values go back to Python and break the graph, and NumPy's own generator draws them, as without compile"
        )
        note = (
            "under compile the draws come from NumPy's (Python's) generator as in the eager program, not from "
            "the torch stream dynamo substitutes: the compiled run's numbers change to the eager program's; one "
            f"graph break stays at each call of `{name}`"
        )
        if library:  # the library is never edited: the script re-binds the function, disabled
            return rebind_disabled(finding, ctx, src, fn, why=why, note=note, shape="disable-host-random-helper")
        disable, imports = src.torch_expr("compiler.disable")
        decorated = fn.with_changes(decorators=[*fn.decorators, cst.Decorator(disable)])
        return Proposal(
            (finding,),
            finding.rule,
            src.path,
            replace={fn: decorated},
            imports=imports,
            safety=UNSAFE,
            shape="disable-host-random-helper",
            why=why,
            note=note,
            alternative="make the random values outside the compiled model (data collator, training loop) and pass "
            "them in as tensors",
        )
