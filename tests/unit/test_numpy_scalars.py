"""Which graph break is TM114 (NumPy on Python numbers): the break's kind (what torch 2.13 reports for these lines:
GB0208 at the NumPy call, GB0033 where `int()` reads the value back, GB0170 where a comprehension branches on
`np.arange`'s elements) and the shape of its function's source, read from the file."""

from __future__ import annotations

from pathlib import Path

import pytest

from torchmend.profiler.classify import classify_break
from torchmend.profiler.traceparse import GraphBreak

NON_TENSOR = ("torch.* op returned non-Tensor", "torch.* ops that return a non-Tensor cannot be traced", "GB0208")
SCALAR = ("Data dependent operator", "Operator `aten._local_scalar_dense.default` has a non-Tensor output", "GB0033")
BRANCHING = ("Data-dependent branching", "Detected data-dependent branching", "GB0170")
PRINT = ("Failed to trace builtin operator", "Dynamo does not know how to trace builtin operator `print`", "GB0059")

MODULE = """\
import math

import numpy
import numpy as xp
import torch


class Attention(torch.nn.Module):
    def forward(self, x, temperature):
        B, L, D = x.shape
        u = self.factor * xp.ceil(xp.log(L)).astype("int").item()
        n = xp.prod(x.shape[1:]) // D
        k = min(int(n), L)
        keep = [i for i in xp.arange(L) if i % 2 == 0]
        t = xp.exp(temperature)
        r = numpy.random.rand(1).item()
        h = int(math.floor(xp.log2(len(keep) + x.size(0))))
        print(u)
        return x[:, :k] * t
"""


def _line(text: str) -> int:
    return next(i for i, line in enumerate(MODULE.splitlines(), 1) if text in line)


@pytest.mark.parametrize(
    "kind, at, rule",
    [
        (NON_TENSOR, "u = self.factor", "TM114"),  # a shape unpacked into names, a module attribute
        (SCALAR, "k = min(int(n), L)", "TM114"),  # the break where the value is used: `n` is NumPy's
        (BRANCHING, "keep = [", "TM114"),  # np.arange(L) iterated, its elements branched on
        (NON_TENSOR, "h = int(math.floor(", "TM114"),  # len(), x.size(0), arithmetic, inside math.floor
        (NON_TENSOR, "t = xp.exp(temperature)", "TM199"),  # a parameter: not known to be a number
        (SCALAR, "r = numpy.random.rand", "TM110"),  # NumPy's generator is host randomness, not arithmetic
        (PRINT, "print(u)", "TM101"),  # a print keeps its rule, whatever it prints
        (NON_TENSOR, "return x[:, :k]", "TM199"),  # reads `t`, NumPy on a parameter; `k` is Python's own min()
    ],
)
def test_numpy_on_python_numbers_is_its_own_rule(tmp_path: Path, kind, at, rule) -> None:
    path = tmp_path / "model.py"
    path.write_text(MODULE)
    line = _line(at)
    gb = GraphBreak(str(path), line, kind[0], kind[1], kind[2], None)
    assert classify_break(gb, "project", MODULE.splitlines()[line - 1], (2, 13)) == rule


def test_without_the_source_the_id_decides(tmp_path: Path) -> None:
    """A recorded run from another machine: no file to read, so no TM114 (the id's own rule)."""
    gb = GraphBreak(str(tmp_path / "gone.py"), 9, *NON_TENSOR, None)
    assert classify_break(gb, "project", 'u = np.ceil(np.log(L)).astype("int").item()', (2, 13)) == "TM199"


def _fixed(body: str, unsafe: bool = True) -> tuple[str, list]:
    from torchmend.codemods.examples import fix_text, proposals

    source = "import numpy as np\n\n\ndef f(x):  # tm-compiled\n    B, L, D = x.shape\n" + body
    text, results = fix_text(source, unsafe=unsafe)
    return text.split("B, L, D = x.shape\n", 1)[1], proposals(results)


@pytest.mark.parametrize(
    "line, fixed, safety",
    [
        # an integer both ways: the same value
        ("k = np.maximum(L // 4, 1)", "k = max(L // 4, 1)", "safe"),
        ("k = int(np.sqrt(D)) + 1", "k = int(math.sqrt(D)) + 1", "safe"),
        ("k = int(np.ceil(L / 3))", "k = math.ceil(L / 3)", "safe"),
        ("k = np.prod(x.shape[1:]) // D", "k = math.prod(x.shape[1:]) // D", "safe"),
        ("k = int(2 * np.log2(L) // 1)", "k = int(2 * math.log2(L) // 1)", "safe"),  # reaches int() by arithmetic
        ("k = int(np.power(2, np.floor(np.log2(L))) // 8)", "k = int((2 ** math.floor(math.log2(L))) // 8)", "safe"),
        ("k = -np.power(L, 2)", "k = -(L ** 2)", "safe"),
        # a float stays a float, but a Python one (np.float64 before): a tensor made from it is float32
        ("scale = np.sqrt(D)", "scale = math.sqrt(D)", "unsafe"),
        # np.round gave 4.0, round gives 4
        ("k = np.round(L / 3)", "k = round(L / 3)", "unsafe"),
    ],
)
def test_rewrite_and_its_safety(line: str, fixed: str, safety: str) -> None:
    text, found = _fixed(f"    {line}  # tm: TM114\n    return x\n")
    assert [p.safety for p in found] == [safety]
    assert text.splitlines()[0] == f"    {fixed}  # tm: TM114"


@pytest.mark.parametrize(
    "line, why",
    [
        ("k = np.prod(L)", "`np.prod` of a shape or a tuple"),  # math.prod(L) of an int would raise
        ("k = np.maximum(x.shape, 1)", "`np.prod` of a shape or a tuple"),  # elementwise over a shape: an array
        ("k = np.ceil(np.log(x.sum()))", "is not known to be a Python number"),
        ("k = np.log(L, out=None)", "keyword or starred arguments"),
        ("k = np.ceil(L).astype(np.float16)", "casts to a type that is not int or float64"),
        ("idx = np.arange(L)", "makes an array"),
    ],
)
def test_no_fix_says_why(line: str, why: str) -> None:
    from torchmend.codemods.examples import fix_text, unfixed

    source = f"import numpy as np\n\n\ndef f(x):  # tm-compiled\n    B, L, D = x.shape\n    {line}  # tm: TM114\n"
    text, results = fix_text(source)
    (nofix,) = unfixed(results)
    assert text == source and why in nofix.reason, nofix.reason


def test_a_break_where_the_value_is_used_rewrites_only_the_numpy_value_behind_it() -> None:
    """Line 3's break is at `int(n_top)`: `n_top` holds NumPy's value; `n_sample` is a Python int already (its own
    break, at `.item()`, is line 1's finding), so the two edits do not overlap and both are made."""
    text, found = _fixed(
        '    n_sample = 2 * np.ceil(np.log(L)).astype("int").item()  # tm: TM114\n'
        "    n_top = np.maximum(L // 4, 1)\n"
        "    n_sample, n_top = min(n_sample, L), min(int(n_top), L)  # tm: TM114\n"
        "    return x[:, :n_sample, :n_top]\n"
    )
    assert [p.safety for p in found] == ["safe", "safe"]
    assert text.splitlines()[:2] == [
        "    n_sample = 2 * math.ceil(math.log(L))  # tm: TM114",
        "    n_top = max(L // 4, 1)",
    ]
