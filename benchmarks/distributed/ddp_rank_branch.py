"""ddp.py with a branch on the rank inside the compiled forward, as people write a log line for rank 0 only: rank 0
breaks the graph at the `print` there and the other ranks do not (issue 32's rank-divergence run). Everything
else is ddp.py's (same model, schedule and knobs).

    torchrun --nproc-per-node 2 benchmarks/distributed/ddp_rank_branch.py
"""

import ddp
import torch.distributed as dist


# The branch on the rank: rank 0 compiles a graph break here, the others do not.
class RankLoggingTransformer(ddp.Transformer):
    def forward(self, tokens):
        logits = super().forward(tokens)
        if dist.get_rank() == 0:
            print("rank 0 logits", logits.shape)
        return logits


if __name__ == "__main__":
    ddp.Transformer = RankLoggingTransformer
    ddp.main()
