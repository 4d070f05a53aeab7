"""The config lines a fix places right before the user's compile call, and whether a file already has one.

`torch._dynamo.config.<option> = True` for a switch, `torch._dynamo.config.<set>.add(<function>)` for a
member of a set such as `reorderable_logging_functions`. One line per setting: every finding that asks for
the same setting gets the very same edit, so the engine merges them into one proposal."""

from __future__ import annotations

import libcst as cst
from libcst.helpers import get_full_name_for_node

from torchmend.codemods.analysis.entry import CompileSite
from torchmend.codemods.base import Proposal
from torchmend.codemods.source import SourceFile
from torchmend.model import Finding

CONFIG = "_dynamo.config"


def _config_target(src: SourceFile, node: cst.BaseExpression) -> str | None:
    """`torch._dynamo.config.X` (any spelling of torch) -> `X`."""
    name = get_full_name_for_node(node) or ""
    for q in src.qualified_names(node) | {name}:
        head, _, option = q.rpartition(".")
        if head.endswith(CONFIG) and head.split(".")[0] in ("torch", src.torch_alias or "torch"):
            return option
    return None


def has_switch(src: SourceFile, option: str) -> bool:
    """The file already sets `torch._dynamo.config.<option> = ...`."""
    for assign in src.nodes_in(src.module, cst.Assign):
        for t in assign.targets:
            if _config_target(src, t.target) == option:
                return True
    return False


def has_member(src: SourceFile, option: str, member: str) -> bool:
    """The file already does `torch._dynamo.config.<option>.add(<member>)`."""
    for call in src.nodes_in(src.module, cst.Call):
        func = call.func
        if (
            isinstance(func, cst.Attribute)
            and func.attr.value == "add"
            and _config_target(src, func.value) == option
            and call.args
            and get_full_name_for_node(call.args[0].value) == member
        ):
            return True
    return False


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
    findings: tuple[Finding, ...], site: CompileSite, option: str, why: str, note: str, safety: str
) -> Proposal:
    """Set `torch._dynamo.config.<option> = True` right before the compile call."""
    return setting(findings, site, option, "True", why, note, safety)


def setting(
    findings: tuple[Finding, ...], site: CompileSite, option: str, value: str, why: str, note: str, safety: str
) -> Proposal:
    """Set `torch._dynamo.config.<option> = <value>` right before the compile call."""
    stmt, imports = _line(site.src, option, f" = {value}")
    return Proposal(
        findings,
        findings[0].rule,
        site.src.path,
        why=why,
        safety=safety,
        insert_before={site.statement: [stmt]},
        imports=imports,
        note=note,
    )


def add_member(
    findings: tuple[Finding, ...],
    site: CompileSite,
    option: str,
    member: str,
    *,
    why: str,
    note: str,
    alternative: str,
    safety: str,
) -> Proposal:
    """`torch._dynamo.config.<option>.add(<member>)` right before the compile call."""
    stmt, imports = _line(site.src, option, f".add({member})")
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
    )
