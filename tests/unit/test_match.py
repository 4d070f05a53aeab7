"""torchmend.analysis.match against libcst.matchers itself: the same patterns, built from both modules, match the
same nodes of real source (a sample with every shape, and codemod fixtures) and find the same nodes in order."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import ModuleType

import libcst as cst
import libcst.matchers as real
import pytest

from torchmend.analysis import match

ROOT = Path(__file__).resolve().parents[2]


def _patterns(m: ModuleType) -> list:
    """The shapes torchmend's code matches, spelt once for either module."""
    return [
        m.Name(),
        m.Name("self"),
        m.Name(value="torch"),
        m.Attribute(attr=m.Name("shape")),
        m.Attribute(value=m.Name("self")),
        m.Attribute(value=m.Attribute(value=m.Name("torch"), attr=m.Name("nn"))),
        m.Call(),
        m.Call(func=m.Name("float")),
        m.Call(func=m.Attribute(attr=m.Name("size")), args=[]),
        m.Call(func=m.Attribute(attr=m.Name("item"))),
        m.Call(func=m.Name("float"), args=[m.Arg(m.SimpleString())]),
        m.Call(func=m.Attribute(value=m.Name(), attr=m.Name("sum")), args=[m.Arg(keyword=m.Name("dim"))]),
        m.Call(func=m.Name("isinstance"), args=[m.Arg(), m.Arg()]),
        m.Arg(value=m.Integer("0"), keyword=None),
        m.Arg(keyword=None),
        m.Attribute(attr=m.Name("shape")) | m.Call(func=m.Attribute(attr=m.Name("size")), args=[]),
        m.Attribute(attr=m.OneOf(*(m.Name(c) for c in ("append", "extend", "get")))),
        m.OneOf(m.Name("True"), m.Name("False"), m.Name("None")),
        m.AssignTarget() | m.AnnAssign() | m.AugAssign() | m.For() | m.NamedExpr(),
        m.Assign(targets=[m.AssignTarget(m.Name())]),
        m.SimpleStatementLine(body=[m.Assign(targets=[m.AssignTarget(m.Name())])]),
        m.SimpleStatementLine(body=[m.Assign(targets=[m.AssignTarget(m.Attribute(value=m.Name("self")))])]),
        m.SimpleStatementLine([m.Expr(m.SimpleString())]),
        m.SimpleStatementLine(body=[m.Assign(value=m.Name("None"))]),
        m.Subscript(value=m.Name(), slice=[m.SubscriptElement(m.Index(m.Integer("0")))]),
        m.Subscript(slice=[m.SubscriptElement(m.Index(m.Name()))]),
        m.Slice(),
        m.Integer("1"),
        m.Return(),
        m.Comparison(comparisons=[m.ComparisonTarget(operator=m.Is(), comparator=m.Name("None"))]),
        m.WithItem(asname=m.AsName()),
    ]


SAMPLE = """
import torch
from torch import nn as tnn


class Net(tnn.Module):
    def __init__(self):
        super().__init__()
        self.cache = None
        self.fc = torch.nn.Linear(4, 4)

    def forward(self, x, items):
        \"\"\"A docstring.\"\"\"
        n = x.size()
        m = x.shape[0]
        if self.cache is None:
            self.cache = float("1.5")
        total = x.sum(dim=1)
        first = items[0]
        chosen = items[n]
        tail = items[1:]
        items.append(float(m))
        with open("f") as fh, torch.no_grad():
            pass
        if isinstance(x, torch.Tensor) and (k := len(items)):
            total += k
        for i in range(0):
            y: int = 1
        return x.mean().item() + total + first + chosen + tail + y
"""


def _sources() -> list[cst.Module]:
    files = sorted((ROOT / "fixtures" / "codemods").rglob("*.in.py"))[:12]
    return [cst.parse_module(SAMPLE)] + [cst.parse_module(f.read_text()) for f in files]


class _All(cst.CSTVisitor):
    def __init__(self) -> None:
        self.nodes: list[cst.CSTNode] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        self.nodes.append(node)
        return True


def test_the_same_nodes_match_and_are_found_in_the_same_order() -> None:
    modules = _sources()
    nodes: list[cst.CSTNode] = []
    for module in modules:
        seen = _All()
        module.visit(seen)
        nodes += seen.nodes
    ours, theirs = _patterns(match), _patterns(real)
    missed = []
    for mine, libcsts in zip(ours, theirs, strict=True):
        got = [match.matches(n, mine) for n in nodes]
        assert got == [real.matches(n, libcsts) for n in nodes], mine
        if not any(got):
            missed.append(mine)
        for module in modules[:6]:
            assert [id(n) for n in match.findall(module, mine)] == [id(n) for n in real.findall(module, libcsts)]
    assert missed == []  # every pattern meets real nodes: the comparison is not of empty results


def test_what_is_not_a_node_matches_nothing() -> None:
    for thing in (None, "x", 3, cst.MaybeSentinel.DEFAULT, [cst.Name("x")]):
        assert not match.matches(thing, match.Name())
        assert match.findall(thing, match.Name()) == []


def test_a_misspelt_pattern_is_an_error_not_a_silent_mismatch() -> None:
    with pytest.raises(TypeError, match="no field"):
        match.Call(fnc=match.Name("x"))
    with pytest.raises(TypeError, match="at most one positional"):
        match.Name("x", "y")
    with pytest.raises(TypeError, match="must be a pattern"):
        match.matches(cst.Integer("0"), match.Integer(0))


def test_no_command_imports_libcst_matchers() -> None:
    """Its import builds ~500 dataclasses (about a second of each command's start on a 2-core machine)."""
    code = (
        "import sys\n"
        "import torchmend.cli.main, torchmend.analysis, torchmend.codemods.registry, torchmend.lint\n"
        "import torchmend.pipeline.fixes, torchmend.verify\n"
        "from torchmend.codemods.registry import codemods\n"
        "codemods()\n"
        "print('libcst.matchers' in sys.modules, 'libcst.codemod' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]
