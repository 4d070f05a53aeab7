"""item, as written: `.item()` inside the compiled loss, its value used in arithmetic (a graph break,
and a recompile for the float carried across it).

Knobs (environment): TM_BENCH_REGIME overhead|compute, TM_BENCH_MODE (torch.compile mode),
TM_BENCH_DEVICE cpu|cuda, TM_BENCH_STEPS (default 10000: the benchmark runner stops it after its budget).
"""
import os

import torch
from torch import nn

REGIME = os.environ.get("TM_BENCH_REGIME", "overhead")  # overhead | compute
MODE = os.environ.get("TM_BENCH_MODE", "default")  # passed to torch.compile(mode=...)
DEVICE = torch.device(os.environ.get("TM_BENCH_DEVICE", "cpu"))
STEPS = int(os.environ.get("TM_BENCH_STEPS", "10000"))  # the benchmark runner stops it far earlier
if REGIME == "overhead":
    WIDTH, BATCH = 64, 16
elif DEVICE.type == "cuda":
    WIDTH, BATCH = 4096, 2048
else:
    WIDTH, BATCH = 1024, 256


def make_data(n=8):
    """A fixed pool of batches, made on the CPU with a seeded generator, then moved to DEVICE."""
    g = torch.Generator().manual_seed(1)
    pool = [(torch.randn(BATCH, WIDTH, generator=g), torch.randn(BATCH, WIDTH, generator=g)) for _ in range(n)]
    return [(x.to(DEVICE), y.to(DEVICE)) for x, y in pool]


def normalized_loss(pred, target):
    err = (pred - target).pow(2)
    scale = err.mean().detach().clamp(min=1e-6)
    return err.mean() / scale


def main():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(WIDTH, WIDTH), nn.ReLU(), nn.Linear(WIDTH, WIDTH)).to(DEVICE)
    compiled = torch.compile(model, mode=MODE)
    loss_fn = torch.compile(normalized_loss, mode=MODE)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    data = make_data()
    for step in range(STEPS):
        x, y = data[step % len(data)]
        loss = loss_fn(compiled(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()


if __name__ == "__main__":
    main()
