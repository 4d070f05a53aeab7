"""torch._dynamo.config.nested_graph_breaks as a last resort (codemods/fixes/compile_config/nested.py): the scan
counts the records of a break made while inlining a call to it (`Finding.nested`, from a real run recorded on torch
2.13), the setting is offered only on the releases it was read on, as a break's own fix when its rule has none and
as the last fallback of a source fix, and verification counts it as helping when its findings are recorded fewer
times."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

from conftest import ROOT

from torchmend.analysis.torch_api import Spelling, available
from torchmend.codemods.examples import fix_text, proposals
from torchmend.codemods.fixes.compile_config.nested import SHAPE
from torchmend.profiler import pathmap
from torchmend.profiler.events import read_events
from torchmend.profiler.findings import analyse
from torchmend.profiler.traceparse import parse_graph_break
from torchmend.verify.attribution import attribute

FIXTURE = ROOT / "fixtures" / "nested_graph_breaks"
NESTED = textwrap.dedent(
    """
    import torch

    @torch.compiler.disable
    def jitter(h):
        return h + 0.0 * h.mean()

    class Block(torch.nn.Module):
        def forward(self, h):
            h = jitter(h)  # tm: TM105 gb_id=GB0098 count=3 nested=2
            return h.relu()

    model = torch.compile(Block())
    """
).lstrip()
# a nonzero() whose own fix is a config switch: the nested setting is only its last fallback
ROUTED = textwrap.dedent(
    """
    import torch

    def route(x, w):
        hit = (x > 0).nonzero()  # tm: TM111 gb_id=GB0036 count=3 nested=2
        return x[hit[:, 0]] * w

    fast = torch.compile(route)
    """
).lstrip()


def _recorded() -> list[dict]:
    """The recorded run, its paths moved from the checkout it was recorded in to this one."""
    events = read_events(FIXTURE / "events-torch2.13.jsonl")
    found = re.search(r'"([^"]*)/fixtures/nested_graph_breaks/', json.dumps(events))
    assert found is not None
    return pathmap.apply(events, [pathmap.Mapping(found.group(1), str(ROOT))])


def test_a_break_three_frames_deep_is_recorded_by_each_frame_it_bubbles_through() -> None:
    events = _recorded()
    depths = [parse_graph_break(e["text"]).inlined for e in events if e.get("ev") == "graph_break"]
    assert sorted(depths) == [0, 1, 2]  # Net.forward inlined 2 calls to reach it, Layer.forward 1, Block.forward 0
    findings, summary = analyse(events, FIXTURE / "disabled_helper")
    (f,) = findings
    assert (f.rule, f.line, f.count, f.nested) == ("TM105", 17, 3, 2)
    assert (summary.graph_breaks, summary.frames_compiled, summary.graphs) == (3, 6, 5)


def test_offered_only_on_the_releases_read() -> None:
    api = "_dynamo.config.nested_graph_breaks"
    assert [available(api, v) for v in ((2, 10), (2, 11), (2, 12), (2, 13), (2, 15), (2, 16), None)] == [
        False, True, True, True, True, True, True,
    ]  # fmt: skip
    assert not available("_dynamo.config.no_such_setting", (2, 13))
    ended = (Spelling("x.y", "x.y", (2, 13), until=(2, 15)),)
    assert [available("x.y", v, ended) for v in ((2, 13), (2, 14), (2, 15), None)] == [True, True, False, False]
    assert not proposals(fix_text(NESTED, torch_version=(2, 10))[1])
    text, results = fix_text(NESTED, torch_version=(2, 13))
    (p,) = proposals(results)
    assert "torch._dynamo.config.nested_graph_breaks = True\nmodel = torch.compile" in text
    assert p.safety == "safe" and p.reduces and p.shape == SHAPE
    assert "no source-level fix for TM105" in p.alternative  # why the break itself stays


def test_a_source_fix_keeps_its_place_and_gets_the_setting_as_its_last_fallback() -> None:
    text, results = fix_text(ROUTED, torch_version=(2, 13))
    (p,) = proposals(results)
    assert "capture_dynamic_output_shape_ops = True" in text and "nested_graph_breaks" not in text
    assert [fb.shape for fb in p.fallbacks][-1:] == [SHAPE]


def test_verification_counts_fewer_records_as_help() -> None:
    path = str(Path("/tm-example/example.py"))
    text, results = fix_text(NESTED, torch_version=(2, 13))
    (p,) = proposals(results)
    before = p.findings[0]
    fewer = attribute([p], [replace_count(before, 1)], {})
    same = attribute([p], [before], {})
    gone = attribute([p], [], {})
    assert fewer[0].helped and fewer[0].reduced == ((before, 1),) and not fewer[0].remaining
    assert not same[0].helped and same[0].remaining == (before,)
    assert gone[0].helped and gone[0].removed == (before,)
    assert before.path == path


def replace_count(f, n):
    from dataclasses import replace

    return replace(f, count=n, nested=0)
