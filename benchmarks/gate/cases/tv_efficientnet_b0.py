# gate: library=torchvision model=efficientnet_b0 planted=item_in_forward,tensor_if
"""Image classification with torchvision's EfficientNet-B0 (random weights, no dropout or stochastic depth) on
random 64x64 images.

The wrapper rescales each batch by its peak value read with `.item()`, and tames large logits with an `if` on a
tensor.
"""

import argparse

import torch
import torch.nn.functional as F
from torch import nn
from torchvision.models import efficientnet_b0


class Net(nn.Module):
    def __init__(self, num_classes):
        super().__init__()
        self.backbone = efficientnet_b0(weights=None, num_classes=num_classes, dropout=0.0, stochastic_depth_prob=0.0)

    def forward(self, x):
        peak = x.abs().amax().item()
        x = x / max(peak, 1e-6)
        logits = self.backbone(x)
        if logits.abs().mean() > 3.0:
            logits = logits * 0.5
        return logits


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--batch-size", type=int, default=32)
    args = parser.parse_args()

    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    g = torch.Generator().manual_seed(1)
    images = torch.randn(8, args.batch_size, 3, 64, 64, generator=g) * 4
    labels = torch.randint(0, 10, (8, args.batch_size), generator=g)

    model = Net(num_classes=10).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model = torch.compile(model)

    model.train()
    for step in range(args.steps):
        x, y = images[step % 8].to(device), labels[step % 8].to(device)
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 10 == 0:
            print(f"step {step} loss {loss.item():.4f}")
    print(f"done: {args.steps} steps, last loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
