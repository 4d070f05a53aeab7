"""Large files (torchmend/analysis/window.py): from 2,000 lines on, libcst parses only the top-level functions and
classes the findings point into and what they name; the left-out text comes back byte for byte. The fix must be
the one the whole-file analysis makes, and a 5,000-line file must take seconds, not minutes (the 50,000-line case
of issue 19 went from 2 min 50 s and 1.1 GB to the time of its scan; see docs/commands/fix.md)."""

from __future__ import annotations

import time

import pytest

from torchmend.analysis import source
from torchmend.analysis.source import SourceFile
from torchmend.codemods.examples import fix_text


def big_module(lines: int, newline: str = "\n") -> str:
    head = ["import math", "import torch", "", "SCALE = 3", "", ""]
    body: list[str] = []
    i = 0
    while len(head) + len(body) < lines - 20:
        body += [
            f"def helper_{i}(x, y=1):",
            f"    '''helper {i}: a tab\tstays as it is'''",
            f"    z = x * {i % 7 + 1} + y  # café",
            "    for k in range(3):",
            "        z = z + k",
            "    return z",
            "",
            "",
        ]
        i += 1
    tail = [
        "class Model(torch.nn.Module):",
        "    def forward(self, x):",
        "        return helper_1(x) * SCALE",
        "",
        "",
        "def target(x):",
        '    print("in target", x.shape[0])  # tm: TM101',
        "    return helper_2(x) * SCALE",
        "",
    ]
    return newline.join(head + body + tail) + newline


@pytest.mark.parametrize("newline", ["\n", "\r\n"], ids=["LF", "CRLF"])
def test_a_large_file_gets_the_fix_the_whole_file_analysis_makes(monkeypatch: pytest.MonkeyPatch, newline: str) -> None:
    text = big_module(2100, newline)
    windowed, results = fix_text(text)
    assert windowed != text and "is_compiling()" in windowed
    # Only the target changed: every other byte (CRLF, tabs, comments) as it was.
    gate = f"    if not torch.compiler.is_compiling():{newline}    "
    assert windowed == text.replace('    print("in target"', gate + '    print("in target"')
    parsed = SourceFile("/tm-example/example.py", text, focus=[text.count("\n") - 2])
    kept = [type(s).__name__ for s in parsed.module.body]
    assert len(kept) < 12 and "ClassDef" not in kept  # helper_2 and the imports, not 300 helpers nor Model
    assert "def helper_2" in parsed.module.code and "def helper_3(" not in parsed.module.code
    odd = text.replace("a tab", "a form feed \x0c, a tab")  # a line break to splitlines(), not to Python
    odd_file = SourceFile("/p/x.py", odd)
    assert odd_file.module.code != odd and odd_file.restore(odd_file.module.code) == odd
    if newline == "\n":  # (once: it takes seconds) the whole file, as for a small one, gets the same fix
        monkeypatch.setattr(source, "is_large", lambda text: False)
        assert fix_text(text)[0] == windowed


def test_a_5000_line_file_takes_seconds() -> None:
    text = big_module(5000)
    start = time.monotonic()
    fixed, _ = fix_text(text)
    took = time.monotonic() - start
    assert "is_compiling()" in fixed and fixed.count("\n") == text.count("\n") + 1
    assert took < 5, f"{took:.1f} s"  # the whole-file analysis takes 10-20 s here
