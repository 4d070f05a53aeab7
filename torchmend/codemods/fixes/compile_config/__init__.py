"""Config switches placed right before the user's compile call, when the break's own GB id (or the operator a
backend failed on) says a switch is the remedy: `capture_dynamic_output_shape_ops` for operators whose output
shape depends on the data (`nonzero`, GB0036), `capture_scalar_outputs` for operators that read a tensor into a
number (`.item()` inside an op, GB0033). Refused where the switch would only move the break: the value then
meets Python control flow (flow.py)."""

from __future__ import annotations

import re

from torchmend.analysis.dynamo_config import has_switch
from torchmend.analysis.dynamo_tables import DYNAMIC_SHAPE_OPS, SCALAR_OUTPUT_OPS
from torchmend.analysis.entry import compile_site_for
from torchmend.analysis.source import Context, SourceError
from torchmend.codemods.base import SAFE, Codemod, Invalid, NoFix, Result, Valid
from torchmend.codemods.fixes.compile_config.flow import scalar_moves, shape_moves
from torchmend.codemods.fixes.compile_config.nested import propose_nested
from torchmend.codemods.fixes.compile_config.settings import switch_on
from torchmend.codemods.fixes.expert_loop import propose_expert_loop
from torchmend.model import Finding, Where

DYNAMIC, SCALAR = "capture_dynamic_output_shape_ops", "capture_scalar_outputs"
_OP = re.compile(r"aten\.(\w+)")
_NOTE = {
    DYNAMIC: "the setting holds for everything compiled after this line: each data-dependent size becomes a "
    "symbolic size in the graph; a later shape check on it (an `if`, a view) can still break or raise; code "
    "compiled with data-dependent sizes can run slower than the eager code it replaces (Wav2Vec2's SpecAugment "
    "masking: steady step 3.2x on CPU), so judge speed with --repeat 3",
    SCALAR: "the setting holds for everything compiled after this line: each `.item()` becomes a symbolic "
    "number in the graph; Python control flow on it still breaks",
}


def _operator(finding: Finding) -> str | None:
    op = _OP.search(finding.reason or "")
    return op.group(1) if op else None


def _option(finding: Finding) -> str | None:
    """The switch the finding's GB id or operator asks for."""
    op = _operator(finding)
    if "meta kernel" in (finding.reason or ""):
        return None  # "Dynamic shape operator (no meta kernel)": the switch is on and does not help
    if finding.gb_id == "GB0036" or op in DYNAMIC_SHAPE_OPS:
        return DYNAMIC
    if finding.gb_id == "GB0124" or op in SCALAR_OUTPUT_OPS:
        return SCALAR
    return None


def capture_scalars_in_library(finding: Finding, ctx: Context) -> Result:
    """A `.item()` inside a library (TM104, an assert on one: TM108), which torchmend never edits: the end user's
    remedy, `capture_scalar_outputs = True` before the script's compile call, unless the library's own code then
    meets the number with Python control flow (read from its source), where the switch only moves the break."""
    return _propose(finding, ctx, SCALAR, check_flow=True, library_flow=True)


def _propose(finding: Finding, ctx: Context, option: str, check_flow: bool, library_flow: bool = False) -> Result:
    if check_flow and (finding.where == Where.PROJECT or library_flow):
        try:
            src = ctx.file(finding.path)
        except SourceError:
            return NoFix(finding, f"cannot read {finding.file}", f"set `torch._dynamo.config.{option} = True`")
        stmt = src.statement_at(finding.line)
        moved = None if stmt is None else (shape_moves if option == DYNAMIC else scalar_moves)(src, stmt)
        if moved:
            return NoFix(
                finding,
                f"`{option} = True` would only move the break: {moved}, and Python needs the real value there",
                "keep the work on tensors (a mask instead of the indices; `torch.where` instead of an `if`), or "
                "loop over a fixed range and mask inside it",
            )
    site = compile_site_for(finding, ctx)
    if isinstance(site, str):
        return NoFix(finding, site, f"set `torch._dynamo.config.{option} = True` before compiling")
    if has_switch(site.src, option):
        return NoFix(
            finding,
            f"{site.src.path} already sets `torch._dynamo.config.{option}`; the break is not about that setting",
        )
    return switch_on(
        (finding,),
        site,
        option,
        why=f"let dynamo trace the operator: `torch._dynamo.config.{option} = True` before compiling",
        note=_NOTE[option],
        safety=SAFE,
    )


class CaptureDataDependentOp(Codemod):
    """Trace a data-dependent operator with a config switch set before compiling.

    What it does:
        TM111: an operator whose output shape depends on the data (`x.nonzero()`, `torch.where(mask)`,
        `masked_select`, `unique`: GB0036), or one that reads a tensor into a number inside an operator
        (`aten._local_scalar_dense`: GB0033), reached inside compiled code. The fix sets the switch PyTorch
        names for it, `torch._dynamo.config.capture_dynamic_output_shape_ops = True` or
        `capture_scalar_outputs = True`, on the line before the script's `torch.compile(...)` /
        `model.compile()` call; one line per switch however many findings ask for it.

    Why is this bad:
        By default dynamo cannot give such an operator's output a size (or value) it does not know while
        tracing: it breaks the graph at the operator, on every call.

    Example:
        def route(x, w):
            hit = (x > 0).nonzero()
            return x[hit[:, 0]] * w

        fast = torch.compile(route)

    Fix:
        torch._dynamo.config.capture_dynamic_output_shape_ops = True
        fast = torch.compile(route)

        A loop over the rows of `mask.nonzero()` that uses each row only as an index (mixture-of-experts
        routing: `for e in hit: ... self[f"expert_{e[0]}"] ... mask[e].squeeze(0)`) becomes a loop over
        `range(n)` with a Python int index (fixes/expert_loop.py), and the selection inside it gets the switch.
        Refused when the value meets Python control flow otherwise (an `if`, `len()`, `int()`, a loop that
        uses its row as a tensor): there the switch only moves the break. The operator's own hint is in the
        finding's reason.

    Fix safety:
        The switch alone is safe: the same operators run, traced with symbolic sizes; the setting holds for
        everything compiled after it. The loop rewrite is unsafe: an index with no rows now runs too, on an
        empty selection; its parameters then get a zero gradient instead of none, which an optimizer with
        weight decay or momentum (AdamW) treats differently. Verification re-runs the script (counts and
        numerics) before anything is written.
    """

    rules = ("TM111",)
    name = "capture-data-dependent-op"
    INVALID = (
        # mixture-of-experts routing: the loop over the rows of nonzero() becomes a loop over every index
        Invalid(
            """
            import torch

            def experts(x, mask):
                hit = (mask.sum(0) > 0).nonzero()  # tm: TM111 gb_id=GB0036
                out = x * 0
                for e in hit:
                    idx = torch.where(mask[:, e[0]])[0]  # tm: TM111 gb_id=GB0036
                    out[idx] += x[idx]
                return out

            fast = torch.compile(experts)
            """,
            """
            import torch

            def experts(x, mask):
                out = x * 0
                for e in range((mask.sum(0) > 0).shape[0]):
                    idx = torch.where(mask[:, e])[0]  # tm: TM111 gb_id=GB0036
                    out[idx] += x[idx]
                return out

            torch._dynamo.config.capture_dynamic_output_shape_ops = True
            fast = torch.compile(experts)
            """,
        ),
        Invalid(
            """
            import torch

            def route(x, w):
                hit = (x > 0).nonzero()  # tm: TM111 gb_id=GB0036
                return x[hit[:, 0]] * w

            fast = torch.compile(route)
            """,
            """
            import torch

            def route(x, w):
                hit = (x > 0).nonzero()  # tm: TM111 gb_id=GB0036
                return x[hit[:, 0]] * w

            torch._dynamo.config.capture_dynamic_output_shape_ops = True
            fast = torch.compile(route)
            """,
        ),
        # two findings ask for the same switch: one line
        Invalid(
            """
            import torch as t

            def pick(x, m):
                rows = t.where(m)[0]  # tm: TM111 gb_id=GB0036
                n = x.sum().item()  # tm: TM111 gb_id=GB0033 reason=aten._local_scalar_dense
                cols = m.nonzero()  # tm: TM111 gb_id=GB0036
                return x[rows] * n + cols.sum()

            def main(x, m):
                fast = t.compile(pick)
                return fast(x, m)
            """,
            """
            import torch as t

            def pick(x, m):
                rows = t.where(m)[0]  # tm: TM111 gb_id=GB0036
                n = x.sum().item()  # tm: TM111 gb_id=GB0033 reason=aten._local_scalar_dense
                cols = m.nonzero()  # tm: TM111 gb_id=GB0036
                return x[rows] * n + cols.sum()

            def main(x, m):
                t._dynamo.config.capture_dynamic_output_shape_ops = True
                t._dynamo.config.capture_scalar_outputs = True
                fast = t.compile(pick)
                return fast(x, m)
            """,
        ),
    )
    VALID = (
        # a loop that uses its row of nonzero() as a tensor: the switch only moves the break into the loop
        Valid(
            """
            import torch

            def shift(x, mask):
                hit = mask.nonzero()  # tm: TM111 gb_id=GB0036
                for row in hit:
                    x = x + row.sum()
                return x

            fast = torch.compile(shift)
            """,
        ),
        # the number decides an `if`: still a break with the switch on
        Valid(
            """
            import torch

            def f(x):
                flag = x.any().item()  # tm: TM111 gb_id=GB0033 reason=aten._local_scalar_dense
                if flag:
                    return x * 2
                return x

            fast = torch.compile(f)
            """,
        ),
        # already set
        Valid(
            """
            import torch

            def f(x):
                return x[x.nonzero()]  # tm: TM111 gb_id=GB0036

            torch._dynamo.config.capture_dynamic_output_shape_ops = True
            fast = torch.compile(f)
            """,
        ),
        # an operator no switch traces
        Valid(
            """
            import torch

            def f(x):
                return torch.ops.mylib.count(x)  # tm: TM111 gb_id=GB0033 reason=aten.mylib_count

            fast = torch.compile(f)
            """,
        ),
    )

    def propose(self, finding: Finding, ctx: Context) -> Result:
        option = _option(finding)
        if option == DYNAMIC and finding.where == Where.PROJECT:
            loop = propose_expert_loop(finding, ctx)  # `for e in mask.nonzero():` becomes `for e in range(n):`
            if loop is not None:
                return loop
        if option is None:
            return NoFix(
                finding,
                f"no config switch traces `{_operator(finding) or 'this operator'}`",
                "wrap the operator in a custom op with a fake (meta) implementation, or move it out of the "
                "compiled code",
            )
        return _propose(finding, ctx, option, check_flow=True)


class CaptureForBackend(Codemod):
    """Let the backend compile a function it gave up on, when a config switch is what it lacked.

    What it does:
        TM106: a compiled function that dynamo gave up on: the backend compiler raised while compiling its
        graph ("WON'T CONVERT"), so no graph is kept and the function runs eagerly on every call. The finding
        sits at the line the backend failed on. When the backend failed on an operator whose output shape or
        value depends on the data (`aten.nonzero`, `aten._local_scalar_dense`), the fix sets
        `torch._dynamo.config.capture_dynamic_output_shape_ops = True` (or `capture_scalar_outputs = True`)
        on the line before the script's `torch.compile(...)` / `model.compile()` call.

    Why is this bad:
        Nothing of the function is compiled, silently: the run looks normal but the speed-up never comes. When
        the detection backend (`--backend`) is not the script's own, the scan hands the failing graph to the
        script's backend too and says whether the two disagree.

    Example:
        def mask_hidden(h, m):          # m: a boolean mask; h[m] = ... is aten.nonzero under AOTAutograd
            h[m] = 0.0
            return h

        model = torch.compile(model)

    Fix:
        torch._dynamo.config.capture_dynamic_output_shape_ops = True
        model = torch.compile(model)

        For any other failure (a 0-d tensor used as an index: `aten._local_scalar_dense` from
        `self.alphas_cumprod[timestep]`) change the line the backend failed on: index with
        `timestep.view(1)` or `index_select`, or pass a Python int where that is what the code means.

    Fix safety:
        Safe for the switch: the same operators run, traced with symbolic sizes, and verification re-runs the
        script before anything is written. A hand fix that indexes with a one-element tensor returns a
        one-element tensor, not a 0-d one: check the shapes broadcasting gives downstream.
    """

    rules = ("TM106",)
    name = "capture-for-backend"
    INVALID = (
        Invalid(
            """
            import torch

            def mask_hidden(h, m):
                h[m] = 0.0
                return h  # tm: TM106 reason=failed_with_aten.nonzero.default

            def main(h, m):
                fast = torch.compile(mask_hidden)
                return fast(h, m)
            """,
            """
            import torch

            def mask_hidden(h, m):
                h[m] = 0.0
                return h  # tm: TM106 reason=failed_with_aten.nonzero.default

            def main(h, m):
                torch._dynamo.config.capture_dynamic_output_shape_ops = True
                fast = torch.compile(mask_hidden)
                return fast(h, m)
            """,
        ),
    )
    VALID = (
        Valid(
            """
            import torch

            def step(x, table):
                return table[x]  # tm: TM106 reason=failed_with_aten.index_put

            fast = torch.compile(step)
            """,
        ),
    )

    def propose(self, finding: Finding, ctx: Context) -> Result:
        option = _option(finding)
        if option == DYNAMIC and finding.where == Where.PROJECT:
            loop = propose_expert_loop(finding, ctx)  # `for e in mask.nonzero():` becomes `for e in range(n):`
            if loop is not None:
                return loop
        if option is None:
            return NoFix(
                finding,
                f"the backend failed on `{_operator(finding) or 'an operator'}`, which no config switch traces",
                "change the line the backend failed on (a 0-d tensor used as an index: index with `t.view(1)` or "
                "`index_select`, or pass a Python int); the reason says whether the script's own backend fails too",
            )
        return _propose(finding, ctx, option, check_flow=False)


class NestedGraphBreaks(Codemod):
    """Keep the frames around a nested graph break compiling, with a config switch set before compiling.

    What it does:
        A graph break inside a call that the compiled function inlined (a layer of a layer of the model calling a
        `torch.compiler.disable`d helper, a `print`, an unsupported builtin) that the scan saw recorded again by a
        frame it bubbled up through: at more than one depth of inlined calls (the finding's `nested`). When no
        source fix of the finding's own rule removes the break (a call to a disabled function, TM105; a
        data-dependent branch or an operator with no rewrite; TM199), or when verification refused the one
        that does, `torchmend fix` sets `torch._dynamo.config.nested_graph_breaks = True` on the line before
        the script's `torch.compile(...)` / `model.compile()` call: one line however many findings ask for it.
        Offered on the torch releases whose source was read and where it was measured (2.13, 2.14 and 2.15;
        `analysis/torch_api.py`); a run on another release gets no such proposal. A break that appears only
        after another change (the disabled helper that the host-random fix of TM110 makes) gets it in a
        second verification round, from the patched run's own findings.

    Why is this bad:
        By default dynamo resumes only in the frame it started compiling: a break three calls deep breaks
        that frame at its outermost call, runs the call eagerly, and compiles each callee as a frame of its
        own, which breaks again at the next call down. One break in the source is recorded once per frame it
        bubbles through, and each of those frames is cut into more graphs than the break needs.

    Example:
        class Block(torch.nn.Module):
            def forward(self, h):
                h = jitter(h)           # a torch.compiler.disable'd helper: a break, recorded by 3 frames
                return h.relu()

        model = torch.compile(model)

    Fix:
        torch._dynamo.config.nested_graph_breaks = True
        model = torch.compile(model)

        The break itself stays (the helper still runs eagerly); the frames above it keep compiling around it
        (fixtures/scan/nested_disabled_helper, three frames deep, torch 2.13, aot_eager: 3 breaks, 6 frames,
        5 graphs before; 1, 2 and 2 after, losses equal). Not proposed where the file sets the switch already, where the finding's own rule has a fix
        (unless verification refused it), or where every record found the break at the same depth (a frame
        compiled again, not a break bubbling up).

    Fix safety:
        Safe: no code changes, the same operations run in the same order; only where graphs begin and end moves.
        The setting holds for everything compiled after the line, and it is younger than dynamo's default
        path: verification re-runs the script and keeps it only when the findings it targets are recorded fewer
        times and the numbers match; a crash or a count that does not fall refuses it and nothing is written.
    """

    last_resort = True
    name = "nested-graph-breaks"
    INVALID = (
        Invalid(
            """
            import torch

            @torch.compiler.disable
            def jitter(h):
                return h + 0.0 * h.mean()

            class Block(torch.nn.Module):
                def forward(self, h):
                    h = jitter(h)  # tm: TM105 gb_id=GB0098 count=3 nested=2
                    return h.relu()

            model = torch.compile(Block())
            """,
            """
            import torch

            @torch.compiler.disable
            def jitter(h):
                return h + 0.0 * h.mean()

            class Block(torch.nn.Module):
                def forward(self, h):
                    h = jitter(h)  # tm: TM105 gb_id=GB0098 count=3 nested=2
                    return h.relu()

            torch._dynamo.config.nested_graph_breaks = True
            model = torch.compile(Block())
            """,
        ),
    )
    VALID = (
        # recorded at one depth only: nothing bubbled up
        Valid(
            """
            import torch

            @torch.compiler.disable
            def jitter(h):
                return h + 0.0 * h.mean()

            def step(h):
                return jitter(h).relu()  # tm: TM105 gb_id=GB0098 count=3 nested=0

            fast = torch.compile(step)
            """,
        ),
        # set already
        Valid(
            """
            import torch

            @torch.compiler.disable
            def jitter(h):
                return h + 0.0 * h.mean()

            class Block(torch.nn.Module):
                def forward(self, h):
                    return jitter(h).relu()  # tm: TM105 gb_id=GB0098 count=3 nested=2

            torch._dynamo.config.nested_graph_breaks = True
            model = torch.compile(Block())
            """,
        ),
    )

    def propose(self, finding: Finding, ctx: Context) -> Result:
        return propose_nested(finding, ctx)
