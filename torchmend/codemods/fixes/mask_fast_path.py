"""Drop a mask's data-dependent fast path inside compiled code (TM103, dispatched by branch_to_where).

What it does:
    TM103, one shape of it: an `if` with no `else` whose test reduces a mask over its values (`.any()`,
    `.all()`, `torch.any`, `torch.all`) and whose only statement throws the mask away: `mask = None` (a name
    the test reads, with `mask` in it) or `return None` (the test reading such a name). A loss or other value set
    to None when it is not finite is not a mask: left to the general TM103 fix. `if not padding_mask.any(): padding_mask = None`, `if torch.all(mask == 1):
    mask = None`, `if attention_mask is not None and attention_mask.all(): return None`. The test gets
    `not torch.compiler.is_compiling() and` in front: eager runs keep the fast path, compiled code always takes
    the general path with the mask.

Why is this bad:
    `.any()` / `.all()` give a tensor whose value dynamo does not know while it traces; the `if` needs a Python
    bool, so the graph breaks there on every call (the public graph-break corpus's largest data-dependent
    family). The fast path exists only to skip work when the mask masks nothing; the general path computes the
    same values with a mask that masks nothing (a padding mask of all False fills nothing, an attention mask of
    all ones adds zeros). Under compile, `is_compiling()` is a constant True: the `if` vanishes from the trace.

Example:
    padding_mask = input_ids.eq(pad_id)
    if not padding_mask.any():
        padding_mask = None

Fix:
    padding_mask = input_ids.eq(pad_id)
    if not torch.compiler.is_compiling() and not padding_mask.any():
        padding_mask = None

Fix safety:
    Unsafe: the compiled code now always builds and applies the mask. That is the same computation only when
    the code after it treats "no mask" as "a mask that masks nothing", which torchmend cannot see (a kernel
    choice such as `is_causal=True` when the mask is None, a different attention implementation, a mask of
    another dtype); the verified re-run decides. It also costs the masking work the fast path skipped. Not
    offered when the `if` has an `else`, does more than drop the mask, or is already gated by is_compiling().
"""

from __future__ import annotations

import libcst as cst

from torchmend.analysis.dynamo_tables import IS_COMPILING
from torchmend.analysis.gating import already_gated
from torchmend.analysis.source import SourceFile
from torchmend.codemods.base import UNSAFE, NoFix, Proposal, Result
from torchmend.model import Finding

_REDUCTIONS = ("any", "all")
_TORCH_REDUCTIONS = {"torch.any", "torch.all"}
_BARE = (cst.Name, cst.Attribute, cst.Call, cst.Subscript, cst.Comparison, cst.UnaryOperation)

# The examples, run by tests/unit/test_mask_fast_path.py through TM103's dispatch (`# tm:` markers, see examples.py).
INVALID = (
    (
        """
        import torch

        def make_padding_mask(ids, pad):
            mask = ids.eq(pad)
            if not mask.any():  # tm: TM103
                mask = None
            return mask
        """,
        """
        import torch

        def make_padding_mask(ids, pad):
            mask = ids.eq(pad)
            if not torch.compiler.is_compiling() and not mask.any():  # tm: TM103
                mask = None
            return mask
        """,
    ),
    (
        """
        import torch as t

        def expand(mask, dtype):
            if mask is not None and t.all(mask == 1):  # tm: TM103
                return None
            return (1.0 - mask[:, None, None, :].to(dtype)) * t.finfo(dtype).min
        """,
        """
        import torch as t

        def expand(mask, dtype):
            if not t.compiler.is_compiling() and (mask is not None and t.all(mask == 1)):  # tm: TM103
                return None
            return (1.0 - mask[:, None, None, :].to(dtype)) * t.finfo(dtype).min
        """,
    ),
)
VALID = (
    # not a mask: a value dropped when it is not finite
    """
    import torch

    def f(loss):
        if not torch.isfinite(loss).all():  # tm: TM103
            loss = None
        return loss
    """,
    # already gated
    """
    import torch

    def f(mask):
        if not torch.compiler.is_compiling() and not mask.any():  # tm: TM103
            mask = None
        return mask
    """,
    # drops another name than the one tested: not a fast path of this mask
    """
    import torch

    def f(mask, bias):
        if not mask.any():  # tm: TM103
            bias = None
        return mask, bias
    """,
)


def _drops_mask(src: SourceFile, node: cst.If) -> str | None:
    """`mask = None` (a name the test reads) or `return None` as the `if`'s only statement: what it drops."""
    body = node.body.body
    if len(body) != 1 or not isinstance(body[0], cst.SimpleStatementLine) or len(body[0].body) != 1:
        return None
    small = body[0].body[0]
    masks = [n.value for n in src.nodes_in(node.test, cst.Name) if "mask" in n.value.lower()]
    if isinstance(small, cst.Return):
        none = isinstance(small.value, cst.Name) and small.value.value == "None"
        return f"the function's mask (`{masks[0]}`)" if none and masks else None
    if (
        isinstance(small, cst.Assign)
        and len(small.targets) == 1
        and isinstance(small.targets[0].target, cst.Name)
        and isinstance(small.value, cst.Name)
        and small.value.value == "None"
    ):
        name = small.targets[0].target.value
        return f"`{name}`" if name in masks else None
    return None


def _reduces(src: SourceFile, test: cst.BaseExpression) -> bool:
    """The test reduces a tensor over its values: `.any()`, `.all()`, `torch.any(...)`, `torch.all(...)`."""
    for call in src.nodes_in(test, cst.Call):
        func = call.func
        if src.qualified_names(func) & _TORCH_REDUCTIONS:
            return True
        if isinstance(func, cst.Attribute) and func.attr.value in _REDUCTIONS and not call.args:
            return True
    return False


def mask_fast_path(finding: Finding, src: SourceFile, node: cst.If) -> Result | None:
    """The proposal (or why not) when `node` is a mask's fast path; None when it is not that shape."""
    if node.orelse is not None or isinstance(src.parents.get(node), cst.If):  # an else, or an elif
        return None
    dropped = _drops_mask(src, node)
    if dropped is None or not _reduces(src, node.test):
        return None
    gated = already_gated(src, node) or any(
        src.qualified_names(c.func) & IS_COMPILING for c in src.nodes_in(node.test, cst.Call)
    )
    if gated:
        return NoFix(finding, "the fast path is already skipped under compile (is_compiling())", skipped=True)
    is_compiling, imports = src.torch_expr("compiler.is_compiling")
    test = node.test
    if not isinstance(test, _BARE):  # `a and b`, `a or b`: kept as one operand
        test = test.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    new = cst.BooleanOperation(
        left=cst.UnaryOperation(cst.Not(), cst.Call(is_compiling)),
        operator=cst.And(),
        right=test,
    )
    return Proposal(
        (finding,),
        finding.rule,
        src.path,
        replace={node.test: new},
        imports=imports,
        safety=UNSAFE,
        why=f"skip the fast path that drops {dropped} when it masks nothing, under compile only: compiled code "
        "takes the general path with the mask (no data-dependent `if`), eager runs are unchanged",
        note="the same values only if the code after it treats no mask as a mask that masks nothing (check "
        "kernel choices such as `is_causal` taken when the mask is None); the masking work is no longer skipped "
        "under compile",
        alternative="delete the fast path, or compute the test outside the compiled region and pass the outcome",
    )
