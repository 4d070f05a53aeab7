# gate: library=torchvision model=fasterrcnn_mobilenet_v3_large_fpn planted=whole_model_compile
"""Object detection trained the way a newcomer writes it: torchvision's Faster R-CNN (MobileNetV3-Large FPN, random
weights, 320 px, batches of 4 images with 1 to 3 boxes) compiled whole, `model = torch.compile(model)`, in train
mode. The detection heads' data-dependent work (proposal sampling, NMS, box matching) breaks the compiled forward
into fragments that recompile as the number of boxes changes: the case for compile placement (issue 40).

`--model` picks another torchvision detection builder (retinanet_resnet50_fpn, ssdlite320_mobilenet_v3_large,
fcos_resnet50_fpn, ...); `--size` the image size.
"""

import argparse

import torch
from torchvision.models import detection


def make_data(n, size, g):
    images, targets = [], []
    for _ in range(n):
        images.append(torch.rand(3, size, size, generator=g))
        k = int(torch.randint(1, 4, (1,), generator=g))
        xy = torch.rand(k, 2, generator=g) * (size * 0.6)
        wh = torch.rand(k, 2, generator=g) * (size * 0.3) + 8
        targets.append({"boxes": torch.cat([xy, xy + wh], 1), "labels": torch.randint(1, 3, (k,), generator=g)})
    return images, targets


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--size", type=int, default=320)
    parser.add_argument("--model", default="fasterrcnn_mobilenet_v3_large_fpn")
    args = parser.parse_args()

    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    images, targets = make_data(4 * args.batch_size, args.size, torch.Generator().manual_seed(1))

    build = getattr(detection, args.model)
    extra = {} if args.model.startswith("ssd") else {"min_size": args.size, "max_size": args.size}
    model = build(weights=None, weights_backbone=None, num_classes=3, **extra).to(device)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.SGD(params, lr=0.01, momentum=0.9, weight_decay=1e-4)
    model = torch.compile(model)

    model.train()
    step = 0
    while step < args.steps:
        for i in range(0, len(images), args.batch_size):
            if step >= args.steps:
                break
            imgs = [im.to(device) for im in images[i : i + args.batch_size]]
            tgts = [{k: v.to(device) for k, v in t.items()} for t in targets[i : i + args.batch_size]]
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
