# gate: library=torch_geometric model=GCN(3 layers, 64 hidden) planted=logger_in_forward,float_lr
"""Node classification with torch_geometric's GCN model (torch_geometric.nn.models.GCN, random weights) on a
random graph: 2,000 nodes, 16,000 directed edges, 32 features, 7 classes, half the nodes labelled for training.

The wrapper logs the output's mean every call, and a hand-written step decay writes a Python float lr into the
param groups each step, with the optimizer step compiled.
"""

import argparse
import logging

import torch
import torch.nn.functional as F
from torch import nn
from torch_geometric.nn.models import GCN

log = logging.getLogger("train_gcn")
BASE_LR = 0.01


class NodeClassifier(nn.Module):
    def __init__(self, in_channels, num_classes):
        super().__init__()
        self.gnn = GCN(in_channels=in_channels, hidden_channels=64, num_layers=3, out_channels=num_classes)

    def forward(self, x, edge_index):
        out = self.gnn(x, edge_index)
        log.info("output mean %.4f", out.mean())
        return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=30)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")

    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    g = torch.Generator().manual_seed(1)
    num_nodes = 2000
    x = torch.randn(num_nodes, 32, generator=g).to(device)
    edge_index = torch.randint(0, num_nodes, (2, 16000), generator=g).to(device)
    y = torch.randint(0, 7, (num_nodes,), generator=g).to(device)
    train_mask = (torch.rand(num_nodes, generator=g) < 0.5).to(device)

    model = NodeClassifier(32, 7).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=BASE_LR, weight_decay=5e-4)
    model = torch.compile(model)

    @torch.compile
    def opt_step():
        opt.step()

    model.train()
    for step in range(args.steps):
        for group in opt.param_groups:
            group["lr"] = BASE_LR * (0.9 ** (step // 5))
        out = model(x, edge_index)
        loss = F.cross_entropy(out[train_mask], y[train_mask])
        opt.zero_grad()
        loss.backward()
        opt_step()
        if step % 10 == 0:
            print(f"step {step} loss {loss.item():.4f}")
    print(f"done: {args.steps} steps, last loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
