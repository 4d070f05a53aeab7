"""tune benchmark, compute-bound: a stack of large matrix products (a wide MLP on a big batch). The matmuls
dominate each step, so compiling buys little beyond fusing the element-wise work around them, and max-autotune's
GEMM search is what may pay.

Picks cuda when it is available (bf16 autocast there, 4096 wide); on a CPU it is small enough to run in seconds.
Knobs (environment): TM_TUNE_WIDTH, TM_TUNE_BATCH.
"""

import contextlib
import os

import torch
from torch import nn

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")
CUDA = DEVICE.type == "cuda"
WIDTH = int(os.environ.get("TM_TUNE_WIDTH", "4096" if CUDA else "256"))
BATCH = int(os.environ.get("TM_TUNE_BATCH", "8192" if CUDA else "256"))


def main():
    torch.manual_seed(0)
    # Square layers: one GEMM shape forward, so max-autotune searches a few shapes, not one per layer.
    model = nn.Sequential(
        nn.Linear(WIDTH, WIDTH), nn.GELU(), nn.Linear(WIDTH, WIDTH), nn.GELU(), nn.Linear(WIDTH, WIDTH)
    ).to(DEVICE)
    compiled = torch.compile(model)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(1)
    data = [(torch.randn(BATCH, WIDTH, generator=g), torch.randn(BATCH, WIDTH, generator=g)) for _ in range(2)]
    data = [(x.to(DEVICE), y.to(DEVICE)) for x, y in data]
    autocast = torch.autocast("cuda", dtype=torch.bfloat16) if CUDA else contextlib.nullcontext()
    for step in range(100_000):  # torchmend tune's --steps ends it
        x, y = data[step % len(data)]
        with autocast:
            loss = nn.functional.mse_loss(compiled(x).float(), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


if __name__ == "__main__":
    main()
