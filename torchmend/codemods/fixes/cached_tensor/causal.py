"""A causal mask, recognised from its code, and the `is_causal=True` hint for the nn.Transformer* call given it.

nn.TransformerEncoder/Decoder/Transformer check a mask they are not told about with `bool((mask == causal).all())`
(`_detect_is_causal_mask` in torch/nn/modules/transformer.py): under compile a graph break on every call. The hint
skips the check; it is only added for a mask built as a causal one.
"""

from __future__ import annotations

from typing import cast

import libcst as cst

from torchmend.analysis import match as m
from torchmend.analysis.source import SourceFile
from torchmend.codemods.fixes.cached_tensor.syntax import methods, self_attr

# nn.Transformer* modules whose forward detects a causal mask when not told: mask argument -> its hint keyword,
# as (positional index, mask keyword, hint keyword).
_TRANSFORMERS: dict[str, tuple[tuple[int, str, str], ...]] = {
    "TransformerEncoder": ((1, "mask", "is_causal"),),
    "TransformerDecoder": ((2, "tgt_mask", "tgt_is_causal"),),
    "Transformer": ((2, "src_mask", "src_is_causal"), (3, "tgt_mask", "tgt_is_causal")),
}
_TORCH_MODULES = ("torch.nn.", "torch.nn.modules.transformer.")
# Submodules nn.Transformer itself creates, for a class that subclasses it (word_language_model's shape).
_TRANSFORMER_PARTS = {"encoder": "TransformerEncoder", "decoder": "TransformerDecoder"}
_CAUSAL_FUNCTIONS = {
    "torch.nn.Transformer.generate_square_subsequent_mask",
    "torch.nn.modules.transformer.Transformer.generate_square_subsequent_mask",
    "torch.nn.modules.transformer._generate_square_subsequent_mask",
}
_CONVERSIONS = {"to", "float", "half", "bfloat16", "cuda", "type", "detach", "contiguous"}


def _is_minus_inf(node: cst.CSTNode) -> bool:
    """`float("-inf")`, `-float("inf")`, `-math.inf`, `-torch.inf`, `float('-inf')`."""
    if _float_of_string(node) == "-inf":
        return True
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        inner = node.expression
        return m.matches(inner, m.Attribute(attr=m.Name("inf"))) or _float_of_string(inner) == "inf"
    return False


def _float_of_string(node: cst.CSTNode) -> str | bytes | None:
    """`float("<s>")`: s, stripped and lower-cased; None for any other node."""
    if m.matches(node, m.Call(func=m.Name("float"), args=[m.Arg(m.SimpleString())])):
        arg = cast(cst.SimpleString, cast(cst.Call, node).args[0].value)  # the matcher just checked both shapes
        return arg.evaluated_value.strip().lower()
    return None


def _is_log_of_lower_ones(call: cst.Call) -> bool:
    """`torch.log(torch.tril(torch.ones(n, n)))`: log 1 = 0 on and below the diagonal, log 0 = -inf above it
    (word_language_model's `_generate_square_subsequent_mask`)."""
    tril = call.args[0].value if m.matches(call.func, m.Attribute(attr=m.Name("log"))) and len(call.args) == 1 else None
    if not isinstance(tril, cst.Call) or not m.matches(tril.func, m.Attribute(attr=m.Name("tril"))) or not tril.args:
        return False
    diagonal = [a.value for a in tril.args[1:] if a.keyword is None or a.keyword.value == "diagonal"]
    ones = tril.args[0].value
    return (
        all(m.matches(d, m.Integer("0")) for d in diagonal)
        and isinstance(ones, cst.Call)
        and m.matches(ones.func, m.Attribute(attr=m.Name("ones")))
        and len([a for a in ones.args if a.keyword is None]) == 2
    )


def is_causal_mask(src: SourceFile, cls: cst.ClassDef, value: cst.BaseExpression, depth: int = 0) -> bool:
    """Whether `value` is a square causal mask of -inf above the diagonal: nn.Transformer's
    generate_square_subsequent_mask, torch.triu(<-inf>, diagonal=1), torch.log(torch.tril(torch.ones(n, n))), or a
    method of the class returning one."""
    while (
        isinstance(value, cst.Call)
        and isinstance(value.func, cst.Attribute)
        and m.matches(value.func.attr, m.OneOf(*(m.Name(c) for c in _CONVERSIONS)))
    ):
        value = value.func.value
    if not isinstance(value, cst.Call):
        return False
    if src.qualified_names(value.func) & _CAUSAL_FUNCTIONS:
        return True
    if _is_log_of_lower_ones(value):
        return True
    if m.matches(value.func, m.Attribute(attr=m.Name("triu"))) or m.matches(value.func, m.Name("triu")):
        diagonal = next(
            (a.value for a in value.args if a.keyword and a.keyword.value == "diagonal"),
            value.args[1].value if len(value.args) > 1 and value.args[1].keyword is None else None,
        )
        first = value.args[0].value if value.args else None
        return (
            diagonal is not None
            and m.matches(diagonal, m.Integer("1"))
            and first is not None
            and any(_is_minus_inf(n) for n in src.nodes_in(first, (cst.Call, cst.UnaryOperation)))
        )
    if depth == 0 and isinstance(value.func, cst.Attribute) and m.matches(value.func.value, m.Name("self")):
        name = value.func.attr.value
        for fn in methods(cls):
            returns = [r.value for r in m.findall(fn.body, m.Return()) if isinstance(r, cst.Return)]
            if fn.name.value == name and len(returns) == 1 and returns[0] is not None:
                return is_causal_mask(src, cls, returns[0], depth + 1)
    return False


def transformer_parts(src: SourceFile, cls: cst.ClassDef) -> dict[str, str]:
    """`self.<name>` -> which nn.Transformer* module it is, from `self.<name> = nn.TransformerEncoder(...)`."""
    parts: dict[str, str] = {}
    if any(src.qualified_names(b.value) & {p + "Transformer" for p in _TORCH_MODULES} for b in cls.bases):
        parts.update(_TRANSFORMER_PARTS)
    for assign in src.nodes_in(cls, cst.Assign):
        value = assign.value
        targets = assign.targets
        target = targets[0].target if len(targets) == 1 else None
        if not isinstance(target, cst.Attribute) or not m.matches(target.value, m.Name("self")):
            continue
        if isinstance(value, cst.Call):
            for kind in _TRANSFORMERS:
                if src.qualified_names(value.func) & {p + kind for p in _TORCH_MODULES}:
                    parts[target.attr.value] = kind
    return parts


class CausalRewrite(cst.CSTTransformer):
    """`self.<attr>` -> `<local>` (reads and the write), and the causal hint on transformer calls given it."""

    def __init__(
        self, attr: str, local: str | None, parts: dict[str, str], causal: bool, hint: cst.BaseExpression
    ) -> None:
        super().__init__()
        self.attr, self.local, self.parts, self.causal, self.hint = attr, local, parts, causal, hint
        self.hinted: list[str] = []

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.BaseExpression:
        if self.local and m.matches(original, self_attr(self.attr)):
            return cst.Name(self.local)
        return updated

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        func = original.func
        part = func.attr.value if isinstance(func, cst.Attribute) and m.matches(func.value, m.Name("self")) else None
        if not self.causal or part not in self.parts:
            return updated
        keywords = {a.keyword.value for a in original.args if a.keyword}
        positional = [a for a in original.args if a.keyword is None and not a.star]
        hints = []
        for index, mask_kw, hint in _TRANSFORMERS[self.parts[part]]:
            given = next(
                (a.value for a in original.args if a.keyword and a.keyword.value == mask_kw),
                positional[index].value if len(positional) > index else None,
            )
            if given is not None and m.matches(given, self_attr(self.attr)) and hint not in keywords:
                hints.append(hint)
        if not hints or any(a.star for a in original.args):
            return updated
        self.hinted += hints
        args = list(updated.args)
        last = args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT) if args else None
        new = [
            cst.Arg(
                self.hint,
                keyword=cst.Name(h),
                equal=cst.AssignEqual(
                    whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")
                ),
            )
            for h in hints
        ]
        return updated.with_changes(args=[*args[:-1], *([last] if last else []), *new])
