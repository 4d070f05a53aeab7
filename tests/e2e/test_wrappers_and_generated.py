"""Real runs of shapes real model code has (issues 18 and 26): a number reaching the compiled function through a
decorator's `*args, **kwargs` wrapper (fixed at the call site, verified), findings inside code generated at run
time (`<string>`: dataclass methods), reported at the line that called that code, a call site that itself runs
inside compiled code (no mark put there), and a comprehension compiled as a frame of its own."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
from conftest import ROOT, scan_json, torchmend

FIXTURES = ROOT / "fixtures"


def test_generated_code_findings_land_on_the_calling_line() -> None:
    fixture = FIXTURES / "generated_code"
    report = scan_json(fixture / "train.py").json
    got = sorted((f["rule"], Path(f["path"]).name, f["line"], f["where"], f["count"]) for f in report["findings"])
    # 32: `if Stats(...) == self.reference:` breaks inside the dataclass's __eq__; 34: `if opts == DEFAULT:`
    # guards `opts.scale` inside it (and once more at the line itself: one finding, 2 recompiles).
    assert got == [("TM199", "train.py", 32, "project", 1), ("TM299", "train.py", 34, "project", 2)], got
    for f in report["findings"]:
        assert "<string>" not in f["path"] and f["user_frame"] is None
        assert "code generated at run time (<string>)" in f["reason"]


def test_a_number_through_a_decorator_wrapper_is_fixed_at_the_entry(tmp_path: Path) -> None:
    project = tmp_path / "wrappers"
    shutil.copytree(FIXTURES / "wrappers", project)
    result = torchmend(
        "fix", "--yes", "--unsafe", "--select", "TM202", "--backend", "aot_eager", "--verify-backend", "aot_eager",
        "train.py", cwd=project, timeout=500,
    )  # fmt: skip
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    assert "verdict: no measured speed change" in out and "numerics match" in out, out
    assert "removed TM202 at layers/capture.py:8" in out, out
    text = (project / "train.py").read_text()
    assert "compiled(x, 1.0 + step * 0.01, temperature=torch.tensor(2.0 - step * 0.1, device=x.device))" in text
    # the wrappers themselves are left alone; the None guards say why they are not numbers
    assert (project / "layers" / "capture.py").read_text() == (FIXTURES / "wrappers/layers/capture.py").read_text()
    assert "`bias` is None on some calls and a value on others" in out, out


def test_no_mark_is_put_inside_compiled_code() -> None:
    """The layer's forward compiles on its own after a graph break in `encode`; its mask recompiles. The live stack
    says `encode`'s line runs inside the compiled call (call_site.traced), so no `maybe_mark_dynamic` goes there
    (dynamo would refuse to trace it); the model's own input, called from the training loop, is marked there."""
    fixture = FIXTURES / "mark_inside_compiled"
    result = torchmend("fix", "--diff", "--unsafe", "--backend", "aot_eager", "train.py", cwd=fixture, timeout=300)
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    assert "maybe_mark_dynamic(mask" not in out, out
    assert "+    torch._dynamo.maybe_mark_dynamic(hidden, 1)" in out, out
    assert "runs inside compiled code" in " ".join(out.split()), out


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="Python 3.12 inlines comprehensions (PEP 709): no frame")
def test_a_comprehension_compiled_on_its_own_becomes_a_loop() -> None:
    """GB4347 at the comprehension's line (Python 3.11: a `<dictcomp>` frame); the fix writes it as a plain loop."""
    fixture = FIXTURES / "comprehension_frame"
    result = torchmend(
        "fix", "--diff", "--select", "TM199", "--backend", "aot_eager", "train.py", cwd=fixture, timeout=300
    )  # fmt: skip
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    assert "+        for k in REGISTRY:" in out, out
    assert '+            flags[f"output_{k}"] = kwargs.get(' in out, out
