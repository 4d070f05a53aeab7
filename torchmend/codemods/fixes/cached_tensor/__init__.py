"""Stop caching a tensor on the module inside a compiled forward (TM208).

`if self.mask is None or self.mask.size(0) != n: self.mask = ...` makes dynamo guard on the attribute being
None and on its size, so the second call and every new size recompile. Computed as a local, the tensor is
part of the graph; built once in `__init__` (when its shape does not depend on the input), it is a buffer.
A causal mask handed to nn.Transformer* also gets `is_causal=True`, which skips the library's mask check
(`_detect_is_causal_mask`: `bool((mask == causal).all())`, a graph break on every call).
"""

from __future__ import annotations

import re

from torchmend import rules
from torchmend.analysis.source import Context
from torchmend.codemods.base import Codemod, Invalid, NoFix, Refuse, Result, Valid
from torchmend.codemods.fixes.cached_tensor.plan import already_local, locate, plan
from torchmend.model import Finding, Where

# `self.mask`, `self._modules['pos'].table`, `self.mask.size()[0]` -> the attribute's own name
_VARIABLE = re.compile(r"(?:.*\.)?(?P<attr>[A-Za-z_]\w*)(?:\.size\(\)\[\d+\]|\.shape\[\d+\])?")


class CachedTensorToLocal(Codemod):
    """Compute a tensor cached on the module in forward, or build it once as a buffer.

    What it does:
        TM208: a compiled `forward` keeps a tensor on the module and rebuilds it when it is missing or the
        wrong size: `if self.mask is None or self.mask.size(0) != n: self.mask = ...`.

    Why is this bad:
        Dynamo guards on what forward reads from the module: `self.mask is None` fails on the second call and
        the mask's size on every new length, so each one compiles forward again. The cache saves nothing under
        compile: building the tensor in the graph costs less than a recompile. A causal mask given to
        nn.TransformerEncoder/Decoder/Transformer without `is_causal` is also checked with
        `bool((mask == causal).all())` in torch/nn/modules/transformer.py: a graph break on every call.

    Example:
        if self.src_mask is None or self.src_mask.size(0) != len(src):
            self.src_mask = nn.Transformer.generate_square_subsequent_mask(len(src))
        out = self.encoder(src, self.src_mask)

    Fix:
        src_mask = nn.Transformer.generate_square_subsequent_mask(len(src))
        out = self.encoder(src, src_mask, is_causal=True)

        The tensor becomes a local of forward, and `self.src_mask = None` in `__init__` goes when nothing
        else reads the attribute. When the test is only `is None` and the tensor does not depend on the
        input, it becomes `self.register_buffer(name, ..., persistent=False)` at the end of `__init__`.
        When the cache sits in one arm of an `if` whose other arms set the attribute to None (`if has_mask:
        <cache> else: self.src_mask = None`), each arm sets the local (`src_mask = None`) and the hint follows
        it: `is_causal=src_mask is not None` (PyTorch refuses `is_causal=True` without a mask). Nothing is
        proposed when a path through that `if` sets neither, or one arm both clears and rebuilds it.

    Fix safety:
        Safe, or unsafe when it adds `is_causal=True`. Without the hint the values are the same, computed on
        each call instead of kept (and nothing is proposed when anything else in the file reads the
        attribute). With it, PyTorch trusts the hint and may take another attention kernel: the mask is
        recognised as causal from its code, but results can differ in the last bits; verify compares them.
    """

    rules = ("TM208",)
    name = "cached-tensor-to-local"
    INVALID = (
        Invalid(
            """
            import torch
            from torch import nn


            class LM(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.mask = None
                    self.encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(16, 2), 2)

                def forward(self, src):
                    if self.mask is None or self.mask.size(0) != len(src):  # tm: TM208 variable=self.mask
                        self.mask = nn.Transformer.generate_square_subsequent_mask(len(src))
                    return self.encoder(src, self.mask)
            """,
            """
            import torch
            from torch import nn


            class LM(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(16, 2), 2)

                def forward(self, src):
                    mask = nn.Transformer.generate_square_subsequent_mask(len(src))  # tm: TM208 variable=self.mask
                    return self.encoder(src, mask, is_causal=True)
            """,
        ),
        # a table that depends on the input's length: a local, temporaries and all
        Invalid(
            """
            import torch
            from torch import nn


            class Positions(nn.Module):
                def __init__(self, dim):
                    super().__init__()
                    self.inv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim))
                    self.table = None

                def forward(self, x):
                    n = x.shape[1]
                    if self.table is None or self.table.shape[0] != n:  # tm: TM208 variable=self.table
                        freqs = torch.outer(torch.arange(n, dtype=torch.float32), self.inv_freq)
                        self.table = torch.cat([freqs.sin(), freqs.cos()], dim=-1)
                    return x + self.table
            """,
            """
            import torch
            from torch import nn


            class Positions(nn.Module):
                def __init__(self, dim):
                    super().__init__()
                    self.inv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim))

                def forward(self, x):
                    n = x.shape[1]
                    freqs = torch.outer(torch.arange(n, dtype=torch.float32), self.inv_freq)  # tm: TM208 variable=self.table
                    table = torch.cat([freqs.sin(), freqs.cos()], dim=-1)
                    return x + table
            """,
        ),
        # built once, whatever the input: a buffer made in __init__
        Invalid(
            """
            import torch
            from torch import nn


            class Block(nn.Module):
                def __init__(self, size):
                    super().__init__()
                    self.size = size
                    self.bias = None

                def forward(self, att):
                    if self.bias is None:  # tm: TM208 variable=self.bias
                        self.bias = torch.tril(torch.ones(self.size, self.size)).bool()
                    return att.masked_fill(~self.bias, 0.0)
            """,
            """
            import torch
            from torch import nn


            class Block(nn.Module):
                def __init__(self, size):
                    super().__init__()
                    self.size = size
                    self.register_buffer("bias", torch.tril(torch.ones(self.size, self.size)).bool(), persistent=False)

                def forward(self, att):
                    return att.masked_fill(~self.bias, 0.0)
            """,
        ),
    )
    VALID = (
        # another method reads the cache: dropping it would break that method
        Valid(
            """
            import torch
            from torch import nn


            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.mask = None

                def forward(self, x):
                    if self.mask is None or self.mask.size(0) != x.size(0):  # tm: TM208 variable=self.mask
                        self.mask = torch.ones(x.size(0))
                    return x * self.mask

                def last_mask(self):
                    return self.mask
            """,
        ),
        # the cache is also cleared elsewhere in forward: not a plain cache
        Valid(
            """
            import torch
            from torch import nn


            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.mask = None

                def forward(self, x, reset=False):
                    if reset:
                        self.mask = None
                    if self.mask is None:  # tm: TM208 variable=self.mask
                        self.mask = torch.ones_like(x)
                    return x * self.mask
            """,
        ),
    )

    def propose(self, finding: Finding, ctx: Context) -> Result:
        parsed = _VARIABLE.fullmatch(finding.variable or "")
        if parsed is None:
            return NoFix(finding, "the guard names no module attribute", _advice())
        if finding.where != Where.PROJECT and finding.user_frame is None:
            return NoFix(finding, "the cached tensor is not in this project's code", _advice())
        cache = locate(finding, ctx, parsed["attr"])
        if cache is None:
            return NoFix(
                finding,
                f"no `if ...: self.{parsed['attr']} = ...` cache found in a method of a class in the finding's file",
                _advice(),
                skipped=already_local(finding, ctx, parsed["attr"]),
            )
        try:
            return plan(finding, cache)
        except Refuse as e:
            return NoFix(finding, str(e), _advice())


def _advice() -> str:
    return rules.BY_CODE["TM208"].advice
