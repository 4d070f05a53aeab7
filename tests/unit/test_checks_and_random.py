"""Rules for checks and randomness in compiled code: which break is TM108 / TM109 / TM110 (from PyTorch's texts and
the break's source line), and the reasons `fix` gives where it refuses (a random skip, a requires_grad=False)."""

from __future__ import annotations

from pathlib import Path

import pytest

from torchmend.codemods.examples import fix_text, proposals, unfixed
from torchmend.profiler.classify import classify_break
from torchmend.profiler.traceparse import GraphBreak

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "codemods"

BRANCHING = (
    "Data-dependent branching",
    "Detected data-dependent branching (e.g. `if my_tensor.sum() > 0:`).",
    "GB0170",
)
ITEM = (
    "Unsupported Tensor.item() call with capture_scalar_outputs=False",
    "Dynamo does not support Tensor.item()",
    "GB0124",
)
SCALAR = ("Data dependent operator", "Operator `aten._local_scalar_dense.default` has a non-Tensor output", "GB0033")
SETATTR = ("setattr() on Tensor.requires_grad", "setattr() on Tensor.requires_grad not supported.", "GB0206")


def _gb(kind: tuple[str, str, str]) -> GraphBreak:
    gb_type, explanation, gb_id = kind
    return GraphBreak("/p/model.py", 10, gb_type, explanation, gb_id, None)


@pytest.mark.parametrize(
    "kind, source, rule",
    [
        (BRANCHING, "assert x_max.isnan().sum() == 0 and x_min.isnan().sum() == 0, (", "TM108"),
        (ITEM, "    assert ids.max().item() < vocab", "TM108"),
        (BRANCHING, "if x.sum() > 0 and flag:", "TM103"),
        (BRANCHING, "", "TM103"),  # no source line (a recorded run from another machine): the GB id decides
        (ITEM, "n = int(x.sum().item())", "TM104"),
        (SETATTR, "hidden_states.requires_grad = True", "TM109"),
        (SCALAR, "epsilon = np.random.rand(1).item()", "TM110"),
        (SCALAR, "idx = numpy.random.choice(", "TM110"),
        (SCALAR, "k = int(counts.max())", "TM111"),  # a data-dependent operator: the config fix decides
    ],
)
def test_break_rule_from_its_texts_and_line(kind, source, rule):
    assert classify_break(_gb(kind), "project", source) == rule


def test_layerdrop_skip_is_a_random_stream_change_applied_only_when_allowed():
    source = (FIXTURES / "TM103" / "layerdrop_random_skip.in.py").read_text()
    text, results = fix_text(source, name="encoder.py", random_stream=False)
    (p,) = proposals(results)
    assert text == source and p.safety == "random-stream" and p.shape == "random-skip-where"
    assert "changes the random stream, keeps the distribution" in p.note and "torch.rand([])" in p.why
    text, _ = fix_text(source, name="encoder.py")
    assert "h = torch.where(torch.as_tensor(skip == 0), layer(h), h)" in text


def test_layerdrop_flag_set_in_a_branch_is_one_random_stream_change_with_its_test():
    """`if r < p: flag = True` alone has an exact torch.where, but that only moves the break to `if not flag:`: both
    are rewritten together, as a random-stream change (nothing written without the opt-in)."""
    source = (FIXTURES / "TM103" / "layerdrop_flag_keyword_call.in.py").read_text()
    text, results = fix_text(source, name="encoder.py", random_stream=False)
    (p,) = proposals(results)
    assert text == source and p.safety == "random-stream" and p.shape == "random-skip-where"
    assert "instead of `if not skipped:` (line 23" in p.why
    # the flag read in the loop other than by its test: only the exact rewrite of the flag is offered, as before
    source = source.replace(
        "            if not skipped:\n", "            self.last_skipped = skipped\n            if not skipped:\n"
    )
    text, results = fix_text(source, name="encoder.py", random_stream=False)
    (p,) = proposals(results)
    assert p.safety == "safe" and "if not skipped:" in text
    # the flag tested with an else that sets None: refused, since the flag's rewrite alone only moves the break
    source = (FIXTURES / "TM103" / "layerdrop_flag_keyword_call.in.py").read_text()
    source = source.replace(
        "            if not skipped:\n", "            if skipped:\n                out = None\n            else:\n"
    )
    text, results = fix_text(source, name="encoder.py")
    (why,) = unfixed(results)
    assert text == source and not proposals(results)
    assert why.reason.startswith("the skip's flag `skipped` is tested on line 23 in another shape")


def test_layerdrop_continue_followed_by_more_than_assignments_says_which_line():
    source = (FIXTURES / "TM103" / "layerdrop_continue.in.py").read_text()
    source = source.replace(
        "                mask=mask,\n            )\n",
        "                mask=mask,\n            )\n            if self.keep_all:\n                self.seen += (x,)\n",
    )
    text, results = fix_text(source, name="stack.py")
    (why,) = unfixed(results)
    assert text == source and "that `continue`s: line 25 after the random `continue` is not a plain" in why.reason


def test_layerdrop_skip_the_where_cannot_take_is_refused_with_its_reason_up_front():
    source = (FIXTURES / "TM103" / "layerdrop_random_skip.in.py").read_text()
    source = source.replace(
        "                h = layer(h)\n", "                h = layer(h)\n            else:\n                h = None\n"
    )
    text, results = fix_text(source, name="encoder.py")
    assert text == source and not proposals(results)
    (why,) = unfixed(results)
    assert why.reason.startswith("the test depends on a random draw (`torch.rand([])`, line 16)")
    assert "random stream" in why.reason and "outside the compiled model" in why.advice


def test_random_stream_changes_need_their_own_opt_in():
    from torchmend.analysis.source import Context
    from torchmend.codemods.engine import Session
    from torchmend.codemods.review import ACCEPTED, REJECTED, accept_all

    source = (FIXTURES / "TM103" / "layerdrop_random_skip.in.py").read_text()
    _, results = fix_text(source, name="encoder.py", random_stream=False)
    (p,) = proposals(results)
    session = Session(Context("/tm-example", lambda _: source))
    (d,) = accept_all(session, [p], unsafe=True)
    assert d.outcome == REJECTED and "--allow-random-stream" in d.detail
    (d,) = accept_all(session, [p], unsafe=False, random_stream=True)
    assert d.outcome == ACCEPTED


def test_requires_grad_false_is_refused():
    source = "import torch\n\n\ndef f(x):\n    x.requires_grad = False  # tm: TM109\n    return x * 2\n"
    text, results = fix_text(source, name="f.py")
    (why,) = unfixed(results)
    assert text == source and "detach" in why.advice


def test_a_draw_imported_by_name_or_alias_is_host_random(tmp_path) -> None:
    """`from random import random` then `random() < p` (x_transformers' layer dropout), NumPy under another name:
    the imports say what the names are; a local `random` that is no import is not a draw."""
    from torchmend.profiler.host_random import draws_host_random

    src = tmp_path / "layers.py"
    src.write_text(
        "from random import random\n"
        "import numpy as onp\n"
        "from numpy import random as npr\n"
        "def forward(x, p, layers):\n"
        "    if random() < p:\n"
        "        x = x * onp.random.rand()\n"
        "    k = npr.randint(3)\n"
        "    random_ = layers.random()\n"
        "    return x\n"
    )
    lines = src.read_text().splitlines()
    assert [n for n in range(1, 10) if draws_host_random(str(src), n, lines[n - 1])] == [5, 6, 7]
    gb_type, explanation, gb_id = BRANCHING
    brk = GraphBreak(str(src), 5, gb_type, explanation, gb_id, None)
    assert classify_break(brk, "library", lines[4], path=str(src)) == "TM110"  # was TM103 by the line's words
