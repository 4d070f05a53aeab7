"""TM201 on a module attribute that holds a mode (a string, a bool), not a count: no buffer can stand for it, and the
reason says so (the evaluation models' `self.attention_type == 'block_sparse'` once read "does not subclass
torch.nn.Module"), with the remedy for a switch that keeps changing."""

from __future__ import annotations

from dataclasses import replace

import pytest

from torchmend.analysis.source import Context
from torchmend.codemods.base import NoFix
from torchmend.codemods.engine import Session
from torchmend.codemods.examples import EXAMPLE_ROOT, findings_from_markers

SOURCE = """\
import torch
from somewhere import PretrainedBase


class Encoder(PretrainedBase):
    def __init__(self, config):
        super().__init__(config)
        self.attention_type = "block_sparse"
        self.counter = 0

    def forward(self, x):
        if self.attention_type == "block_sparse" and x.shape[1] < 64:  # tm: TM201 variable=self.attention_type GUARD
            self.attention_type = "original_full"
        return x * 2
"""


@pytest.mark.parametrize(
    ("guard", "kind"),
    [
        ("self.attention_type=='block_sparse'", "a string"),
        ("self.attention_type==False", "a bool"),
        ("self.attention_type is None", "None"),
    ],
)
def test_a_mode_switch_is_named_as_one(guard: str, kind: str) -> None:
    path = "/tm-example/encoder.py"
    ctx = Context("/tm-example", lambda p: SOURCE)
    (finding,) = findings_from_markers(path, SOURCE.replace(" GUARD", ""), EXAMPLE_ROOT)
    (result,) = Session(ctx).propose([replace(finding, guard=guard)])
    assert isinstance(result, NoFix)
    assert f"`self.attention_type` holds {kind}" in result.reason and "mode switch" in result.reason
    assert "one-time switch" in result.advice and "before compiling" in result.advice


def test_a_number_still_goes_to_the_buffer_rules() -> None:
    path = "/tm-example/encoder.py"
    source = SOURCE.replace("variable=self.attention_type GUARD", "variable=self.counter")
    ctx = Context("/tm-example", lambda p: source)
    (finding,) = findings_from_markers(path, source, EXAMPLE_ROOT)
    (result,) = Session(ctx).propose([replace(finding, guard="self.counter == 3")])
    assert isinstance(result, NoFix) and "mode switch" not in result.reason
