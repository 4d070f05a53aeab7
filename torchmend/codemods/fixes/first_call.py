"""The model's first call run eagerly, for module state it sets once (a flag, a table, a mode):
`torch.compiler.set_stance("force_eager")` before the compile call and `set_stance("default")` after the first call's
statement. A last resort, verified by the re-run.

Not PyTorch's `eager_then_compile` stance: that one runs each code object's first call eagerly, so a layer's
`forward` (one code object for every layer) compiles on the second layer's call, still inside the model's first call
and before the state is settled (karpathy/pytorch-normalizing-flows' ActNorm flow: 2 graphs and 1 recompile became 5
and 1)."""

from __future__ import annotations

import re

import libcst as cst

from torchmend.analysis.entry import compile_site_for
from torchmend.analysis.names import os_same
from torchmend.analysis.source import Context
from torchmend.analysis.torch_api import available
from torchmend.codemods.base import UNSAFE, Codemod, Invalid, NoFix, Proposal, Result, Valid
from torchmend.model import Finding, Kind, Pattern

API = "compiler.set_stance"
EAGER, DEFAULT = "force_eager", "default"
WHY = (
    "run the first call of the compiled code eagerly, where it sets its state once, and compile from the second "
    f'call on: `torch.compiler.set_stance("{EAGER}")` before compiling, `set_stance("{DEFAULT}")` after the call'
)
NOTE = (
    "until the first call returns, every compiled function in the process runs eagerly (and is not compiled), so "
    "the state that call sets is settled before dynamo guards on it; the compile moves to the second call; with "
    "inductor, random numbers drawn in that first call come from eager's generator instead of inductor's (a changed "
    "random stream): verification re-runs the script and keeps it only if the recompile is gone and the numbers match"
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
    """The stance around the first call at the call site the run recorded: `force_eager` before the compile call,
    `default` after the call's statement, both in the script that compiles and calls."""
    if not first_call_state(finding):
        return NoFix(finding, "not a one-time recompile on state the first call sets", skipped=True)
    if not available(API, ctx.torch_version):
        release = ".".join(map(str, ctx.torch_version or ()))
        return NoFix(finding, f"torch {release} is not a release `torch.compiler.set_stance` was read on", skipped=True)
    advice = f'call torch.compiler.set_stance("{EAGER}") before the first call and set_stance("{DEFAULT}") after it'
    call = finding.entry or finding.call_site  # the loop's call, not a layer's call inside a model that broke
    if call is None or call.traced or not ctx.in_project(call.path):
        return NoFix(finding, "the run saw no call into the compiled code from your own code", advice, skipped=True)
    site = compile_site_for(finding, ctx)
    if isinstance(site, str):
        return NoFix(finding, site, advice, skipped=True)
    if not os_same(site.src.path, call.path):
        return NoFix(finding, "the compiled code is called from another file than the one that compiles", advice)
    if "set_stance(" in site.src.text:
        return NoFix(finding, f"{site.src.path} sets a compiler stance already", skipped=True)
    stmt = site.src.statement_at(call.line)
    if not isinstance(stmt, cst.SimpleStatementLine) or any(isinstance(s, (cst.Return, cst.Raise)) for s in stmt.body):
        return NoFix(finding, f"no statement to follow at the call on line {call.line}", advice)
    target, imports = site.src.torch_expr(API)
    spelled = cst.Module([]).code_for_node(target)

    def stance(name: str) -> cst.SimpleStatementLine:
        line = cst.parse_statement(f'{spelled}("{name}")\n')
        assert isinstance(line, cst.SimpleStatementLine)
        return line

    return Proposal(
        (finding,),
        finding.rule,
        site.src.path,
        why=WHY,
        safety=UNSAFE,
        insert_before={site.statement: [stance(EAGER)]},
        insert_after={stmt: [stance(DEFAULT)]},
        imports=imports,
        note=NOTE,
        global_setting=True,
    )


class EagerFirstCall(Codemod):
    """Run the model's first call eagerly when that call sets module state once.

    What it does:
        A recompile that happened once, on a guard over a module's attribute (or a global) that the model's
        first call sets: a flag flipped after a data-dependent initialization (ActNorm in a normalizing flow, a
        model that rescales or folds its weights when it first runs in eval mode), a positional table built or
        grown on the first call, an attention implementation switched on the first short input. When the
        finding's own rule has no fix for it, `torchmend fix` puts `torch.compiler.set_stance("force_eager")` on
        the line before the script's `torch.compile(...)` / `model.compile()` call and
        `torch.compiler.set_stance("default")` after the statement that calls the compiled model (the line where
        the run entered compiled code from your code, recorded with the recompile, in the same script): the first
        call runs eagerly, every later one compiled. Offered on the torch releases whose source was read
        (`analysis/torch_api.py`). Not offered for a guard on the arguments (a recompile of one layer's code for
        another layer), which a first eager call does not change, nor where the call is in another file than the
        compile or inside compiled code.

    Why is this bad:
        Dynamo compiles the first call with the state as it finds it, traces the code that changes it (often
        with graph breaks: building modules, `.copy_` into parameters under `no_grad`), and on the second call
        the guard on that state fails: a second compile of the whole frame, for code that never runs again
        (the fixture's flow with ActNorm, torch 2.13, aot_eager: 1 one-time recompile, 2 graphs; none and 1
        with the stance, losses equal).

    Example:
        compiled = torch.compile(model)        # ActNorm.forward: `if not self.initialized: ...` (once)
        for x in batches:
            loss = compiled(x).pow(2).mean()   # the second call recompiles

    Fix:
        torch.compiler.set_stance("force_eager")
        compiled = torch.compile(model)
        for x in batches:
            loss = compiled(x).pow(2).mean()
            torch.compiler.set_stance("default")

    Fix safety:
        Unsafe: the first call runs eager code instead of compiled code. The math is the same, up to float
        rounding; with the inductor backend, random numbers drawn in that call come from eager's generator
        instead of inductor's, which changes the random stream. Until the first call returns, every compiled
        function in the process runs eagerly; the compile moves to the second call. Verification re-runs the
        script and keeps it only when the recompile is gone and the numbers match.
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
            for x in batches:
                loss = compiled(x).pow(2).mean()  # tm-call-site
            """,
            """
            import torch

            class ActNorm(torch.nn.Module):
                def forward(self, x):
                    if not self.initialized:  # tm: TM201 variable=self.initialized pattern=once count=1
                        self.initialize(x)
                    return (x + self.loc) * self.scale

            torch.compiler.set_stance("force_eager")
            compiled = torch.compile(ActNorm())
            for x in batches:
                loss = compiled(x).pow(2).mean()  # tm-call-site
                torch.compiler.set_stance("default")
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
            out = fast(h, None)  # tm-call-site
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
            y = compiled(x)  # tm-call-site
            """,
        ),
        # the call runs inside compiled code: a stance cannot be set there
        Valid(
            """
            import torch

            class ActNorm(torch.nn.Module):
                def forward(self, x):
                    if not self.initialized:  # tm: TM201 variable=self.initialized pattern=once count=1
                        self.initialize(x)
                    return x + self.loc

            compiled = torch.compile(ActNorm())
            y = compiled(x)  # tm-call-site traced
            """,
        ),
    )

    def propose(self, finding: Finding, ctx: Context) -> Result:
        return propose_first_call(finding, ctx)
