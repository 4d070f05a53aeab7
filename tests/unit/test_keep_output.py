"""A print or logger call in compiled code keeps its output where the run's torch reorders it (issue 30 item 5):
real libcst over real files in a temporary project; what each release reorders is in
torchmend/codemods/fixes/gate_output.py's docstring (measured on 2.13.0, 2.14.1, 2.15.0)."""

from __future__ import annotations

import textwrap
from pathlib import Path

from torchmend.analysis.source import Context
from torchmend.codemods.base import Proposal
from torchmend.codemods.engine import Session
from torchmend.model import Finding, Kind, Severity, Where
from torchmend.sources import read_source

SCRIPT = """
import logging

import torch
from torch import nn

log = logging.getLogger(__name__)


class Net(nn.Module):
    def forward(self, x):
        loss = (x * 2).pow(2).mean()
        {line}
        return loss


def main():
    compiled = torch.compile(Net())
    compiled(torch.randn(4))
"""


def _fix(tmp_path: Path, line: str, rule: str = "TM101", version: tuple[int, ...] = (2, 13)) -> tuple[Proposal, str]:
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(SCRIPT).lstrip("\n").replace("{line}", line))
    finding = Finding(
        rule=rule,
        kind=Kind.GRAPH_BREAK,
        title="t",
        file="train.py",
        line=12,
        function="forward",
        path=str(script),
        where=Where.PROJECT,
        reason="(test)",
        count=2,
        severity=Severity.FIX,
    )
    session = Session(Context(str(tmp_path), read_source, torch_version=version))
    (p,) = session.propose([finding])
    assert isinstance(p, Proposal), p
    session.accept(p)
    return p, session.text(str(script))


REORDER = "    torch._dynamo.config.reorderable_logging_functions.add(print)\n    compiled = torch.compile(Net())"


def test_a_print_statement_is_reordered_not_gated(tmp_path: Path) -> None:
    p, text = _fix(tmp_path, 'print("loss", loss)')
    assert p.safety == "safe" and "keep the print's output" in p.why
    assert REORDER in text and 'print("loss", loss)' in text and "is_compiling" not in text
    assert p.fallbacks and p.fallbacks[0].safety == "unsafe"  # gating, should verification refuse the reordering


def test_an_item_formatted_in_an_f_string_becomes_a_0dim_tensor(tmp_path: Path) -> None:
    """`f"{loss.item():.4f}"` crashes dynamo's reordering on 2.14+ and keeps its break on 2.13."""
    p, text = _fix(tmp_path, 'print(f"loss {loss.item():.4f}", loss.item())')
    assert REORDER in text and 'print(f"loss {loss.reshape(()):.4f}", f"{loss.reshape(())}")' in text
    assert "reshape(())" in p.note


def test_a_print_torch_cannot_reorder_is_gated_and_says_why(tmp_path: Path) -> None:
    p, text = _fix(tmp_path, 'print("loss", loss, sep="=")')
    assert p.safety == "unsafe" and "keyword argument" in p.why and "output is gone" in p.note
    assert "if not torch.compiler.is_compiling():" in text and "reorderable" not in text
    p, text = _fix(tmp_path, 'print("loss", loss.item() * 2)')
    assert p.safety == "unsafe" and "is_compiling" in text


def test_a_logger_method_is_reordered_from_2_14_and_gated_before(tmp_path: Path) -> None:
    line = 'log.info(f"loss {loss:.4f}")'
    p, text = _fix(tmp_path, line, "TM102", (2, 14))
    assert p.safety == "safe" and "reorderable_logging_functions.add(log.info)\n    compiled" in text
    p, text = _fix(tmp_path, line, "TM102", (2, 13))
    assert p.safety == "unsafe" and "from torch 2.14" in p.why and "is_compiling" in text
    p, text = _fix(tmp_path, 'log.info("loss %s", loss)', "TM102", (2, 15))  # a tensor %-argument: still breaks
    assert p.safety == "unsafe" and "is_compiling" in text
