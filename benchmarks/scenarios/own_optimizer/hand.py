"""own_optimizer, fixed by hand: the lr is a 0-d tensor made once, the warmup updates it in place with fill_,
and the step uses it in tensor arithmetic (alpha= takes only a number): one graph for the compiled step.

Knobs (environment): TM_BENCH_REGIME overhead|compute, TM_BENCH_MODE (torch.compile mode),
TM_BENCH_DEVICE cpu|cuda, TM_BENCH_STEPS (default 10000: the benchmark runner stops it far earlier).
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


class SignMomentum(torch.optim.Optimizer):
    def __init__(self, params, lr=1e-3, beta=0.9, weight_decay=0.0):
        super().__init__(params, dict(lr=lr, beta=beta, weight_decay=weight_decay))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            lr = group["lr"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if "buf" not in state:
                    state["buf"] = torch.zeros_like(p)
                buf = state["buf"]
                p.mul_(1 - lr * group["weight_decay"])
                buf.lerp_(p.grad, 1 - group["beta"])
                p.sub_(buf.sign() * lr)


def main():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(WIDTH, WIDTH), nn.ReLU(), nn.Linear(WIDTH, WIDTH)).to(DEVICE)
    opt = SignMomentum(model.parameters(), lr=torch.tensor(BASE_LR, device=DEVICE), weight_decay=0.01)
    compiled_step = torch.compile(opt.step, mode=MODE)
    data = make_data()
    for step in range(STEPS):
        for group in opt.param_groups:
            group["lr"].fill_(BASE_LR * min(1.0, (step + 1) / WARMUP))
        x, y = data[step % len(data)]
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        compiled_step()
        opt.zero_grad(set_to_none=True)


if __name__ == "__main__":
    main()
