"""`torch._dynamo.config.nested_graph_breaks = True` before the compile call, for a graph break recorded again by
each frame it bubbled up through: a last resort, offered where the finding's own fix has none (or as the fallback
of a source fix verification refused), on the torch releases it was read and measured on."""

from __future__ import annotations

from dataclasses import replace

from torchmend.analysis.dynamo_config import CONFIG, has_switch
from torchmend.analysis.entry import compile_site_for
from torchmend.analysis.source import Context
from torchmend.analysis.torch_api import available
from torchmend.codemods.base import SAFE, Codemod, Invalid, NoFix, Result, Valid
from torchmend.codemods.dynamo_config import switch_on
from torchmend.model import Finding, Kind

NESTED = "nested_graph_breaks"
SHAPE = "nested-graph-breaks"  # Proposal.shape
WHY = (
    "let the frames that call into the break keep compiling around it: `torch._dynamo.config.nested_graph_breaks = "
    "True` before compiling"
)
NOTE = (
    "changes no code and no math: without it dynamo breaks each calling frame at its outermost call and compiles "
    "every callee as a frame of its own, which records the same break again (fewer graphs with it); the setting "
    "holds for everything compiled after this line, and dynamo's support for it is newer than the default path: "
    "verification re-runs the script and keeps it only if the counts fall and the numbers match"
)


def nested(finding: Finding) -> bool:
    """The trigger: a graph break recorded again by a frame it bubbled up through (`Finding.nested`: the records
    found it at more than one depth of inlined calls), not merely compiled again."""
    return finding.kind == Kind.GRAPH_BREAK and finding.nested > 0


def propose_nested(finding: Finding, ctx: Context) -> Result:
    """The setting for a nested break (`nested`), or a skipped NoFix saying why not: the release lacks it, no compile
    call to put it before, set already."""
    if not nested(finding):
        return NoFix(finding, "not a break recorded again by the frames it bubbled up through", skipped=True)
    if not available(f"{CONFIG}.{NESTED}", ctx.torch_version):
        release = ".".join(map(str, ctx.torch_version or ()))
        return NoFix(
            finding,
            f"torch {release} is not a release `{NESTED}` was read on (2.11 and newer)",
            skipped=True,
        )
    site = compile_site_for(finding, ctx)
    if isinstance(site, str):
        return NoFix(finding, site, f"set `torch._dynamo.config.{NESTED} = True` before compiling", skipped=True)
    if has_switch(site.src, NESTED):
        return NoFix(finding, f"{site.src.path} already sets `torch._dynamo.config.{NESTED}`", skipped=True)
    return replace(switch_on((finding,), site, NESTED, why=WHY, note=NOTE, safety=SAFE), shape=SHAPE, reduces=True)


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
