"""float_lr, as written: a hand-written warmup writes a Python float lr into param_groups every step,
and the optimizer step is compiled (a changing float times a 0-d tensor lr: recompiles).

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


BASE_LR = 1e-3
WARMUP = 100


def main():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(WIDTH, WIDTH), nn.ReLU(), nn.Linear(WIDTH, WIDTH)).to(DEVICE)
    opt = torch.optim.AdamW(model.parameters(), lr=torch.tensor(BASE_LR))

    @torch.compile(mode=MODE)
    def optimizer_step():
        opt.step()

    data = make_data()
    for step in range(STEPS):
        for group in opt.param_groups:
            group["lr"].fill_(BASE_LR * min(1.0, (step + 1) / WARMUP))
        x, y = data[step % len(data)]
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer_step()
        opt.zero_grad()


if __name__ == "__main__":
    main()
