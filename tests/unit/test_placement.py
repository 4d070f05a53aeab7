"""Compile placement from a module tree and the breaks' stacks (profiler/placement.py), on hand-made trees: the
rows are what modtree.py emits (name, class, forward's file, first and last line, own parameters, callable)."""

from __future__ import annotations

from torchmend.profiler.placement import _Node, place
from torchmend.profiler.traceparse import Frame

LIB = "/site-packages/lib/model.py"


def _tree() -> list[_Node]:
    return [
        _Node("", "Detector", LIB, 1, 9, 0, True),
        _Node("backbone", "Backbone", LIB, 10, 19, 0, True),
        _Node("backbone.blocks", "ModuleList", "", 0, 0, 0, False),
        _Node("backbone.blocks.0", "Block", LIB, 20, 29, 500, True),
        _Node("backbone.blocks.1", "Block", LIB, 20, 29, 500, True),
        _Node("head", "Head", LIB, 30, 39, 0, True),
        _Node("head.cls", "Linear", "/torch/nn/linear.py", 100, 104, 90, True),
        _Node("head.tiny", "Linear", "/torch/nn/linear.py", 100, 104, 5, True),
    ]


def test_the_largest_clean_submodules_are_placed_and_a_tiny_layer_inside_a_broken_one_is_not() -> None:
    # a break in a helper the head's forward calls: the stack passes through Detector.forward and Head.forward
    frames = {Frame(LIB, 5, "forward"), Frame(LIB, 33, "forward"), Frame("/site-packages/lib/ops.py", 7, "nms")}
    p = place(_tree(), frames)
    assert p is not None
    assert p.modules == ("backbone", "head.cls") and p.broken == ("head",)
    assert p.share == round(1090 / 1095, 4)
    # torch's own Linear is not compiled alone: `module.compile()` on one compiles nothing
    own = place(_tree(), frames, torch_root="/torch")
    assert own is not None and own.modules == ("backbone",) and own.share == round(1000 / 1095, 4)


def test_a_break_in_one_block_breaks_every_block_of_its_class_and_the_containers_above() -> None:
    frames = {Frame(LIB, 5, "forward"), Frame(LIB, 15, "forward"), Frame(LIB, 25, "forward")}
    p = place(_tree(), frames)
    assert p is not None and p.modules == ("head",) and p.broken == ("backbone.blocks.0", "backbone.blocks.1")


def test_no_placement_where_the_model_did_not_break_or_nothing_inside_compiled_cleanly() -> None:
    assert place(_tree(), set()) is None
    everything = {Frame(LIB, line, "forward") for line in (5, 15, 25, 35)} | {Frame("/torch/nn/linear.py", 102, "f")}
    assert place(_tree(), everything) is None


def test_a_local_placement_goes_before_the_global_setting_of_the_breaks_own_rule() -> None:
    """TM111's own fix is a global capture switch; the placement, a local change, is proposed first and the switch
    becomes its fallback (tried only when verification refuses the placement). Without a placement, the switch."""
    from torchmend.codemods.base import Proposal
    from torchmend.codemods.examples import fix_text

    source = (
        "import torch\n\ndef forward(self, h):\n"
        "    keep = torch.nonzero(h[:, 0] > 0)  # tm: TM111 gb_id=GB0036\n    return h[keep]\n\n"
        "model = torch.compile(model){}\n"
    )
    text, results = fix_text(source.format("  # tm-placement backbone model=Detector"))
    (p,) = [r for r in results if isinstance(r, Proposal)]
    assert p.shape == "compile-placement" and not p.global_setting
    assert [fb.global_setting for fb in p.fallbacks] == [True]
    assert "capture_dynamic_output_shape_ops" in p.fallbacks[0].why
    assert "model.backbone.compile()\n" in text and "capture_dynamic_output_shape_ops" not in text

    text, results = fix_text(source.format(""))
    (p,) = [r for r in results if isinstance(r, Proposal)]
    assert p.global_setting and "torch._dynamo.config.capture_dynamic_output_shape_ops = True\n" in text
