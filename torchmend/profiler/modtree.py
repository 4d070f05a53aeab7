"""The module tree of what a torch.compile call compiles, as the child sees it (this module imports torch): one row
per submodule, with the lines of its class's `forward` and the parameters it holds itself. The parent reads breaks'
stacks against these lines to find the submodules that compiled without a break (profiler/placement.py)."""

from __future__ import annotations

import inspect
import sys
from types import FrameType
from typing import Any

import torch

# A model larger than this is not described (the event stays small): placement is then not offered.
MAX_MODULES = 3000


def compiled_module(target: Any) -> torch.nn.Module | None:
    """The nn.Module a torch.compile call compiles: the module itself, or the module whose bound method it is
    (`nn.Module.compile()` compiles `self._call_impl`)."""
    if isinstance(target, torch.nn.Module):
        return target
    owner = getattr(target, "__self__", None) if inspect.ismethod(target) else None
    return owner if isinstance(owner, torch.nn.Module) else None


def module_tree(target: Any) -> list[list[Any]] | None:
    """[name, class name, forward's file, first line, last line, own parameters (numel), callable] per submodule,
    in named_modules() order (the root first, as ""); None for a function, or a model over MAX_MODULES.
    `callable`: the class defines forward (a ModuleList or ModuleDict does not: it cannot be compiled alone)."""
    model = compiled_module(target)
    if model is None:
        return None
    rows: list[list[Any]] = []
    for name, mod in model.named_modules():
        if len(rows) >= MAX_MODULES:
            return None
        forward = getattr(type(mod), "forward", None)
        code = getattr(forward, "__code__", None)
        own = forward is not torch.nn.Module.forward and code is not None
        lines = [line for _, _, line in code.co_lines() if line] if code is not None else []
        params = sum(p.numel() for p in mod.parameters(recurse=False))
        rows.append(
            [
                name,
                type(mod).__qualname__,
                code.co_filename if code is not None else "",
                code.co_firstlineno if code is not None else 0,
                max(lines, default=0),
                params,
                own,
            ]
        )
    return rows


def caller_outside_torch() -> list[Any] | None:
    """[file, line] of the innermost frame outside torch's own files: the script's compile call (for
    `model.compile()`, its line, not nn.Module's)."""
    root = torch.__file__.rsplit("/", 1)[0] + "/"
    here = __file__.rsplit("/", 1)[0] + "/"
    f: FrameType | None = sys._getframe(1)
    while f is not None and (f.f_code.co_filename.startswith((root, here)) or f.f_code.co_filename == __file__):
        f = f.f_back
    return [f.f_code.co_filename, f.f_lineno] if f is not None else None
