"""Keep an `assert` on a tensor inside the graph (TM108): its test as one boolean tensor, its message constant."""

from __future__ import annotations

import libcst as cst

from torchmend.analysis.source import Context, SourceFile
from torchmend.codemods.base import SAFE, UNSAFE, Codemod, Invalid, NoFix, Proposal, Result, Valid
from torchmend.codemods.fixes.branch_to_where.condition import Unfixable, hazards_of, mask_of, short, split_test
from torchmend.codemods.fixes.compile_config.capture import capture_scalars_in_library
from torchmend.model import Finding, Where

_ADVICE = (
    'write the check as `torch._assert_async(<boolean tensor>, "constant message")` (it stays in the graph and '
    "raises a RuntimeError when the tensor is False), or check outside the compiled function"
)
_RUNTIME_ERROR = (
    "under torch.compile a failing check raises RuntimeError (torch._assert_async in the graph), not "
    "AssertionError; in eager mode it is still an AssertionError"
)


class _DropItem(cst.CSTTransformer):
    """`t.item()` -> `t`: the comparison then stays a tensor (dynamo breaks the graph at `.item()`)."""

    def __init__(self) -> None:
        super().__init__()
        self.dropped: list[str] = []

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        func = updated.func
        if isinstance(func, cst.Attribute) and func.attr.value == "item" and not updated.args:
            self.dropped.append(short(original))
            return func.value
        return updated


def _constant_message(msg: cst.BaseExpression | None) -> bool:
    if msg is None:
        return True
    if isinstance(msg, cst.SimpleString):
        return True
    if isinstance(msg, cst.ConcatenatedString):
        return _constant_message(msg.left) and _constant_message(msg.right)
    return False


def _message_text(msg: cst.BaseExpression) -> str | None:
    """The text of an f-string with each `{value}` left as its source (values cannot be formatted in the graph)."""
    if isinstance(msg, cst.ConcatenatedString):
        left, right = _message_text(msg.left), _message_text(msg.right)
        return None if left is None or right is None else left + right
    if isinstance(msg, cst.SimpleString):
        value = msg.evaluated_value
        return value if isinstance(value, str) else None
    if isinstance(msg, cst.FormattedString):
        parts = []
        for p in msg.parts:
            if isinstance(p, cst.FormattedStringText):
                parts.append(p.value.replace("{{", "{").replace("}}", "}"))
            elif isinstance(p, cst.FormattedStringExpression):
                parts.append("{" + short(p.expression) + "}")
        return "".join(parts)
    return None


class TensorAssert(Codemod):
    """Keep an `assert` on a tensor inside the compiled graph.

    What it does:
        TM108: an `assert` whose test is a tensor (`assert x.isnan().sum() == 0 and y.isnan().sum() == 0`,
        `assert x.max().item() <= n`) in a torch.compile'd function or module, where the graph breaks.

    Why is this bad:
        Dynamo turns `assert <one tensor>, "constant message"` into `torch._assert_async` itself, so the
        check runs inside the graph. It cannot when the test jumps on a tensor before the assert does (`and`,
        `or` between tensor tests), when the test turns a tensor into a Python number (`.item()`), or when
        the message is computed (an f-string): then the graph breaks at the assert on every call.

    Example:
        assert x_max.isnan().sum() == 0 and x_min.isnan().sum() == 0, "NaN in the range"

    Fix:
        assert (x_max.isnan().sum() == 0) & (x_min.isnan().sum() == 0), "NaN in the range"

        An assert on an `.item()` inside an installed library (never edited) gets
        `torch._dynamo.config.capture_scalar_outputs = True` before the script's compile call: the number stays
        symbolic and the check becomes a runtime assert in the graph.

    Fix safety:
        Safe when every tested value is harmless to compute, unsafe otherwise. The check still runs and still
        raises: in eager mode as before (AssertionError); under torch.compile as a RuntimeError from
        torch._assert_async. `and`/`or` become `&`/`|`, which compute every operand (`and` stopped at the
        first false one), and `.item()` is dropped so the comparison stays a tensor. A computed message
        cannot stay in the graph: the assert becomes `torch._assert_async(test, "constant text")`, which
        loses the values the message showed, is not removed by `python -O` (an assert is), and on CUDA fails
        asynchronously (a device-side assert) instead of raising at the line.
    """

    rules = ("TM108",)
    name = "assert-in-graph"
    INVALID = (
        Invalid(
            """
            import torch

            def f(x):
                lo, hi = x.min(), x.max()
                assert lo.isnan().sum() == 0 and hi.isnan().sum() == 0, "NaN in the range"  # tm: TM108
                return x - lo
            """,
            """
            import torch

            def f(x):
                lo, hi = x.min(), x.max()
                assert (lo.isnan().sum() == 0) & (hi.isnan().sum() == 0), "NaN in the range"  # tm: TM108
                return x - lo
            """,
        ),
        # .item() in the test: the comparison stays on the tensor
        Invalid(
            """
            import torch

            def f(ids, vocab: int):
                assert ids.max().item() < vocab, "id out of range"  # tm: TM108
                return ids
            """,
            """
            import torch

            def f(ids, vocab: int):
                assert ids.max() < vocab, "id out of range"  # tm: TM108
                return ids
            """,
        ),
        # a computed message: torch._assert_async with the message's text
        Invalid(
            """
            import torch

            def f(x):
                assert not x.isinf().any(), f"inf in {x.shape}"  # tm: TM108
                return x
            """,
            """
            import torch

            def f(x):
                torch._assert_async(~x.isinf().any(), "inf in {x.shape}")  # tm: TM108
                return x
            """,
        ),
    )
    VALID = (
        # one tensor and a constant message: dynamo keeps it in the graph already
        Valid(
            """
            import torch

            def f(x):
                assert (x.min() >= 0) & (x.max() <= 1), "outside [0, 1]"  # tm: TM108
                return x
            """,
        ),
    )

    def propose(self, finding: Finding, ctx: Context) -> Result:
        if finding.where != Where.PROJECT and finding.gb_id == "GB0124":  # an assert on a library's `.item()`
            return capture_scalars_in_library(finding, ctx)
        if finding.where != Where.PROJECT:
            return NoFix(
                finding,
                f"the assert is in {finding.file}, outside your project; torchmend does not edit libraries",
                _ADVICE,
            )
        src = ctx.file(finding.path)
        stmt = src.statement_at(finding.line)
        node = (
            next((s for s in stmt.body if isinstance(s, cst.Assert)), None)
            if isinstance(stmt, cst.SimpleStatementLine)
            else None
        )
        if node is None:
            return NoFix(finding, f"line {finding.line} is not an `assert`", _ADVICE)
        try:
            return self._fix(finding, src, node)
        except Unfixable as e:
            return NoFix(finding, e.reason, e.advice or _ADVICE)

    def _fix(self, finding: Finding, src: SourceFile, node: cst.Assert) -> Result:
        converted = [
            c for c in src.nodes_in(node.test, cst.Call) if src.is_qualified(c.func, "builtins.int", "builtins.float")
        ]
        if converted:
            raise Unfixable(
                f"`{short(converted[0])}` turns a tensor into a Python number inside the assert (int() also "
                "truncates, so comparing the tensor itself is not the same test)",
                "compare the tensor itself (`assert (t > 0).all()`), or, with "
                "torch._dynamo.config.capture_scalar_outputs = True, state the check as "
                "`torch._check(<python condition>)`, which stays in the graph as a runtime assert",
            )
        python_part, tensor_test = split_test(src, node.test)
        mask = mask_of(src, tensor_test, trusted=True).expr
        items = _DropItem()
        dropped = mask.visit(items)
        assert isinstance(dropped, cst.BaseExpression)  # a transformer that only swaps calls for their receivers
        mask = dropped
        test = mask if python_part is None else cst.BooleanOperation(python_part, cst.And(), mask)
        if python_part is not None and tensor_test.lpar and not test.lpar:
            test = test.with_changes(lpar=node.test.lpar, rpar=node.test.rpar)
        notes = [_RUNTIME_ERROR]
        hazards = [h for op in src.nodes_in(tensor_test, cst.BooleanOperation) for h in hazards_of(src, op.right)]
        if hazards:
            notes.append(f"`&`/`|` computes every operand, where `and`/`or` stopped early: {'; '.join(hazards[:3])}")
        if items.dropped:
            notes.append(f"{', '.join(f'`{d}`' for d in items.dropped)} compared as a tensor (`.item()` dropped)")
        if _constant_message(node.msg):
            if test.deep_equals(node.test):
                return NoFix(finding, "the assert already tests one tensor with a constant message", skipped=True)
            return Proposal(
                (finding,),
                finding.rule,
                src.path,
                replace={node: node.with_changes(test=test)},
                safety=UNSAFE if hazards else SAFE,
                why="test one boolean tensor (`&`/`|`, no `.item()`): dynamo then keeps the assert in the graph "
                "as torch._assert_async instead of breaking the graph",
                note="; ".join(notes),
            )
        assert node.msg is not None
        text = _message_text(node.msg)
        if text is None:
            raise Unfixable(
                f"the message `{short(node.msg)}` is computed; only a constant string can stay in the graph", _ADVICE
            )
        call, imports = src.torch_expr("_assert_async")
        comma = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
        check = cst.Expr(cst.Call(call, [cst.Arg(test, comma=comma), cst.Arg(cst.SimpleString(_quote(text)))]))
        notes.append(
            f"the message `{short(node.msg)}` becomes the constant text {_quote(text)} (its values cannot be "
            "formatted inside the graph)"
        )
        notes.append("`python -O` no longer removes the check (it removes an assert)")
        notes.append("on CUDA torch._assert_async fails asynchronously (a device-side assert), not at the line")
        return Proposal(
            (finding,),
            finding.rule,
            src.path,
            replace={node: check},
            imports=imports,
            safety=UNSAFE,
            why="check the tensor with torch._assert_async (it stays in the graph) instead of an assert whose "
            "computed message breaks it",
            note="; ".join(notes),
        )


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
