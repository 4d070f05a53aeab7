"""tune benchmark, overhead-bound: a tiny MLP trained for many steps. Each step launches dozens of small kernels, so
Python and launch overhead dominate: the regime where fused kernels and CUDA graphs (reduce-overhead) pay most.

Picks cuda when it is available. Knobs (environment): TM_TUNE_WIDTH, TM_TUNE_BATCH.
"""

import os

import torch
from torch import nn

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")
WIDTH = int(os.environ.get("TM_TUNE_WIDTH", "64"))
BATCH = int(os.environ.get("TM_TUNE_BATCH", "32"))


def main():
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Linear(WIDTH, WIDTH),
        nn.GELU(),
        nn.LayerNorm(WIDTH),
        nn.Linear(WIDTH, WIDTH),
        nn.GELU(),
        nn.LayerNorm(WIDTH),
        nn.Linear(WIDTH, 1),
    ).to(DEVICE)
    compiled = torch.compile(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(1)
    data = [(torch.randn(BATCH, WIDTH, generator=g), torch.randn(BATCH, 1, generator=g)) for _ in range(8)]
    data = [(x.to(DEVICE), y.to(DEVICE)) for x, y in data]
    for step in range(100_000):  # torchmend tune's --steps ends it
        x, y = data[step % len(data)]
        loss = nn.functional.mse_loss(compiled(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


if __name__ == "__main__":
    main()
