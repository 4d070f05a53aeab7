# gate: library=torchvision model=ConvNeXt(3 stages, 32-128 ch) planted=none
"""Control: torchvision's ConvNeXt class (random weights), built small from its block settings, on random 64x64
images; nothing planted: a plain compiled training loop.
"""

import argparse

import torch
import torch.nn.functional as F
from torchvision.models.convnext import CNBlockConfig, ConvNeXt


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--batch-size", type=int, default=32)
    args = parser.parse_args()

    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    g = torch.Generator().manual_seed(1)
    images = torch.randn(8, args.batch_size, 3, 64, 64, generator=g)
    labels = torch.randint(0, 10, (8, args.batch_size), generator=g)

    settings = [CNBlockConfig(32, 64, 2), CNBlockConfig(64, 128, 2), CNBlockConfig(128, None, 2)]
    model = ConvNeXt(settings, stochastic_depth_prob=0.0, num_classes=10).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.05)
    model = torch.compile(model)

    model.train()
    for step in range(args.steps):
        x, y = images[step % 8].to(device), labels[step % 8].to(device)
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step % 10 == 0:
            print(f"step {step} loss {loss.item():.4f}")
    print(f"done: {args.steps} steps, last loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
