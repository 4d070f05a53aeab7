"""`torch.compiler.set_stance("eager_then_compile")` before the compile call, for module state that the model's
first call sets once (a flag, a table, a mode): a last resort, verified by the re-run."""

from __future__ import annotations

import re

import libcst as cst

from torchmend.analysis.entry import compile_site_for
from torchmend.analysis.source import Context
from torchmend.analysis.torch_api import available
from torchmend.codemods.base import UNSAFE, Codemod, Invalid, NoFix, Proposal, Result, Valid
from torchmend.model import Finding, Kind, Pattern

API = "compiler.set_stance"
STANCE = "eager_then_compile"
WHY = (
    "run the model's first call eagerly, where it sets its state once, and compile from the second call on: "
    f'`torch.compiler.set_stance("{STANCE}")` before compiling'
)
NOTE = (
    "the stance holds for every compiled function in the process: each one's first call runs eagerly (and is not "
    "compiled), so the state it sets is settled before dynamo guards on it; code resumed after a graph break compiles "
    "on its own second call, one call later than before; with inductor, random numbers drawn in "
    "that first call come from eager's generator instead of inductor's (a changed random stream): verification "
    "re-runs the script and keeps it only if the recompile is gone and the numbers match"
)
# The state a module (or the script) keeps: `self.initialized`, `self._modules['norm'].initialized`, `self.pe`.
_MODULE_STATE = re.compile(r"self(?:\.|$)")


def first_call_state(finding: Finding) -> bool:
    """The trigger: a recompile that happened once, on a guard over a module's attribute or a global (not over
    the arguments, which a first call run eagerly does not change)."""
    if finding.kind != Kind.RECOMPILE or finding.pattern != Pattern.ONCE:
        return False
    return bool(_MODULE_STATE.match(finding.variable or "")) or (finding.guard or "").startswith("G[")


def propose_first_call(finding: Finding, ctx: Context) -> Result:
    if not first_call_state(finding):
        return NoFix(finding, "not a one-time recompile on state the first call sets", skipped=True)
    if not available(API, ctx.torch_version):
        release = ".".join(map(str, ctx.torch_version or ()))
        return NoFix(finding, f"torch {release} is not a release the `{STANCE}` stance was read on", skipped=True)
    site = compile_site_for(finding, ctx)
    if isinstance(site, str):
        return NoFix(finding, site, f'call torch.compiler.set_stance("{STANCE}") before compiling', skipped=True)
    if "set_stance(" in site.src.text:
        return NoFix(finding, f"{site.src.path} sets a compiler stance already", skipped=True)
    target, imports = site.src.torch_expr(API)
    stmt = cst.parse_statement(f'{cst.Module([]).code_for_node(target)}("{STANCE}")\n')
    return Proposal(
        (finding,),
        finding.rule,
        site.src.path,
        why=WHY,
        safety=UNSAFE,
        insert_before={site.statement: [stmt]},
        imports=imports,
        note=NOTE,
    )


class EagerFirstCall(Codemod):
    """Run each compiled function's first call eagerly when that call sets module state once.

    What it does:
        A recompile that happened once, on a guard over a module's attribute (or a global) that the model's
        first call sets: a flag flipped after a data-dependent initialization (ActNorm in a normalizing flow, a
        model that rescales or folds its weights when it first runs in eval mode), a positional table built or
        grown on the first call, an attention implementation switched on the first short input. When the
        finding's own rule has no fix for it, `torchmend fix` sets `torch.compiler.set_stance("eager_then_compile")`
        on the line before the script's `torch.compile(...)` / `model.compile()` call: PyTorch's stance for
        running each compiled function's first call eagerly and compiling it from the second call on. Offered
        on the torch releases whose source was read (`analysis/torch_api.py`). Not offered for a guard on the
        arguments (a recompile of one layer's code for another layer), which a first eager call does not change.

    Why is this bad:
        Dynamo compiles the first call with the state as it finds it, traces the code that changes it (often
        with graph breaks: building modules, `.copy_` into parameters under `no_grad`), and on the second call
        the guard on that state fails: a second compile of the whole frame, for code that never runs again
        (the fixture's flow with ActNorm, torch 2.13, aot_eager: 1 one-time recompile, 2 graphs; none and 1
        with the stance, losses equal).

    Example:
        class ActNorm(torch.nn.Module):
            def forward(self, x):
                if not self.initialized:  # a recompile once, on the second call
                    self.initialize(x)
                return (x + self.loc) * self.scale

        compiled = torch.compile(model)

    Fix:
        torch.compiler.set_stance("eager_then_compile")
        compiled = torch.compile(model)

    Fix safety:
        Unsafe: the first call runs eager code instead of compiled code. The math is the same, up to float
        rounding; with the inductor backend, random numbers drawn in that call come from eager's generator
        instead of inductor's, which changes the random stream. The stance holds for every compiled function in
        the process, and each one's first call is not compiled (a compile moves to the second call, not away).
        Verification re-runs the script and keeps it only when the recompile is gone and the numbers match.
    """

    last_resort = True
    name = "eager-first-call"
    INVALID = (
        Invalid(
            """
            import torch

            class ActNorm(torch.nn.Module):
                def forward(self, x):
                    if not self.initialized:  # tm: TM201 variable=self.initialized pattern=once count=1
                        self.initialize(x)
                    return (x + self.loc) * self.scale

            compiled = torch.compile(ActNorm())
            """,
            """
            import torch

            class ActNorm(torch.nn.Module):
                def forward(self, x):
                    if not self.initialized:  # tm: TM201 variable=self.initialized pattern=once count=1
                        self.initialize(x)
                    return (x + self.loc) * self.scale

            torch.compiler.set_stance("eager_then_compile")
            compiled = torch.compile(ActNorm())
            """,
        ),
    )
    VALID = (
        # a guard on an argument: one layer's code compiled again for another layer, not state the first call sets
        Valid(
            """
            import torch

            def block(h, bias):
                return h + bias if bias is not None else h  # tm: TM202 variable=bias pattern=once count=1

            fast = torch.compile(block)
            """,
        ),
        # a recompile on each new value: not first-call state
        Valid(
            """
            import torch

            class Scaled(torch.nn.Module):
                def forward(self, x):
                    self.calls += 1  # tm: TM201 variable=self.calls pattern=storm count=7
                    return x * self.calls

            compiled = torch.compile(Scaled())
            """,
        ),
    )

    def propose(self, finding: Finding, ctx: Context) -> Result:
        return propose_first_call(finding, ctx)
