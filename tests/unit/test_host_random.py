"""TM110's codemod (codemods/fixes/host_random.py) on in-process sources: which def it disables, and why it leaves
the others (the rewrites themselves: its examples and fixtures/codemods/TM110)."""

from __future__ import annotations

import textwrap

from torchmend.codemods.base import NoFix
from torchmend.codemods.examples import fix_text, proposals, unfixed


def _fix(code: str) -> tuple[str, list]:
    return fix_text(textwrap.dedent(code).lstrip("\n"))


def test_two_draws_in_one_helper_are_one_change_with_the_helper_named() -> None:
    text, results = _fix(
        """
        import numpy as np


        def spans(n, k):
            eps = np.random.rand(1).item()  # tm: TM110
            return np.random.choice(n, int(k + eps), replace=False)  # tm: TM110
        """
    )
    assert text.count("@torch.compiler.disable") == 1 and "import torch" in text
    (p,) = proposals(results)  # the two findings' identical edits merged
    assert [f.line for f in p.findings] == [5, 6]
    assert p.safety == "unsafe" and p.shape == "disable-host-random-helper"
    assert p.why.startswith("run `spans` eagerly (torch.compiler.disable)")


def test_what_it_leaves_and_why() -> None:
    # the compiled function itself (decorated here), a generator, a draw outside any def, and a helper whose line
    # holds no NumPy or Python draw the source shows
    _, results = _fix(
        """
        import random

        import numpy as np
        import torch


        @torch.compile
        def step(x):
            return x * np.random.rand()  # tm: TM110


        def chunks(n):
            for _ in range(n):
                yield np.random.rand()  # tm: TM110


        JITTER = np.random.rand()  # tm: TM110


        def scale(x, rng):
            return x * rng.random()  # tm: TM110
        """
    )
    reasons = {r.finding.line: r.reason for r in unfixed(results)}
    assert not proposals(results)
    assert reasons[9].startswith("the draw is in `step`, the function torch.compile compiles")
    assert reasons[14].startswith("`chunks` is a generator or a coroutine")
    assert reasons[17] == "line 17 is not inside a function that compiled code calls"
    assert reasons[21] == "no call to NumPy's or Python's random generator in `scale`"
    assert all("@torch.compiler.disable" in r.advice for r in unfixed(results))


def test_a_draw_in_a_library_is_left_with_the_advice() -> None:
    _, results = _fix(
        """
        import numpy as np


        def spans(n):
            return np.random.choice(n, 2)  # tm: TM110 where=library
        """
    )
    (nofix,) = unfixed(results)
    assert isinstance(nofix, NoFix) and "outside your project" in nofix.reason
    assert "@torch.compiler.disable" in nofix.advice
