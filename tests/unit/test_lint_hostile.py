"""`torchmend lint` on files that break parsers and terminals (a real child process each, no training run): deeply
nested code Python runs is checked, what Python refuses is one TM904 finding, and a file name that is not valid
UTF-8, or not ASCII under a C locale, is reported in every format without a traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
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


def _lint_bytes(root: Path, tmp_path: Path, fmt: str, **env: str) -> tuple[int, bytes, str]:
    """lint in a child with this environment; stdout as bytes (a name's raw bytes there would fail to decode)."""
    full = dict(os.environ, COLUMNS="200", NO_COLOR="1", **_env(tmp_path), **env)
    proc = subprocess.run(
        [sys.executable, "-m", "torchmend", "lint", "--no-cache", "--format", fmt, "."],
        cwd=root,
        env=full,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=120,
    )
    return proc.returncode, proc.stdout, proc.stderr.decode("utf-8", "replace")


C_LOCALE = {"LC_ALL": "C", "PYTHONUTF8": "0"}  # no UTF-8 mode: every non-ASCII name holds surrogates
STRICT = {"PYTHONIOENCODING": "utf-8:strict"}  # a UTF-8 terminal, which refuses the surrogates of `bad\xff.py`


@pytest.mark.parametrize(
    "env,fmt",
    [(C_LOCALE, "table"), (C_LOCALE, "json"), (C_LOCALE, "sarif"), (C_LOCALE, "github")]
    + [(STRICT, "table"), (STRICT, "github")],
    ids=["C-table", "C-json", "C-sarif", "C-github", "strict-table", "strict-github"],
)
def test_file_names_not_utf8_or_not_ascii_are_reported_in_every_format(tmp_path: Path, fmt: str, env: dict):
    root = tmp_path / "proj"
    root.mkdir()
    (root / os.fsdecode(b"bad\xff.py")).write_text(COMPILED_PRINT)  # not valid UTF-8
    (root / "модель.py").write_text(COMPILED_PRINT)  # valid UTF-8, not ASCII
    subprocess.run(["git", "init", "-q", str(root)], check=True)  # listed by git, as a real project is
    rc, out, err = _lint_bytes(root, tmp_path, fmt, **env)
    assert rc == 6, err
    assert "Traceback" not in err and "Error" not in err, err
    text = out.decode("utf-8")  # strict: no raw byte of a name reached stdout
    if fmt in ("table", "github"):
        assert "bad\\xff.py" in text  # the byte that is not UTF-8, escaped
    if fmt == "json":
        files = sorted(f["file"] for f in json.loads(text)["findings"])
        assert files == ["bad\\xff.py", "модель.py"]
    if fmt == "sarif":
        uris = sorted(
            r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
            for r in json.loads(text)["runs"][0]["results"]
        )
        assert uris == ["%D0%BC%D0%BE%D0%B4%D0%B5%D0%BB%D1%8C.py", "bad%FF.py"]  # the names' bytes, as on disk
    if fmt in ("table", "github") and env is STRICT:
        assert "модель.py" in text  # (an ASCII stream shows it as ??????.py)
