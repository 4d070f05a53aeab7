"""Graph breaks of real model code that get the right words rather than a rewrite: a computed tensor made an autograd
leaf and returned in one expression (GB8985, TM109), and PyTorch's GB ids with advice of their own when no codemod fixes the
finding's rule (rules.GB_ADVICE: GB0264, an nn.Parameter built in forward)."""

from __future__ import annotations

from pathlib import Path

from torchmend.analysis.source import Context
from torchmend.codemods.base import NoFix
from torchmend.codemods.engine import Session
from torchmend.codemods.examples import EXAMPLE_ROOT, findings_from_markers, fix_text


def test_a_computed_leaf_returned_in_one_expression_gets_its_own_reason() -> None:
    """GB8985 on a computed tensor (`return (q @ k.T).detach().mul(0.5).requires_grad_()`, TM109): why not, and what
    to write instead (a fresh factory's leaf is rewritten: fixtures/codemods/TM109/leaf_returned)."""
    text = (Path(__file__).resolve().parents[2] / "fixtures/codemods/TM109/noop_computed_leaf.in.py").read_text()
    _, results = fix_text(text)
    (why,) = [r for r in results if isinstance(r, NoFix)]
    assert "GB8985" in why.reason and "new autograd leaf" in why.reason, why.reason
    assert ".detach()" in why.advice


def test_a_graph_break_without_a_codemod_gets_the_advice_of_its_gb_id() -> None:
    """GB0264 (nn.Parameter built inside forward), a generic TM199: the advice names the shape, not the rule's."""
    text = "import torch\n\ndef f(x):\n    w = torch.nn.Parameter(x)  # tm: TM199 gb_id=GB0264\n    return w\n"
    path = "/tm-example/example.py"
    (result,) = Session(Context("/tm-example", lambda p: text)).propose(findings_from_markers(path, text, EXAMPLE_ROOT))
    assert isinstance(result, NoFix) and "GB0264" in result.reason, result
    assert "build it in `__init__`" in result.advice


def test_gb0264_gets_the_advice_of_the_library_function_it_is_in() -> None:
    """GB0264 has two shapes in real model code: a submodule cast in forward (`Module._apply` builds the Parameter)
    and a module built in forward (an attention type switched on the fly: the module's `__init__`)."""
    text = (
        "import torch\n\nclass Router(torch.nn.Module):\n    def forward(self, h):\n"
        "        self.classifier = self.classifier.to(self.dtype)  # tm: TM199 gb_id=GB0264 where=library function=_apply\n"
        "        self.set_attention_type('full')  # tm: TM199 gb_id=GB0264 where=library function=__init__\n"
        "        return self.classifier(h)\n"
    )
    path = "/tm-example/example.py"
    cast, built = Session(Context("/tm-example", lambda p: text)).propose(
        findings_from_markers(path, text, EXAMPLE_ROOT)
    )
    assert isinstance(cast, NoFix) and "cast the model once before torch.compile" in cast.advice, cast
    assert isinstance(built, NoFix) and "config value that selects it" in built.advice, built


def test_a_disabled_host_random_helper_call_gets_the_measured_remedy() -> None:
    """GB0098 (TM105, no codemod) is what TM110's fix leaves at the call of the helper it disabled: the advice says
    to keep the decorator and what removes the break with NumPy's stream kept (benchmarks, docs/DESIGN.md)."""
    text = "import torch\n\ndef f(h):\n    m = span_mask(h.shape)  # tm: TM105 gb_id=GB0098\n    return h * m\n"
    (result,) = Session(Context("/tm-example", lambda p: text)).propose(
        findings_from_markers("/tm-example/example.py", text, EXAMPLE_ROOT)
    )
    assert isinstance(result, NoFix) and "GB0098" in result.reason, result
    assert "`mask_time_indices=`" in result.advice and "capture_dynamic_output_shape_ops" in result.advice
