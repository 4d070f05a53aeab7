"""What a lint check reports: a `Hit` (rule, node, confidence, what lint saw), shared by the check modules."""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from torchmend.analysis.source import SourceFile
from torchmend.model import Confidence

LIKELY, POSSIBLE = Confidence.LIKELY, Confidence.POSSIBLE


@dataclass(frozen=True)
class Hit:
    rule: str
    node: cst.CSTNode  # where: its first line is the finding's line
    confidence: Confidence
    what: str  # what lint saw, for the reason
    variable: str | None = None
    call_site: tuple[SourceFile, cst.CSTNode] | None = None  # the call that passes the value in (TM202)
    once: bool = False  # a recompile that happens once (scan's "one-time": torch then compiles the value dynamic)


def short(src: SourceFile, node: cst.CSTNode, width: int = 60) -> str:
    code = " ".join(src.code(node).split())
    return code if len(code) <= width else code[: width - 1] + "…"
