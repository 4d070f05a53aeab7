"""What breaks on one release and not the next, and modules built in compiled code (analysis/dynamo_tables.py has
the releases): a call the release's dynamo skips (`copy.copy` on 2.11: TM105), module state cast in forward
(`self.buf = self.buf.to(...)`: TM103 for a buffer, TM199 for a submodule, before 2.13), and a parameter or a
module with parameters built in compiled code (`nn.Parameter(...)`, `nn.Linear(...)`: GB0264 on 2.11–2.15, TM199).
A release lint does not know (None) is taken to be the oldest, as for a tensor `assert` (checks.py)."""

from __future__ import annotations

import libcst as cst

from torchmend.analysis import match as m
from torchmend.analysis.dynamo_tables import MODULE_STATE_CAST_FROM, SKIPPED_BEFORE
from torchmend.analysis.source import SourceFile

# torch.nn classes whose constructor makes parameters (GB0264 "Attempted to use `torch.nn.Parameter()` constructor")
_WITH_PARAMETERS = {"Parameter", "Linear", "Bilinear", "Embedding", "EmbeddingBag", "LayerNorm", "GroupNorm"}
_WITH_PARAMETERS |= {"RMSNorm", "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "BatchNorm1d"}
_WITH_PARAMETERS |= {"BatchNorm2d", "BatchNorm3d", "MultiheadAttention", "LSTM", "GRU", "RNN", "PReLU"}


def _before(src: SourceFile, release: tuple[int, int]) -> bool:
    return src.torch_version is None or src.torch_version[:2] < release


def skipped_call(src: SourceFile, call: cst.Call) -> str | None:
    """A function the release's dynamo skips (GB0007): the graph ends at the call."""
    for name in src.qualified_names(call.func):
        release = SKIPPED_BEFORE.get(name)
        if release is not None and _before(src, release):
            return f"`{name}` is skipped by dynamo before torch {'.'.join(map(str, release))}: the graph ends here"
    return None


def built_in_forward(src: SourceFile, call: cst.Call) -> str | None:
    """`nn.Parameter(...)` or a torch.nn module that makes parameters, constructed in compiled code."""
    for name in src.qualified_names(call.func):
        if name.startswith("torch.nn.") and name.rsplit(".", 1)[-1] in _WITH_PARAMETERS:
            what = name.rsplit(".", 1)[-1]
            return f"`nn.{what}(...)` is built in compiled code: dynamo cannot construct a parameter there"
    return None


def state_cast(src: SourceFile, node: cst.Assign, me: str) -> tuple[str, str] | None:
    """`self.x = self.x.to(...)` in forward where the class registers `x` as a buffer (TM103) or builds it as a
    torch.nn module (TM199): a break before 2.13. (rule, what) or None."""
    if len(node.targets) != 1 or not _before(src, MODULE_STATE_CAST_FROM):
        return None
    target = node.targets[0].target
    if not m.matches(target, m.Attribute(value=m.Name(me))):
        return None
    assert isinstance(target, cst.Attribute)
    name = target.attr.value
    value = node.value
    cast = m.matches(value, m.Call(func=m.Attribute(value=m.Attribute(value=m.Name(me), attr=m.Name(name)))))
    if not cast or not isinstance(value, cst.Call) or not isinstance(value.func, cst.Attribute):
        return None
    if value.func.attr.value not in ("to", "half", "float", "bfloat16", "double", "type"):
        return None
    cls = src.enclosing(node, cst.ClassDef)
    if cls is None:
        return None
    held = _held(src, cls, name)
    release = ".".join(map(str, MODULE_STATE_CAST_FROM))
    if held == "buffer":
        return "TM103", f"`{src.code(target)}` is a buffer set in compiled code: torch before {release} breaks there"
    if held == "module":
        return "TM199", f"`{src.code(target)}` is a submodule cast in compiled code: torch before {release} breaks"
    return None


def _held(src: SourceFile, cls: cst.ClassDef, name: str) -> str | None:
    """What the class keeps under `name`: a "buffer" (`self.register_buffer("x", ...)`, `self.x = nn.Buffer(...)`)
    or a "module" (`self.x = nn.Linear(...)`)."""
    for call in src.nodes_in(cls, cst.Call):
        if (
            m.matches(call.func, m.Attribute(attr=m.Name("register_buffer")))
            and call.args
            and m.matches(call.args[0].value, m.SimpleString())
            and call.args[0].value.value[1:-1] == name  # type: ignore[attr-defined]
        ):
            return "buffer"
    for assign in src.nodes_in(cls, cst.Assign):
        if len(assign.targets) != 1 or not m.matches(assign.targets[0].target, m.Attribute(attr=m.Name(name))):
            continue
        if not isinstance(assign.value, cst.Call):
            continue
        for q in src.qualified_names(assign.value.func):
            leaf = q.rsplit(".", 1)[-1]
            if q.startswith("torch.nn.") and leaf == "Buffer":
                return "buffer"
            if q.startswith("torch.nn.") and leaf[:1].isupper() and leaf != "Parameter":
                return "module"
    return None
