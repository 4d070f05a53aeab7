"""The known PyTorch hazards table: versions, shapes, and each row's fixture run on the installed torch, so the
table cannot drift from what this torch does (the row says affected exactly when the fixture mis-compiles)."""

from __future__ import annotations

import pytest

from torchmend.profiler.hazards import HAZARDS, hazards_for

BUFFER = next(h for h in HAZARDS if h.name == "recomputed-read-of-mutated-buffer")


def test_names_are_unique_and_each_row_says_where_it_is_tracked() -> None:
    assert len({h.name for h in HAZARDS}) == len(HAZARDS)
    assert all(h.upstream.startswith("pytorch ") and "github.com/pytorch" in h.upstream for h in HAZARDS)


def test_the_buffer_row_by_version_and_shape() -> None:
    for version in ("2.13.0+cpu", "2.14.1+cu130", "2.15.0+cu132"):
        assert hazards_for("buffer-in-place", {"torch": version}) == [BUFFER]
    assert hazards_for("buffer-rebound", {"torch": "2.13.0"}) == []  # the fallback's shape is not listed
    assert hazards_for("buffer-in-place", {"torch": "2.12.1"}) == []  # not reproduced there (not tried)
    assert hazards_for("buffer-in-place", {}) == [] and hazards_for("", {"torch": "2.13.0"}) == []
    assert "pytorch PR #197039" in BUFFER.describe() and "no release fixes it yet" in BUFFER.describe()


def _train(form: str, compiled: bool) -> list[float]:
    torch = pytest.importorskip("torch")
    from torch import nn

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc1, self.fc2 = nn.Linear(8, 8), nn.Linear(8, 8)
            self.register_buffer("calls", torch.tensor(0), persistent=False)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            if form == "buffer-in-place":
                self.calls.add_(1)
            else:
                self.calls = self.calls + 1
            h = torch.relu(self.fc1(x))
            return self.fc2(h * (1.0 / (1 + self.calls % 3)))

    torch.manual_seed(0)
    model = Block()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    step = torch.compile(model, backend="aot_eager") if compiled else model
    losses = []
    for _ in range(3):
        loss = step(torch.randn(4, 8)).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    return losses + [float(p.detach().abs().sum()) for p in model.parameters()]


@pytest.mark.parametrize("form", ["buffer-in-place", "buffer-rebound"])
def test_the_buffer_row_matches_what_this_torch_compiles(form: str) -> None:
    torch = pytest.importorskip("torch")
    torch._dynamo.reset()
    miscompiled = _train(form, compiled=True) != _train(form, compiled=False)
    assert miscompiled == bool(hazards_for(form, {"torch": torch.__version__})), torch.__version__
