# gate: library=torchvision model=VisionTransformer(4 layers, 128 wide, 32px) planted=logger_in_forward,host_random
"""Image classification with torchvision's VisionTransformer class (random weights), built small: 32x32 images,
patch 4, 4 layers, width 128.

The wrapper flips a batch horizontally when Python's `random.random()` says so, and logs the logit norm.
"""

import argparse
import logging
import random

import torch
import torch.nn.functional as F
from torch import nn
from torchvision.models import VisionTransformer

log = logging.getLogger("train_vit")


class FlipViT(nn.Module):
    def __init__(self, num_classes, flip_p=0.5):
        super().__init__()
        self.vit = VisionTransformer(
            image_size=32,
            patch_size=4,
            num_layers=4,
            num_heads=4,
            hidden_dim=128,
            mlp_dim=256,
            num_classes=num_classes,
        )
        self.flip_p = flip_p

    def forward(self, x):
        if self.training and random.random() < self.flip_p:
            x = x.flip(-1)
        logits = self.vit(x)
        log.info("logit norm %.3f", logits.norm())
        return logits


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--batch-size", type=int, default=64)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")

    random.seed(0)
    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    g = torch.Generator().manual_seed(1)
    images = torch.randn(8, args.batch_size, 3, 32, 32, generator=g)
    labels = torch.randint(0, 10, (8, args.batch_size), generator=g)

    model = FlipViT(num_classes=10).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
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
