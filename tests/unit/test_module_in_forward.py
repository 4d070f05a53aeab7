"""TM199's modules built in forward (GB0264, GB0119): the switch that rebuilds attention modules is run eagerly.

The fixture pair's proposal decorates the method forward calls, with the block's own switch as the fallback; compiled
in-process on the installed torch, the rewritten encoder breaks fewer times on its first call and computes the same.
"""

from __future__ import annotations

import types
from pathlib import Path

import pytest

from torchmend.analysis.source import Context
from torchmend.codemods.base import Proposal
from torchmend.codemods.engine import Session, apply
from torchmend.codemods.examples import EXAMPLE_ROOT, findings_from_markers

PAIR = Path(__file__).resolve().parents[2] / "fixtures" / "codemods" / "TM199" / "attention_switch_in_forward"


def _proposal(source: str) -> tuple[Context, Proposal]:
    path = "/tm-example/switch.py"
    ctx = Context("/tm-example", lambda p: source)
    found = [
        r for r in Session(ctx).propose(findings_from_markers(path, source, EXAMPLE_ROOT)) if isinstance(r, Proposal)
    ]
    assert found
    return ctx, found[0]


def _decorated(text: str) -> list[str]:
    """`Class.method` of every def right under a `@torch.compiler.disable` line."""
    names, cls = [], ""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("class "):
            cls = line.split()[1].split("(")[0].rstrip(":")
        if line.strip() == "@torch.compiler.disable":
            names.append(f"{cls}.{lines[i + 1].split('def ')[1].split('(')[0]}")
    return names


def test_the_switch_forward_calls_is_disabled_and_the_blocks_switch_is_the_fallback() -> None:
    source = PAIR.with_suffix(".in.py").read_text()
    ctx, p = _proposal(source)
    assert _decorated(apply(ctx.file(p.path), [p])) == ["Encoder.use"]
    assert p.safety == "safe" and len(p.fallbacks) == 1
    assert _decorated(apply(ctx.file(p.path), [p.fallbacks[0]])) == ["Block.use"]


def _load(text: str, name: str) -> types.ModuleType:
    mod = types.ModuleType(name)
    exec(compile(text, name, "exec"), mod.__dict__)
    return mod


def test_compiled_the_rewritten_encoder_breaks_less_and_computes_the_same() -> None:
    torch = pytest.importorskip("torch")
    import logging

    logging.getLogger("encoder").disabled = True
    breaks, outs = [], []
    for suffix in (".in.py", ".out.py"):
        mod = _load(PAIR.with_suffix(suffix).read_text(), "switch_" + suffix.split(".")[1])
        torch.manual_seed(0)
        model, x = mod.Encoder(), torch.randn(2, 12, 16)
        torch._dynamo.reset()
        torch._dynamo.utils.counters.clear()  # these breaks are no data-dependent ones: the counter sees them all
        outs.append(torch.compile(model, backend="eager")(x))
        breaks.append({k.split("\n")[0]: v for k, v in torch._dynamo.utils.counters["graph_break"].items()})
    before, after = breaks
    assert before["Attempted to use `torch.nn.Parameter()` constructor with Dynamo"] == 2
    assert before["Uninitialized nn.Module"] == 1
    assert after["Skip inlining `torch.compiler.disable()`d function"] == 1
    assert not after.keys() & {
        "Attempted to use `torch.nn.Parameter()` constructor with Dynamo",
        "Uninitialized nn.Module",
    }
    torch.testing.assert_close(outs[1], outs[0], rtol=0, atol=0)


def test_without_unsafe_the_safe_fallback_is_applied() -> None:
    """A bare nn.Parameter rebuilt by a method forward calls: the config line first (unsafe, it removes every break),
    then the decorator; `fix --yes` without --unsafe applies the decorator in its place."""
    from torchmend.codemods.review import ACCEPTED, accept_all

    source = PAIR.with_name("table_rebuilt_in_forward.in.py").read_text()
    ctx, p = _proposal(source)
    assert p.safety == "unsafe" and "graph_break_on_nn_param_ctor = False" in apply(ctx.file(p.path), [p])
    session = Session(ctx)
    (decision,) = accept_all(session, [p], unsafe=False)
    assert decision.outcome == ACCEPTED and decision.proposal.safety == "safe"
    assert _decorated(session.text(p.path)) == ["Positions.make_table"]
