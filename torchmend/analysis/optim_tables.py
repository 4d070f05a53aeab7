"""Tables of torch.optim: the optimizers that take a Tensor lr (and their default lr), those that need
`capturable` with `foreach`, and the lr_scheduler arguments that give each param group its own value.

Shared by the fixes and the optimizer locator.
"""

from __future__ import annotations

# torch.optim classes that take a Tensor lr and, compiled, do not recompile when it changes in place, with
# their default lr (checked against torch 2.13: each one stepped under torch.compile while the lr was
# changed with fill_, one compile). Not here: LBFGS (its closure is not compiled), SparseAdam, Adafactor, Muon.
OPTIMIZER_DEFAULT_LR = {
    "Adam": "1e-3",
    "AdamW": "1e-3",
    "SGD": "1e-3",
    "RAdam": "1e-3",
    "Adamax": "2e-3",
    "NAdam": "2e-3",
    "Adagrad": "1e-2",
    "RMSprop": "1e-2",
    "Rprop": "1e-2",
    "ASGD": "1e-2",
    "Adadelta": "1.0",
}

# Adam and AdamW raise "lr as a Tensor is not supported for capturable=False and foreach=True".
FOREACH_NEEDS_CAPTURABLE = {"Adam", "AdamW"}

# lr_scheduler arguments that give each param group its own value: (name, position).
SCHEDULER_PER_GROUP_ARGS = {
    "LambdaLR": (("lr_lambda", 1),),
    "MultiplicativeLR": (("lr_lambda", 1),),
    "OneCycleLR": (("max_lr", 1),),
    "CyclicLR": (("base_lr", 1), ("max_lr", 2)),
    "ReduceLROnPlateau": (("min_lr", 7),),
}
