# gate: library=torch_geometric model=GIN(3 layers, 64 hidden) planted=module_counter,tensor_if
"""Graph classification with torch_geometric's GIN model (torch_geometric.nn.models.GIN, random weights) and
global_add_pool on batches of 32 random graphs of 20 nodes and 60 edges each (torch_geometric.data.Batch).

The wrapper counts its calls on an int attribute and, after a few, clips large graph embeddings with an `if` on
a tensor.
"""

import argparse

import torch
import torch.nn.functional as F
from torch import nn
from torch_geometric.data import Batch, Data
from torch_geometric.nn import global_add_pool
from torch_geometric.nn.models import GIN

GRAPHS, NODES, EDGES, FEATURES, CLASSES = 32, 20, 60, 16, 4


class GraphClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.gin = GIN(in_channels=FEATURES, hidden_channels=64, num_layers=3)
        self.head = nn.Linear(64, CLASSES)
        self.calls = 0

    def forward(self, x, edge_index, batch):
        self.calls += 1
        h = self.gin(x, edge_index)
        g = global_add_pool(h, batch, size=GRAPHS)
        if self.calls > 3 and g.norm(dim=-1).mean() > 20.0:
            g = F.normalize(g, dim=-1) * 20.0
        return self.head(g)


def make_batches(n, gen):
    out = []
    for _ in range(n):
        graphs = [
            Data(
                x=torch.randn(NODES, FEATURES, generator=gen),
                edge_index=torch.randint(0, NODES, (2, EDGES), generator=gen),
            )
            for _ in range(GRAPHS)
        ]
        out.append((Batch.from_data_list(graphs), torch.randint(0, CLASSES, (GRAPHS,), generator=gen)))
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=30)
    args = parser.parse_args()

    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    batches = [(b.to(device), y.to(device)) for b, y in make_batches(4, torch.Generator().manual_seed(1))]

    model = GraphClassifier().to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    model = torch.compile(model)

    model.train()
    for step in range(args.steps):
        data, y = batches[step % len(batches)]
        loss = F.cross_entropy(model(data.x, data.edge_index, data.batch), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 10 == 0:
            print(f"step {step} loss {loss.item():.4f}")
    print(f"done: {args.steps} steps, last loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
