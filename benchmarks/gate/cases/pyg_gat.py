# gate: library=torch_geometric model=GAT(2 layers, 4 heads) planted=host_random,item_in_forward
"""Node classification with torch_geometric's GAT model (torch_geometric.nn.models.GAT, random weights, 4 heads,
no dropout) on a random graph: 2,000 nodes, 16,000 directed edges, 32 features, 7 classes.

The wrapper masks a fixed set of input features when Python's `random.random()` says so, and scales the input by
the largest node degree read with `.item()`.
"""

import argparse
import random

import torch
import torch.nn.functional as F
from torch import nn
from torch_geometric.nn.models import GAT
from torch_geometric.utils import degree


class FeatureMaskGAT(nn.Module):
    def __init__(self, in_channels, num_classes, mask_p=0.3):
        super().__init__()
        self.gnn = GAT(in_channels=in_channels, hidden_channels=32, num_layers=2, out_channels=num_classes, heads=4)
        self.mask_p = mask_p
        self.register_buffer("keep", (torch.arange(in_channels) % 4 != 0).float())

    def forward(self, x, edge_index):
        if self.training and random.random() < self.mask_p:
            x = x * self.keep
        max_deg = degree(edge_index[1], num_nodes=x.shape[0]).max().item()
        x = x * (1.0 + 1.0 / max_deg)
        return self.gnn(x, edge_index)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=30)
    args = parser.parse_args()

    random.seed(0)
    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    g = torch.Generator().manual_seed(1)
    num_nodes = 2000
    x = torch.randn(num_nodes, 32, generator=g).to(device)
    edge_index = torch.randint(0, num_nodes, (2, 16000), generator=g).to(device)
    y = torch.randint(0, 7, (num_nodes,), generator=g).to(device)
    train_mask = (torch.rand(num_nodes, generator=g) < 0.5).to(device)

    model = FeatureMaskGAT(32, 7).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=5e-3, weight_decay=5e-4)
    model = torch.compile(model)

    model.train()
    for step in range(args.steps):
        out = model(x, edge_index)
        loss = F.cross_entropy(out[train_mask], y[train_mask])
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 10 == 0:
            print(f"step {step} loss {loss.item():.4f}")
    print(f"done: {args.steps} steps, last loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
