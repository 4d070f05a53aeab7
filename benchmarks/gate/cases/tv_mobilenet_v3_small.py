# gate: library=torchvision model=mobilenet_v3_small planted=float_lr,varying_batch
"""Image classification with torchvision's MobileNetV3-Small (random weights) on a random 64x64 data set.

A DataLoader without drop_last (the last batch of each epoch is smaller), a hand-written warmup + cosine schedule
that writes a Python float into every param group, and the optimizer step compiled too.
"""

import argparse
import math

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset
from torchvision.models import mobilenet_v3_small

BASE_LR = 0.05
WARMUP = 10


def lr_at(step, total):
    if step < WARMUP:
        return BASE_LR * (step + 1) / WARMUP
    progress = (step - WARMUP) / max(1, total - WARMUP)
    return BASE_LR * 0.5 * (1.0 + math.cos(math.pi * progress))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--batch-size", type=int, default=32)
    args = parser.parse_args()

    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    g = torch.Generator().manual_seed(1)
    data = TensorDataset(torch.randn(200, 3, 64, 64, generator=g), torch.randint(0, 10, (200,), generator=g))
    loader = DataLoader(data, batch_size=args.batch_size, shuffle=True, generator=torch.Generator().manual_seed(2))

    model = mobilenet_v3_small(weights=None, num_classes=10, dropout=0.0).to(device)
    model = torch.compile(model)
    opt = torch.optim.SGD(model.parameters(), lr=BASE_LR, momentum=0.9, weight_decay=1e-4)

    @torch.compile
    def opt_step():
        opt.step()

    step = 0
    model.train()
    while step < args.steps:
        for x, y in loader:
            if step >= args.steps:
                break
            for group in opt.param_groups:
                group["lr"] = lr_at(step, args.steps)
            x, y = x.to(device), y.to(device)
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt_step()
            opt.zero_grad()
            if step % 10 == 0:
                print(f"step {step} lr {opt.param_groups[0]['lr']:.4f} loss {loss.item():.4f}")
            step += 1
    print(f"done: {step} steps, last loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
