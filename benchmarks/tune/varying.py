"""tune benchmark, varying shapes: the batch size changes from step to step (a ragged last batch, a bucketed
loader), so each new size recompiles under static shapes: the case for dynamic=True, or for dynamic=None's
automatic switch after the first size change.

Picks cuda when it is available. Knobs (environment): TM_TUNE_WIDTH, TM_TUNE_BATCH (the largest batch).
"""

import os

import torch
from torch import nn

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")
WIDTH = int(os.environ.get("TM_TUNE_WIDTH", "256"))
BATCH = int(os.environ.get("TM_TUNE_BATCH", "64"))
SIZES = [BATCH, BATCH * 3 // 4, BATCH, BATCH // 2, BATCH, BATCH // 4 + 1]  # six steps, four sizes


def main():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(WIDTH, WIDTH), nn.ReLU(), nn.Linear(WIDTH, WIDTH), nn.ReLU(), nn.Linear(WIDTH, 1))
    model = model.to(DEVICE)
    compiled = torch.compile(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(1)
    x_all = torch.randn(BATCH, WIDTH, generator=g).to(DEVICE)
    y_all = torch.randn(BATCH, 1, generator=g).to(DEVICE)
    for step in range(100_000):  # torchmend tune's --steps ends it
        n = SIZES[step % len(SIZES)]
        loss = nn.functional.mse_loss(compiled(x_all[:n]), y_all[:n])
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


if __name__ == "__main__":
    main()
