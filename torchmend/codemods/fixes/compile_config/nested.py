"""`torch._dynamo.config.nested_graph_breaks = True` before the compile call, for a graph break recorded again by
each frame it bubbled up through: a last resort, offered where the finding's own fix has none (or as the fallback
of a source fix verification refused), on the torch releases it was read and measured on."""

from __future__ import annotations

from dataclasses import replace

from torchmend.analysis.dynamo_config import CONFIG, has_switch
from torchmend.analysis.entry import compile_site_for
from torchmend.analysis.source import Context
from torchmend.analysis.torch_api import available
from torchmend.codemods.base import SAFE, NoFix, Result
from torchmend.codemods.fixes.compile_config.settings import switch_on
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
