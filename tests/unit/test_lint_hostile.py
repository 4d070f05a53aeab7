"""`torchmend lint` on files that break parsers and terminals (a real child process each, no training run): deeply
nested code Python runs is checked, what Python refuses is one TM904 finding, and a file name that is not valid
UTF-8, or not ASCII under a C locale, is reported in every format without a traceback."""

from __future__ import annotations

from pathlib import Path

from conftest import torchmend

COMPILED_PRINT = "import torch\n\n@torch.compile\ndef step(x):\n    print(x)\n    return x * 2\n"


def _env(tmp_path: Path, **more: str) -> dict[str, str]:
    return {"TORCHMEND_CACHE_DIR": str(tmp_path / "cache"), "TORCHMEND_STATE_DIR": str(tmp_path / "state"), **more}


def _sum(terms: int) -> str:
    return " + ".join(["x"] * terms)


def test_deep_sums_are_checked_or_one_tm904_and_the_rest_is_linted(tmp_path: Path):
    root = tmp_path / "proj"
    root.mkdir()
    # 600 terms: Python runs it, and so lint checks it (the print after the sum is found)
    (root / "deep.py").write_text(
        f"import torch\n\n@torch.compile\ndef f(x):\n    y = {_sum(600)}\n    print(y)\n    return y\n"
    )
    # 100,000 terms: Python refuses it (RecursionError while compiling): one TM904, nothing else
    (root / "huge.py").write_text(f"import torch\nx = 1\ny = {_sum(100_000)}\nf = torch.compile(len)\n")
    # called from compiled code, refused by Python, and never triaged (no `compile` in it): skipped, not parsed
    (root / "helpers.py").write_text(f"def helper(x):\n    return x\n\ny = {_sum(100_000)}\n")
    (root / "ok.py").write_text(
        COMPILED_PRINT + "\n\nfrom helpers import helper\n\n@torch.compile\ndef g(x):\n    return helper(x)\n"
    )
    r = torchmend("lint", str(root), "--format", "json", "--no-cache", env=_env(tmp_path), timeout=300)
    assert r.returncode == 6, r.stderr
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr, r.stderr
    found = sorted((f["rule"], f["file"], f["line"]) for f in r.json["findings"])
    assert found == [("TM101", "deep.py", 6), ("TM101", "ok.py", 5), ("TM904", "huge.py", 1)]
    huge = next(f for f in r.json["findings"] if f["rule"] == "TM904")
    assert "nested too deeply" in huge["reason"]
