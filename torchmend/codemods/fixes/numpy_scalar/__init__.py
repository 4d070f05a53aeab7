"""NumPy arithmetic on Python numbers (a sequence length, a head count) rewritten to `math` and builtins (TM114)."""

from __future__ import annotations

import libcst as cst

from torchmend import rules
from torchmend.analysis import match as m
from torchmend.analysis.source import Context, SourceError, SourceFile
from torchmend.codemods.base import SAFE, UNSAFE, Codemod, Invalid, NoFix, Proposal, Refuse, Result, Valid
from torchmend.codemods.fixes.numpy_scalar.convert import Converted, Converter, consumed_as_int, placed
from torchmend.model import Finding, Where


class NumpyScalarToMath(Codemod):
    """Compute on Python numbers with `math` and builtins, not NumPy: `np.ceil(np.log(L))` -> `math.ceil(math.log(L))`.

    What it does:
        TM114: a graph break on a line that calls NumPy on Python numbers (names bound from `.shape`, `.size()`,
        `len()`, `.ndim`, `.numel()`, a shape unpacked into names, int and float literals, a module's number
        attribute such as `self.factor`, and arithmetic of those), or on a line that uses a name such a call
        bound earlier in the function. The NumPy expression is rewritten with the same value: `np.ceil`,
        `np.floor`, `np.trunc`, `np.log`, `np.log2`, `np.log10`, `np.sqrt`, `np.exp` and `np.prod` become
        `math.*` (`import math` added where missing), `np.abs` `abs`, `np.round` `round`, `np.maximum` /
        `np.minimum` `max` / `min`, `np.power(a, b)` `a ** b`, `np.int64(x)` `int(x)`, `np.arange(...)` iterated by
        a loop or a comprehension `range(...)`; NumPy's casts go: `.astype(int)` (`"int"`, `np.int64`,
        `np.int32`) becomes `int(...)` (nothing where the value is already an int), `.item()` is dropped, and
        `int(np.ceil(x))` becomes `math.ceil(x)`. Any other leaf or NumPy function: no fix, with the reason.
        PyTorch reports these breaks as GB0208 (a torch.* op returned a non-Tensor: TM199 by its id) at the NumPy
        call, GB0033 (`aten._local_scalar_dense`, TM111 by its id) where `int()` takes the value back later, and
        GB0170 (TM103) where a comprehension branches on the elements of `np.arange(L)`.

    Why is this bad:
        Dynamo traces NumPy through `torch._numpy`: a call on a Python int becomes a 0-dim tensor, and the moment
        Python needs the number again (`.item()`, a slice bound, `int()`, an `if`) the graph breaks. The breaks
        repeat for every length the model sees and the functions resumed after them recompile: an Informer-style
        ProbAttention (`u = self.factor * np.ceil(np.log(L)).astype("int").item()`) went from 21 graphs, 15 breaks
        and 11 recompiles to 1, 0 and 0 with `math.ceil(math.log(L))`. Dynamo traces `math` and builtins on
        Python ints (and on symbolic sizes) without leaving the graph.

    Example:
        def forward(self, x):
            B, L, D = x.shape
            u = self.factor * np.ceil(np.log(L)).astype("int").item()   # TM114: GB0208
            return x[:, :u]

    Fix:
        def forward(self, x):
            B, L, D = x.shape
            u = self.factor * math.ceil(math.log(L))
            return x[:, :u]

    Fix safety:
        Safe when the result is an integer both ways: a cast to int (`.astype(int)`, `int()`), an integer NumPy
        result (`np.maximum` of ints, `np.prod` of a shape), a value that reaches `int()` / `math.floor()`
        through arithmetic only, or the ints of an iterated `np.arange` (Python ints for np.int64s). The value is the same number; `math` and NumPy compute `log`, `sqrt` and the like
        in float64 alike. The difference is where NumPy returns no number: `math.log(0)` and `math.sqrt(-1)` raise
        ValueError (`math.exp(1000)` OverflowError) where NumPy gives -inf, nan or inf with a RuntimeWarning, and
        a cast of those to int is already a meaningless number; Python ints do not overflow where NumPy's int64
        would, and `a ** -1` gives a float where NumPy refuses a negative integer power. Unsafe when the result
        stays a float or changes type: NumPy's `np.float64` becomes a Python float (`torch.tensor()` of it is
        float32 by default, not float64), and `np.ceil` / `np.floor` / `np.round` give an int where NumPy gave a
        float (`4` for `4.0`). The verifying re-run is the final gate.
    """

    rules = ("TM114",)
    name = "numpy-scalar-to-math"
    INVALID = (
        Invalid(
            """
            import numpy as np
            from torch import nn


            class ProbAttention(nn.Module):
                def __init__(self, factor=5):
                    super().__init__()
                    self.factor = factor

                def forward(self, x):  # tm-compiled
                    B, L, D = x.shape
                    u = self.factor * np.ceil(np.log(L)).astype("int").item()  # tm: TM114
                    return x[:, :u]
            """,
            """
            import numpy as np
            from torch import nn
            import math


            class ProbAttention(nn.Module):
                def __init__(self, factor=5):
                    super().__init__()
                    self.factor = factor

                def forward(self, x):  # tm-compiled
                    B, L, D = x.shape
                    u = self.factor * math.ceil(math.log(L))  # tm: TM114
                    return x[:, :u]
            """,
        ),
        # the break where the value is used: the NumPy binding before it is rewritten; `import numpy as xp`
        Invalid(
            """
            import math

            import numpy as xp


            def pooled(x):  # tm-compiled
                n = xp.prod(x.shape[1:])
                k = xp.maximum(int(xp.sqrt(n)) // 2, 1)
                return x.flatten(1)[:, : int(k)]  # tm: TM114
            """,
            """
            import math

            import numpy as xp


            def pooled(x):  # tm-compiled
                n = math.prod(x.shape[1:])
                k = max(int(math.sqrt(n)) // 2, 1)
                return x.flatten(1)[:, : int(k)]  # tm: TM114
            """,
        ),
        # iterated: np.arange becomes range; math.floor(np.log2(...)) keeps its math.floor
        Invalid(
            """
            import math
            import numpy as np


            def strided(x):  # tm-compiled
                L = x.size(1)
                keep = [i for i in np.arange(0, L, 2) if i % 3]  # tm: TM114
                return x[:, keep] * math.floor(np.log2(L))  # tm: TM114
            """,
            """
            import math
            import numpy as np


            def strided(x):  # tm-compiled
                L = x.size(1)
                keep = [i for i in range(0, L, 2) if i % 3]  # tm: TM114
                return x[:, keep] * math.floor(math.log2(L))  # tm: TM114
            """,
        ),
    )
    VALID = (
        # NumPy on a tensor (a parameter), not on a Python number: left alone
        Valid(
            """
            import numpy as np


            def scale(x, temperature):  # tm-compiled
                return x * np.exp(temperature)  # tm: TM114
            """,
        ),
        # a function with no math equivalent
        Valid(
            """
            import numpy as np


            def pad(x):  # tm-compiled
                L = x.shape[1]
                return x[:, : int(np.percentile(L, 50))]  # tm: TM114
            """,
        ),
    )

    def propose(self, finding: Finding, ctx: Context) -> Result:
        advice = rules.BY_CODE["TM114"].advice
        if finding.where != Where.PROJECT:
            return NoFix(finding, "the NumPy call is inside a library, which torchmend does not edit", advice)
        try:
            src = ctx.file(finding.path)
        except SourceError:
            return NoFix(finding, f"the NumPy call is in {finding.file}, outside your project", advice)
        stmt = src.statement_at(finding.line)
        if stmt is None:
            return NoFix(finding, f"no statement at line {finding.line}", advice)
        converter = Converter(src, _math_name(src))
        tops = _tops(src, converter, stmt, finding.line)
        if not tops:
            return NoFix(finding, f"no NumPy call at line {finding.line} or behind the names it reads", advice)
        done: dict[cst.CSTNode, Converted] = {}
        refused: list[str] = []
        for top in tops:
            try:
                done[top] = converter.convert(top)
            except Refuse as e:
                refused.append(e.reason)
        if not done:
            return NoFix(finding, f"{refused[0]}; torchmend rewrites NumPy only on Python numbers", advice)
        return _proposal(finding, src, converter, done, refused)


def _proposal(
    finding: Finding, src: SourceFile, converter: Converter, done: dict[cst.CSTNode, Converted], refused: list[str]
) -> Proposal:
    exact = all(c.exact or consumed_as_int(src, top) for top, c in done.items())
    first = next(iter(done))
    new = src.module.code_for_node(done[first].node)
    note = (
        "where NumPy returns no number (the log of 0, the square root of a negative) `math` raises ValueError instead"
    )
    if not exact:
        note = (
            "the result is a Python float or int where NumPy gave np.float64 (a tensor made from it is float32 by "
            "default, not float64; `np.ceil`/`np.floor`/`np.round` gave a float, `4.0` for `4`); " + note
        )
    if refused:
        note += f"; left as it was: {'; '.join(refused)}"
    needs_math = any(c.math for c in done.values()) and converter.math == "math"  # added once, if missing
    return Proposal(
        (finding,),
        finding.rule,
        src.path,
        why=f"compute `{src.code(first).strip()}` as `{new}` on Python numbers: dynamo traces `math` and builtins "
        "without a graph break, where NumPy's result is a tensor whose value Python has to read back",
        safety=SAFE if exact else UNSAFE,
        replace={top: placed(src, top, c.node) for top, c in done.items()},
        imports=(("math", None),) if needs_math else (),
        shape="numpy-scalar-to-math",
        note=note,
    )


def _tops(src: SourceFile, converter: Converter, stmt: cst.BaseStatement, line: int) -> list[cst.BaseExpression]:
    """The outermost NumPy-rooted expressions of the statement (its header, for a compound one); where it has none
    (the break where the value is used: `int(k)`), those of the earlier bindings that give the names it reads a NumPy
    value, and of the names those read, on. A binding whose value Python has already (`.item()`, `int()`) breaks
    there, as a finding of its own: one edit each, never two of one node."""
    roots = _header(stmt)
    own = [t for root in roots for t in converter.inner_tops(root)]
    if own:
        return own
    for root in roots:  # grows: the bindings behind a binding are followed too
        for name in src.nodes_in(root, cst.Name):
            for bound in converter.bindings(name):
                value = src.assigned_value(bound)
                if (
                    value is not None
                    and value not in roots
                    and src.line_of(bound) < line
                    and _numpy_value(converter, value)
                ):
                    roots.append(value)
    tops: list[cst.BaseExpression] = []
    for root in roots:
        tops += [t for t in converter.inner_tops(root) if t not in tops]
    return tops


def _numpy_value(converter: Converter, e: cst.BaseExpression) -> bool:
    """NumPy's object, not a Python number: a NumPy call or `.astype` (not `.item()` or `int()` of one), or arithmetic
    with such an operand."""
    if isinstance(e, cst.BinaryOperation):
        return _numpy_value(converter, e.left) or _numpy_value(converter, e.right)
    if isinstance(e, cst.UnaryOperation):
        return _numpy_value(converter, e.expression)
    return converter.rooted(e) and not m.matches(e, m.Call(func=m.Attribute(attr=m.Name("item"))))


def _header(stmt: cst.BaseStatement) -> list[cst.CSTNode]:
    if isinstance(stmt, cst.SimpleStatementLine):
        return list(stmt.body)
    if isinstance(stmt, cst.For):
        return [stmt.iter]
    if isinstance(stmt, (cst.If, cst.While)):
        return [stmt.test]
    return []


def _math_name(src: SourceFile) -> str:
    """The module-level name of `math` (`import math as m` gives `m`), else `math` (imported by the fix)."""
    for stmt in src.module.body:
        for small in stmt.body if isinstance(stmt, cst.SimpleStatementLine) else ():
            for alias in small.names if isinstance(small, cst.Import) else ():
                if m.matches(alias.name, m.Name("math")):
                    return alias.asname.name.value if alias.asname else "math"  # type: ignore[union-attr]
    return "math"
