"""A small transformer trained with FSDP2, as a new user writes it: `fully_shard` on each block and the root, then
`torch.compile(model)`, a `print` and a
data-dependent `if` in a block's forward, and a hand-written float learning-rate schedule written into
param_groups every step with the optimizer step compiled (issue 32's shape).

Run with torchrun (one process per GPU, NCCL; on a machine without GPUs, gloo on the CPU):
    torchrun --nproc-per-node 2 benchmarks/distributed/fsdp2.py
Knobs (environment): STEPS (30), BACKEND (the torch.compile backend, inductor).
"""

import math
import os
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.nn import functional as F

STEPS = int(os.environ.get("STEPS", "30"))
BACKEND = os.environ.get("BACKEND", "inductor")
VOCAB, DIM, HEADS, LAYERS, SEQ, BATCH = 512, 256, 4, 4, 64, 8
BASE_LR, WARMUP = 3e-4, 10


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(DIM), nn.LayerNorm(DIM)
        self.qkv, self.proj = nn.Linear(DIM, 3 * DIM), nn.Linear(DIM, DIM)
        self.mlp = nn.Sequential(nn.Linear(DIM, 4 * DIM), nn.GELU(), nn.Linear(4 * DIM, DIM))

    def forward(self, x):
        b, t, _ = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, t, 3, HEADS, DIM // HEADS).permute(2, 0, 3, 1, 4)
        att = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(att.transpose(1, 2).reshape(b, t, DIM))
        h = self.mlp(self.norm2(x))
        print("block out", h.shape)
        if h.abs().amax() > 50:
            h = h / h.abs().amax()
        return x + h


class Transformer(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, DIM)
        self.blocks = nn.ModuleList([Block() for _ in range(LAYERS)])
        self.norm, self.head = nn.LayerNorm(DIM), nn.Linear(DIM, VOCAB)

    def forward(self, tokens):
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


def lr_at(step):
    if step < WARMUP:
        return BASE_LR * (step + 1) / WARMUP
    return BASE_LR * 0.5 * (1 + math.cos(math.pi * (step - WARMUP) / STEPS))


def main():
    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo")
    rank = dist.get_rank()
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0"))) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    torch.manual_seed(0)
    model = Transformer().to(device)
    mesh = init_device_mesh(device.type, (dist.get_world_size(),))
    for block in model.blocks:
        fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)
    model = torch.compile(model, backend=BACKEND)
    opt = torch.optim.AdamW(model.parameters(), lr=BASE_LR)

    @torch.compile(backend=BACKEND)
    def opt_step():
        opt.step()

    gen = torch.Generator().manual_seed(1 + rank)
    times = []  # each step's seconds, the GPU's work included (synchronized)
    for step in range(STEPS):
        start = time.perf_counter()
        for group in opt.param_groups:
            group["lr"] = lr_at(step)
        tokens = torch.randint(0, VOCAB, (BATCH, SEQ + 1), generator=gen).to(device)
        logits = model(tokens[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), tokens[:, 1:].reshape(-1))
        loss.backward()
        opt_step()
        opt.zero_grad()
        if cuda:
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
        if rank == 0 and step % 10 == 0:
            print(f"step {step} loss {loss.item():.4f}")
    if rank == 0:
        late = sorted(times[len(times) // 2 :])
        print(f"steady step {late[len(late) // 2] * 1e3:.2f} ms (median of the last {len(late)} steps)")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
