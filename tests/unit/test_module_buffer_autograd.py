"""TM201's rewrite keeps eager autograd right: the fixed modules of the fixture pairs train like the originals.

The updates are in place (CUDA graphs need that); reads that autograd saves take a snapshot (.clone()), so
calling forward twice before one backward still works. The control drops the snapshots and must fail.
"""

from __future__ import annotations

import types
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

PAIRS = Path(__file__).resolve().parents[2] / "fixtures" / "codemods" / "TM201"
CASES = {"read_in_computation": "Scaled", "updates_and_snapshots": "Net", "damped_counter": "Net"}


def _load(source: str, name: str) -> types.ModuleType:
    mod = types.ModuleType(name)
    exec(compile(source, name, "exec"), mod.__dict__)
    return mod


def _train(cls: type, calls: int = 2) -> tuple[list[float], list[torch.Tensor]]:
    torch.manual_seed(0)
    model = cls()
    x = torch.randn(3, model.fc.in_features if hasattr(model, "fc") else 8)
    total = torch.zeros(())
    outs = []
    for _ in range(calls):  # several forwards, then one backward: saved values must survive the updates
        out = model(x)
        y = out[0] if isinstance(out, tuple) else out
        total = total + y.square().mean()
        outs.append(float(y.detach().sum()))
    total.backward()
    return outs, [p.grad.clone() for p in model.parameters()]


@pytest.mark.parametrize("case", sorted(CASES))
def test_fixed_module_trains_like_the_original(case: str) -> None:
    before = _load((PAIRS / f"{case}.in.py").read_text(), f"{case}_in")
    after = _load((PAIRS / f"{case}.out.py").read_text(), f"{case}_out")
    outs_a, grads_a = _train(getattr(before, CASES[case]))
    outs_b, grads_b = _train(getattr(after, CASES[case]))
    assert outs_b == pytest.approx(outs_a, rel=1e-5)
    for a, b in zip(grads_a, grads_b):
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-6)


def test_without_the_snapshot_backward_fails() -> None:
    fixed = (PAIRS / "updates_and_snapshots.out.py").read_text()
    assert "self.seen.clone()" in fixed
    bare = _load(fixed.replace("self.seen.clone()", "self.seen"), "bare")
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        _train(bare.Net)


def _fallback_text(source: str, name: str) -> str | None:
    """The text of the first proposal's fallback (the rebinding form), or None when it offers none."""
    from torchmend.analysis.source import Context
    from torchmend.codemods.base import Proposal
    from torchmend.codemods.engine import Session, apply
    from torchmend.codemods.examples import EXAMPLE_ROOT, findings_from_markers

    path = f"/tm-example/{name}"
    ctx = Context("/tm-example", lambda p: source)
    (p,) = [
        r for r in Session(ctx).propose(findings_from_markers(path, source, EXAMPLE_ROOT)) if isinstance(r, Proposal)
    ]
    return apply(ctx.file(path), [p.fallbacks[0]]) if p.fallbacks else None


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_rebinding_fallback_trains_like_the_original(case: str) -> None:
    source = (PAIRS / f"{case}.in.py").read_text()
    text = _fallback_text(source, f"{case}.in.py")
    assert text is not None and "register_buffer" in text and ".add_(" not in text and ".mul_(" not in text
    before, after = _load(source, f"{case}_in"), _load(text, f"{case}_fallback")
    outs_a, grads_a = _train(getattr(before, CASES[case]))
    outs_b, grads_b = _train(getattr(after, CASES[case]))
    assert outs_b == pytest.approx(outs_a, rel=1e-5)
    for a, b in zip(grads_a, grads_b):
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-6)


def test_the_unspec_int_alternative_is_qualified_where_the_counter_meets_modulo() -> None:
    from torchmend.analysis.source import Context
    from torchmend.codemods.base import Proposal
    from torchmend.codemods.engine import Session
    from torchmend.codemods.examples import EXAMPLE_ROOT, findings_from_markers

    source = (PAIRS / "damped_counter.in.py").read_text()

    def alternative(text: str) -> str:
        ctx = Context("/tm-example", lambda p: text)
        found = findings_from_markers("/tm-example/m.py", text, EXAMPLE_ROOT)
        (p,) = [r for r in Session(ctx).propose(found) if isinstance(r, Proposal)]
        return p.alternative

    assert "allow_unspec_int_on_nn_module" in alternative(source) and "% n" not in alternative(source)
    modulo = source.replace("(self.calls / (self.calls + 10.0))", "(1.0 / (1 + self.calls % 3))")
    assert modulo != source and "fails to compile on torch 2.13-2.15" in alternative(modulo)
