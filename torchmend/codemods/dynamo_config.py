"""The `torch._dynamo.config` lines a fix places right before the user's compile call: the one module of these edits
(whether a file has one already is read by analysis/dynamo_config.py).

`torch._dynamo.config.<option> = True` for a switch, `torch._dynamo.config.<set>.add(<function>)` for a
member of a set such as `reorderable_logging_functions`. One line per setting: every finding that asks for
the same setting gets the very same edit, so the engine merges them into one proposal."""

from __future__ import annotations

import libcst as cst

from torchmend.analysis.dynamo_config import CONFIG
from torchmend.analysis.entry import CompileSite
from torchmend.analysis.source import SourceFile
from torchmend.codemods.base import Proposal, Safety
from torchmend.model import Finding


def _line(
    src: SourceFile, option: str, rest: str
) -> tuple[cst.SimpleStatementLine, tuple[tuple[str, str | None], ...]]:
    """`torch._dynamo.config.<option><rest>` as a statement, spelled as the file's torch release has the option and
    as the file imports torch."""
    target, imports = src.torch_expr(f"{CONFIG}.{option}")
    stmt = cst.parse_statement(f"{cst.Module([]).code_for_node(target)}{rest}\n")
    assert isinstance(stmt, cst.SimpleStatementLine)
    return stmt, imports


def switch_on(
    findings: tuple[Finding, ...], site: CompileSite, option: str, why: str, note: str, safety: Safety
) -> Proposal:
    """Set `torch._dynamo.config.<option> = True` right before the compile call."""
    return setting(findings, site, option, "True", why, note, safety)


def setting(
    findings: tuple[Finding, ...], site: CompileSite, option: str, value: str, why: str, note: str, safety: Safety
) -> Proposal:
    """Set `torch._dynamo.config.<option> = <value>` right before the compile call."""
    return _before_compile(findings, site, option, f" = {value}", why=why, note=note, safety=safety)


def add_member(
    findings: tuple[Finding, ...],
    site: CompileSite,
    option: str,
    member: str,
    *,
    why: str,
    note: str,
    alternative: str,
    safety: Safety,
) -> Proposal:
    """`torch._dynamo.config.<option>.add(<member>)` right before the compile call."""
    return _before_compile(
        findings, site, option, f".add({member})", why=why, note=note, safety=safety, alternative=alternative
    )


def _before_compile(
    findings: tuple[Finding, ...],
    site: CompileSite,
    option: str,
    edit: str,
    *,
    why: str,
    note: str,
    safety: Safety,
    alternative: str = "",
) -> Proposal:
    """The global setting `torch._dynamo.config.<option><edit>` as a line right before the compile call."""
    stmt, imports = _line(site.src, option, edit)
    return Proposal(
        findings,
        findings[0].rule,
        site.src.path,
        why=why,
        safety=safety,
        insert_before={site.statement: [stmt]},
        imports=imports,
        note=note,
        alternative=alternative,
        global_setting=True,
    )
