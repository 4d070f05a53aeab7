"""Turn an int/float attribute of an nn.Module that changes into a registered buffer (TM201).

Dynamo treats a plain number on a module as a constant and guards on its value, so `self.calls += 1`
recompiles on every call until the recompile limit. A 0-dim tensor buffer is data instead: one graph
reads and updates it. The rewrite covers every place the class family touches the attribute, so it
is all-or-nothing: if one use needs a Python number, nothing is proposed.

The package: module.py knows the module classes and how each use of the attribute reads or writes it;
plan.py decides the edit and writes the proposal; locate.py goes from a finding to the class; recompile_limit.py
is the codemod of TM250, a recompile limit reached on such an attribute (the same edit, one proposal).
"""

from __future__ import annotations

from torchmend.analysis.source import Context
from torchmend.codemods.base import Codemod, Invalid, Result, Valid
from torchmend.codemods.fixes.module_buffer.locate import propose_buffer
from torchmend.model import Finding


class ModuleScalarToBuffer(Codemod):
    """Turn an int/float attribute of an nn.Module that changes into a registered buffer.

    What it does:
        TM201: an int or float attribute of an nn.Module that changes between calls, typically a counter
        bumped in forward (`self.calls += 1`).

    Why is this bad:
        Dynamo treats a number stored on a module as a constant: it bakes the value into the graph and
        guards on it (`self.calls == 3`). Every new value fails the guard and compiles a new graph, until the
        recompile limit sends the module back to eager.

    Example:
        def __init__(self):
            super().__init__()
            self.calls = 0

        def forward(self, x):
            self.calls += 1
            return self.fc(x)

    Fix:
        def __init__(self):
            super().__init__()
            self.register_buffer("calls", torch.tensor(0), persistent=False)

        def forward(self, x):
            self.calls.add_(1)
            return self.fc(x)

    Fix safety:
        Unsafe: the attribute becomes a 0-dim tensor, and code that reads it as a number (printing, json,
        isinstance) sees a tensor. Ints stay exact (int64); a float attribute (a float value, or `/=`)
        becomes a buffer of the default float dtype (float32), which follows model.to(dtype) like the
        parameters but keeps about 7 significant digits instead of 16. The buffer is non-persistent, so
        state_dict() and checkpoints do not change. Every update is in place (`add_`, `mul_`, ...; any other
        assignment becomes `.fill_(v)`), so CUDA graphs keep updating the tensor they captured. A read that
        autograd may save for backward, or that leaves the expression, becomes `self.calls.clone()`: a later
        in-place update would otherwise change the saved value. Uses that need a Python number
        (an `if` on it, range(), a shape, an index, formatting) or assignments from outside the class are
        refused. A model built on the meta device and materialised with to_empty() must set the buffer
        again afterwards, as for any buffer. When verification refuses the in-place form, its fallback
        rebinds the buffer at each update instead (`self.calls = self.calls + 1`): on torch 2.13 to 2.15
        AOTAutograd's partitioner can recompute a read of the buffer in the backward after the in-place
        update (pytorch PR #197039), and the rebinding form leaves nothing the forward read mutated; it does
        not suit CUDA graphs.
    """

    rules = ("TM201",)
    name = "module-scalar-to-buffer"
    INVALID = (
        # the counter of fixtures/scan/module_counter
        Invalid(
            """
            import torch
            from torch import nn


            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc = nn.Linear(16, 1)
                    self.forward_calls = 0

                def forward(self, x):  # tm-compiled
                    self.forward_calls += 1  # tm: TM201 variable=self.forward_calls
                    return self.fc(x)
            """,
            """
            import torch
            from torch import nn


            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc = nn.Linear(16, 1)
                    self.register_buffer("forward_calls", torch.tensor(0), persistent=False)

                def forward(self, x):  # tm-compiled
                    self.forward_calls.add_(1)  # tm: TM201 variable=self.forward_calls
                    return self.fc(x)
            """,
        ),
        # `import torch as t`, single quotes, a reset method, a float update: a float buffer and fill_
        Invalid(
            """
            import torch as t


            class Decay(t.nn.Module):
                kind = 'decay'

                def __init__(self):
                    super().__init__()
                    self.scale = 1  # starts at one

                def reset(self):
                    self.scale = 1

                def forward(self, x):
                    self.scale *= 0.5  # tm: TM201 variable=self.scale
                    return t.relu(x)
            """,
            """
            import torch as t


            class Decay(t.nn.Module):
                kind = 'decay'

                def __init__(self):
                    super().__init__()
                    self.register_buffer('scale', t.tensor(1.0), persistent=False)  # starts at one

                def reset(self):
                    self.scale.fill_(1)

                def forward(self, x):
                    self.scale.mul_(0.5)  # tm: TM201 variable=self.scale
                    return t.relu(x)
            """,
        ),
        # read where autograd saves it: the read takes a snapshot, the updates stay in place; torch import added
        Invalid(
            """
            from torch import nn


            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc = nn.Linear(4, 4)
                    self.step = 0

                def forward(self, x):
                    y = self.fc(x) * self.step
                    self.step += 1  # tm: TM201 variable=self.step
                    return y

                def restart(self):
                    self.step = 0
            """,
            """
            from torch import nn
            import torch


            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc = nn.Linear(4, 4)
                    self.register_buffer("step", torch.tensor(0), persistent=False)

                def forward(self, x):
                    y = self.fc(x) * self.step.clone()
                    self.step.add_(1)  # tm: TM201 variable=self.step
                    return y

                def restart(self):
                    self.step.fill_(0)
            """,
        ),
    )
    VALID = (
        # tested in an `if`: as a tensor that is a data-dependent graph break
        Valid(
            """
            import torch
            from torch import nn


            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.calls = 0

                def forward(self, x):
                    self.calls += 1  # tm: TM201 variable=self.calls
                    if self.calls > 10:
                        x = x * 2
                    return x
            """,
        ),
        # set from outside the class
        Valid(
            """
            import torch
            from torch import nn


            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.calls = 0

                def forward(self, x):
                    self.calls += 1  # tm: TM201 variable=self.calls
                    return x


            model = Net()
            model.calls = 5
            """,
        ),
        # already a buffer
        Valid(
            """
            import torch
            from torch import nn


            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.register_buffer('calls', torch.tensor(0), persistent=False)

                def forward(self, x):
                    self.calls.add_(1)  # tm: TM201 variable=self.calls
                    return x
            """,
        ),
    )

    def propose(self, finding: Finding, ctx: Context) -> Result:
        return propose_buffer(finding, ctx)
