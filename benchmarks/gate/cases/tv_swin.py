# gate: library=torchvision model=SwinTransformer(2 stages, 48 wide, 32px) planted=module_counter,float_lr
"""Image classification with torchvision's SwinTransformer class (random weights), built small: 32x32 images,
patch 2, window 4, depths (2, 2), width 48, no stochastic depth.

The wrapper anneals a logit temperature from an int count of its calls, and a hand-written linear warmup writes
a Python float lr into the param groups each step, with the optimizer step compiled.
"""

import argparse

import torch
import torch.nn.functional as F
from torch import nn
from torchvision.models import SwinTransformer

BASE_LR = 1e-3
WARMUP = 20


class TempSwin(nn.Module):
    def __init__(self, num_classes):
        super().__init__()
        self.swin = SwinTransformer(
            patch_size=[2, 2],
            embed_dim=48,
            depths=[2, 2],
            num_heads=[3, 6],
            window_size=[4, 4],
            stochastic_depth_prob=0.0,
            num_classes=num_classes,
        )
        self.seen = 0

    def forward(self, x):
        self.seen += 1
        temperature = max(0.5, 1.0 - self.seen / 200)
        return self.swin(x) / temperature


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--batch-size", type=int, default=32)
    args = parser.parse_args()

    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    g = torch.Generator().manual_seed(1)
    images = torch.randn(8, args.batch_size, 3, 32, 32, generator=g)
    labels = torch.randint(0, 10, (8, args.batch_size), generator=g)

    model = TempSwin(num_classes=10).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=BASE_LR, weight_decay=0.05)
    model = torch.compile(model)

    @torch.compile
    def opt_step():
        opt.step()

    model.train()
    for step in range(args.steps):
        for group in opt.param_groups:
            group["lr"] = BASE_LR * min(1.0, (step + 1) / WARMUP)
        x, y = images[step % 8].to(device), labels[step % 8].to(device)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt_step()
        opt.zero_grad()
        if step % 10 == 0:
            print(f"step {step} loss {loss.item():.4f}")
    print(f"done: {args.steps} steps, last loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
