"""The torch APIs the codemods write into your code, spelled as your torch release has them.

A codemod names an API by its newest spelling after `torch.` (`compiler.is_compiling`); `SourceFile.torch_expr`
looks it up here with the run's torch release (`Context.torch_version`: the scanned run's, or the installed
torch's for lint) and writes the spelling that release has. An API with no row is written as named.

Every row was read from the wheels' source (2.11.0 on the H100 machine, 2.13.0, 2.14.1, 2.15.0), and
`python scripts/torch_api.py --check` resolves each row that holds for the installed torch on it (the tests run it).
What torchmend writes is spelled the same on all of them today; the APIs that do differ (docs/graph-break-ids.md:
`torch.compile(shapes_spec=)` of 2.13 is `dynamic_shapes=` from 2.14, `torch.compiler.nonstrict_trace` is public
from 2.14) are ones no codemod writes, so they have no row. Pure: no torch, no libcst.
"""

from __future__ import annotations

from dataclasses import dataclass

Version = tuple[int, ...]


@dataclass(frozen=True)
class Spelling:
    api: str  # the newest spelling after `torch.`: what codemods ask for
    dotted: str  # the spelling after `torch.` on the releases of this row
    since: Version  # first release it was read from
    until: Version | None = None  # first release it no longer holds for (None: still current)

    def holds(self, version: Version) -> bool:
        return version[:2] >= self.since and (self.until is None or version[:2] < self.until)


V2_11, V2_13 = (2, 11), (2, 13)

SPELLINGS: tuple[Spelling, ...] = (
    Spelling("compiler.is_compiling", "compiler.is_compiling", V2_11),  # gates print / logging / requires_grad
    Spelling("_dynamo.maybe_mark_dynamic", "_dynamo.maybe_mark_dynamic", V2_11),  # TM204; not in torch.compiler
    Spelling("_dynamo.config.capture_scalar_outputs", "_dynamo.config.capture_scalar_outputs", V2_11),  # TM111
    Spelling(
        "_dynamo.config.capture_dynamic_output_shape_ops", "_dynamo.config.capture_dynamic_output_shape_ops", V2_11
    ),  # TM111, TM106
    Spelling(
        "_dynamo.config.reorderable_logging_functions", "_dynamo.config.reorderable_logging_functions", V2_11
    ),  # TM101
    Spelling(
        "_dynamo.config.assume_static_by_default", "_dynamo.config.assume_static_by_default", V2_11
    ),  # TM204 (a tensor the compiled code makes)
    Spelling("cond", "cond", V2_11),  # TM103 (branch_to_where/cond.py)
    Spelling("_assert_async", "_assert_async", V2_11),  # TM108
    Spelling("compiler.disable", "compiler.disable", V2_11),  # TM110: a helper drawing host random numbers
    Spelling(
        "_dynamo.config.ignore_logging_functions", "_dynamo.config.ignore_logging_functions", V2_13
    ),  # TM102 in a library (fixes/library_side.py)
    # a break bubbling out of nested calls (compile_config/nested.py). Read and measured on 2.13, 2.14 and 2.15; on
    # 2.11 the H100 machine's wheel has it too (`hasattr`, default False, 2026-11-27): verification judges each run
    Spelling("_dynamo.config.nested_graph_breaks", "_dynamo.config.nested_graph_breaks", V2_11),
    # the "force_eager" and "default" stances around a first call (codemods/fixes/first_call.py): read in 2.13's,
    # 2.14's and 2.15's torch/compiler; on 2.11 the H100 machine's wheel has set_stance too (2026-11-27)
    Spelling("compiler.set_stance", "compiler.set_stance", V2_11),
)


def spelling(api: str, version: Version | None, table: tuple[Spelling, ...] | None = None) -> str:
    """`api` (its newest spelling) as `version` spells it: the row that holds for it; a release before every row
    read, the oldest row's; after them, or unknown (None), the newest's. An API without rows is `api` itself.
    `table`: SPELLINGS unless given."""
    rows = sorted((s for s in (SPELLINGS if table is None else table) if s.api == api), key=lambda s: s.since)
    if not rows:
        return api
    if version is None:
        return rows[-1].dotted
    held = [s for s in rows if s.holds(version)]
    if held:
        return held[-1].dotted
    return rows[0].dotted if version[:2] < rows[0].since else rows[-1].dotted


def available(api: str, version: Version | None, table: tuple[Spelling, ...] | None = None) -> bool:
    """Whether `version` has `api` as far as the rows say: a row holds for it (a release older than every row read
    does not). Unknown (None) is the newest release read, as for `spelling()`. An API without rows
    is not known to be anywhere: a setting that exists only on some releases gets rows, and is offered on those
    alone. `table`: SPELLINGS unless given."""
    rows = sorted((s for s in (SPELLINGS if table is None else table) if s.api == api), key=lambda s: s.since)
    if not rows:
        return False
    if version is None:
        return rows[-1].until is None
    return any(s.holds(version) for s in rows)
