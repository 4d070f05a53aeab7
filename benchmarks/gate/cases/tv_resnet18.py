# gate: library=torchvision model=resnet18 planted=print_in_forward,module_counter
"""Image classification with torchvision's ResNet-18 (random weights) on random 64x64 images.

The wrapper counts its forward calls on an int attribute and prints a logit statistic every call.
"""

import argparse

import torch
import torch.nn.functional as F
from torch import nn
from torchvision.models import resnet18


class Classifier(nn.Module):
    def __init__(self, num_classes):
        super().__init__()
        self.net = resnet18(weights=None, num_classes=num_classes)
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        logits = self.net(x)
        print(f"[{self.calls}] logits std {logits.std():.4f}")
        return logits


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

    model = Classifier(num_classes=10).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    cmodel = torch.compile(model)

    model.train()
    for step in range(args.steps):
        x, y = images[step % 8].to(device), labels[step % 8].to(device)
        loss = F.cross_entropy(cmodel(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 10 == 0:
            print(f"step {step} loss {loss.item():.4f}")
    print(f"done: {args.steps} steps, last loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
