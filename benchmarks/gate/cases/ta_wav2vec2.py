# gate: library=torchaudio model=wav2vec2_model(3 conv, 2 layers, 64 wide) planted=print_in_forward,host_random
"""CTC speech recognition with torchaudio's Wav2Vec2Model, built small with torchaudio.models.wav2vec2_model
(random weights, no dropout or layer drop), on random one-second 16 kHz waveforms and random transcripts.

The wrapper applies a random gain when Python's `random.random()` says so, and prints the emissions' mean.
"""

import argparse
import random

import torch
import torch.nn.functional as F
from torch import nn
from torchaudio.models import wav2vec2_model

VOCAB = 32


class CTCModel(nn.Module):
    def __init__(self, gain_p=0.3):
        super().__init__()
        self.w2v = wav2vec2_model(
            extractor_mode="group_norm",
            extractor_conv_layer_config=[(64, 10, 5), (64, 3, 2), (64, 3, 2)],
            extractor_conv_bias=False,
            encoder_embed_dim=64,
            encoder_projection_dropout=0.0,
            encoder_pos_conv_kernel=16,
            encoder_pos_conv_groups=4,
            encoder_num_layers=2,
            encoder_num_heads=4,
            encoder_attention_dropout=0.0,
            encoder_ff_interm_features=128,
            encoder_ff_interm_dropout=0.0,
            encoder_dropout=0.0,
            encoder_layer_norm_first=False,
            encoder_layer_drop=0.0,
            aux_num_out=VOCAB,
        )
        self.gain_p = gain_p

    def forward(self, waves):
        if self.training and random.random() < self.gain_p:
            waves = waves * 0.5
        emissions, _ = self.w2v(waves)
        print(f"emissions mean {emissions.mean():.4f}")
        return emissions.log_softmax(-1)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--batch-size", type=int, default=8)
    args = parser.parse_args()

    random.seed(0)
    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    g = torch.Generator().manual_seed(1)
    waves = torch.randn(4, args.batch_size, 16000, generator=g) * 0.1
    texts = torch.randint(1, VOCAB, (4, args.batch_size, 20), generator=g)

    model = CTCModel().to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=5e-4)
    cmodel = torch.compile(model)

    model.train()
    for step in range(args.steps):
        x, y = waves[step % 4].to(device), texts[step % 4].to(device)
        log_probs = cmodel(x)  # (batch, frames, vocab)
        frames = torch.full((x.shape[0],), log_probs.shape[1], dtype=torch.long, device=device)
        target_lengths = torch.full((x.shape[0],), y.shape[1], dtype=torch.long, device=device)
        loss = F.ctc_loss(log_probs.transpose(0, 1), y, frames, target_lengths, blank=0)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 10 == 0:
            print(f"step {step} loss {loss.item():.4f}")
    print(f"done: {args.steps} steps, last loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
