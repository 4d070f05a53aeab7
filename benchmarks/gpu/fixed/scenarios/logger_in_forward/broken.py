"""logger_in_forward, as written: a logging call in forward (a graph break on every call).

Knobs (environment): TM_BENCH_REGIME overhead|compute, TM_BENCH_MODE (torch.compile mode),
TM_BENCH_DEVICE cpu|cuda, TM_BENCH_STEPS (default 10000: the benchmark runner stops it after its budget).
"""
import logging
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


log = logging.getLogger("trainer")


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(WIDTH, WIDTH)
        self.fc2 = nn.Linear(WIDTH, WIDTH)

    def forward(self, x):
        if not torch.compiler.is_compiling():
            log.info("forward on a batch of %d", x.shape[0])
        h = torch.relu(self.fc1(x))
        return self.fc2(h)


def main():
    torch.manual_seed(0)
    model = Net().to(DEVICE)
    compiled = torch.compile(model, mode=MODE)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    data = make_data()
    for step in range(STEPS):
        x, y = data[step % len(data)]
        loss = nn.functional.mse_loss(compiled(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()


if __name__ == "__main__":
    main()
