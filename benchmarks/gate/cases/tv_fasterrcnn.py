# gate: library=torchvision model=fasterrcnn_mobilenet_v3_large_fpn planted=varying_batch,print_in_forward
"""Object detection with torchvision's Faster R-CNN (MobileNetV3-Large FPN, random weights, 128 px) in train
mode on random images and boxes. What is compiled is the backbone (the detection heads do data-dependent work:
proposal sampling, NMS), inside a wrapper that prints a feature statistic while debugging.

A hand-rolled loader leaves the last batch of each epoch smaller (10 images, batches of 4).
"""

import argparse

import torch
from torch import nn
from torchvision.models.detection import fasterrcnn_mobilenet_v3_large_fpn


class DebugBackbone(nn.Module):
    def __init__(self, backbone):
        super().__init__()
        self.body = backbone
        self.out_channels = backbone.out_channels

    def forward(self, images):
        feats = self.body(images)
        print(f"{len(feats)} feature maps, first mean {feats['0'].mean():.4f}")
        return feats


def make_data(n, size, g):
    images, targets = [], []
    for _ in range(n):
        images.append(torch.rand(3, size, size, generator=g))
        k = int(torch.randint(1, 4, (1,), generator=g))
        xy = torch.rand(k, 2, generator=g) * (size * 0.6)
        wh = torch.rand(k, 2, generator=g) * (size * 0.3) + 8
        targets.append({"boxes": torch.cat([xy, xy + wh], 1), "labels": torch.randint(1, 3, (k,), generator=g)})
    return images, targets


def batches(images, targets, batch_size):
    for i in range(0, len(images), batch_size):
        yield images[i : i + batch_size], targets[i : i + batch_size]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--batch-size", type=int, default=4)
    args = parser.parse_args()

    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    images, targets = make_data(10, 128, torch.Generator().manual_seed(1))

    model = fasterrcnn_mobilenet_v3_large_fpn(
        weights=None, weights_backbone=None, num_classes=3, min_size=128, max_size=128
    ).to(device)
    model.backbone = torch.compile(DebugBackbone(model.backbone))
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.SGD(params, lr=0.01, momentum=0.9, weight_decay=1e-4)

    step = 0
    model.train()
    while step < args.steps:
        for imgs, tgts in batches(images, targets, args.batch_size):
            if step >= args.steps:
                break
            imgs = [im.to(device) for im in imgs]
            tgts = [{k: v.to(device) for k, v in t.items()} for t in tgts]
            loss_dict = model(imgs, tgts)
            loss = sum(loss_dict.values())
            opt.zero_grad()
            loss.backward()
            opt.step()
            if step % 10 == 0:
                print(f"step {step} loss {loss.item():.4f}")
            step += 1
    print(f"done: {step} steps, last loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
