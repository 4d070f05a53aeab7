"""`if not torch.compiler.is_compiling():` around a statement: the gate several codemods use (print, logging,
requires_grad), and the check that a statement already sits behind one."""

from __future__ import annotations

import libcst as cst

from torchmend.analysis.dynamo_tables import IS_COMPILING
from torchmend.analysis.source import SourceFile


def already_gated(src: SourceFile, stmt: cst.CSTNode) -> bool:
    """Whether an enclosing `if` of the same function tests is_compiling()."""
    for anc in src.ancestors(stmt):
        if isinstance(anc, cst.If):
            for call in src.nodes_in(anc.test, cst.Call):
                if src.qualified_names(call.func) & IS_COMPILING:
                    return True
        if isinstance(anc, cst.FunctionDef):
            return False
    return False


def gate(
    src: SourceFile, stmt: cst.SimpleStatementLine | cst.BaseCompoundStatement
) -> tuple[cst.If, tuple[tuple[str, str | None], ...]]:
    """`stmt` under `if not torch.compiler.is_compiling():`, its blank lines and comments kept above, and the
    imports that needs."""
    is_compiling, imports = src.torch_expr("compiler.is_compiling")
    gated = cst.If(
        test=cst.UnaryOperation(cst.Not(), cst.Call(is_compiling)),
        body=cst.IndentedBlock([stmt.with_changes(leading_lines=[])]),
        leading_lines=stmt.leading_lines,
    )
    return gated, imports
