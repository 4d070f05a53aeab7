# gate: library=torchaudio model=Conformer(2 layers, 64 wide) planted=tensor_if,varying_batch
"""Utterance classification (keyword spotting) with torchaudio's Conformer (random weights), 2 layers of width
64, on random 100-frame log-mel features.

The wrapper standardises the features with an `if` on a tensor, and the DataLoader leaves the last batch of each
epoch smaller (100 utterances, batches of 16).
"""

import argparse

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from torchaudio.models import Conformer

N_MELS, FRAMES, CLASSES = 64, 100, 12


class KeywordSpotter(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = Conformer(
            input_dim=N_MELS, num_heads=4, ffn_dim=128, num_layers=2, depthwise_conv_kernel_size=15
        )
        self.head = nn.Linear(N_MELS, CLASSES)

    def forward(self, feats, lengths):
        if feats.std() > 2.0:
            feats = (feats - feats.mean()) / feats.std()
        out, _ = self.encoder(feats, lengths)
        return self.head(out.mean(dim=1))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--batch-size", type=int, default=16)
    args = parser.parse_args()

    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    g = torch.Generator().manual_seed(1)
    data = TensorDataset(
        torch.randn(100, FRAMES, N_MELS, generator=g) * 3, torch.randint(0, CLASSES, (100,), generator=g)
    )
    loader = DataLoader(data, batch_size=args.batch_size, shuffle=True, generator=torch.Generator().manual_seed(2))

    model = KeywordSpotter().to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    model = torch.compile(model)

    step = 0
    model.train()
    while step < args.steps:
        for feats, y in loader:
            if step >= args.steps:
                break
            feats, y = feats.to(device), y.to(device)
            lengths = torch.full((feats.shape[0],), FRAMES, dtype=torch.long, device=device)
            loss = F.cross_entropy(model(feats, lengths), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            if step % 10 == 0:
                print(f"step {step} loss {loss.item():.4f}")
            step += 1
    print(f"done: {step} steps, last loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
