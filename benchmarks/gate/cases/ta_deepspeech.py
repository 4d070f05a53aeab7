# gate: library=torchaudio model=DeepSpeech(128 hidden) planted=item_in_forward,module_counter
"""CTC speech recognition with torchaudio's DeepSpeech (random weights, hidden 128) on random 80-frame
40-feature spectrograms and random transcripts.

The wrapper normalises by the batch's peak read with `.item()`, and ramps its input scale up from an int count of
its calls (a curriculum warmup).
"""

import argparse

import torch
import torch.nn.functional as F
from torch import nn
from torchaudio.models import DeepSpeech

N_FEATURE, FRAMES, VOCAB = 40, 80, 29


class Recognizer(nn.Module):
    def __init__(self):
        super().__init__()
        self.ds = DeepSpeech(n_feature=N_FEATURE, n_hidden=128, n_class=VOCAB, dropout=0.0)
        self.updates = 0

    def forward(self, spec):
        self.updates += 1
        peak = spec.abs().amax().item()
        spec = spec / (peak + 1e-5)
        spec = spec * min(1.0, self.updates / 10)
        return self.ds(spec.unsqueeze(1))  # (batch, frames, vocab), log-probabilities


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--batch-size", type=int, default=16)
    args = parser.parse_args()

    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    g = torch.Generator().manual_seed(1)
    specs = torch.randn(4, args.batch_size, FRAMES, N_FEATURE, generator=g)
    texts = torch.randint(1, VOCAB, (4, args.batch_size, 15), generator=g)

    model = Recognizer().to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model = torch.compile(model)

    model.train()
    for step in range(args.steps):
        x, y = specs[step % 4].to(device), texts[step % 4].to(device)
        log_probs = model(x)
        frames = torch.full((x.shape[0],), FRAMES, dtype=torch.long, device=device)
        target_lengths = torch.full((x.shape[0],), y.shape[1], dtype=torch.long, device=device)
        loss = F.ctc_loss(log_probs.transpose(0, 1), y, frames, target_lengths)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 10 == 0:
            print(f"step {step} loss {loss.item():.4f}")
    print(f"done: {args.steps} steps, last loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
