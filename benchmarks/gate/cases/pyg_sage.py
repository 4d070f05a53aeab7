# gate: library=torch_geometric model=GraphSAGE(2 layers, 64 hidden) planted=none
"""Control: node classification with torch_geometric's GraphSAGE model (torch_geometric.nn.models.GraphSAGE,
random weights) on a random graph (2,000 nodes, 16,000 edges, 32 features, 7 classes); nothing planted.
"""

import argparse

import torch
import torch.nn.functional as F
from torch_geometric.nn.models import GraphSAGE


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=30)
    args = parser.parse_args()

    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    g = torch.Generator().manual_seed(1)
    num_nodes = 2000
    x = torch.randn(num_nodes, 32, generator=g).to(device)
    edge_index = torch.randint(0, num_nodes, (2, 16000), generator=g).to(device)
    y = torch.randint(0, 7, (num_nodes,), generator=g).to(device)
    train_mask = (torch.rand(num_nodes, generator=g) < 0.5).to(device)

    model = GraphSAGE(in_channels=32, hidden_channels=64, num_layers=2, out_channels=7).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)
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
