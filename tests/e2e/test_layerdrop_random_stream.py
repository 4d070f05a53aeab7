"""fixtures/scan/layerdrop end to end: the LayerDrop skip is a random-stream change, left alone by
`fix --yes --unsafe` and written by `fix --yes --allow-random-stream`, verified in distribution over 4 seeds per
arm (aot_eager, 4 steps, the real CLI in a scratch project)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import SCAN_FIXTURES, torchmend

SCRIPT = SCAN_FIXTURES / "layerdrop" / "train.py"


@pytest.fixture
def proj(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TORCHMEND_STATE_DIR", str(tmp_path / "state"))
    proj = tmp_path / "proj"
    proj.mkdir()
    shutil.copy(SCRIPT, proj / "train.py")
    return proj


def test_layerdrop_skip_needs_its_opt_in_and_verifies_in_distribution(proj: Path) -> None:
    original = (proj / "train.py").read_text()
    r = torchmend("fix", "train.py", "--yes", "--unsafe", "--no-verify", "--backend", "aot_eager", cwd=proj)
    assert r.returncode == 0, r.stderr
    assert "changes the random stream: fix --allow-random-stream applies it" in r.stdout
    assert (proj / "train.py").read_text() == original

    r = torchmend("fix", "train.py", "--yes", "--allow-random-stream", "--backend", "aot_eager", cwd=proj)
    assert r.returncode == 0, r.stdout + r.stderr
    out = " ".join(r.stdout.split())
    assert "RANDOM STREAM CHANGED" in out
    assert "equivalent in distribution (random stream changed): 4 seeds per arm (0, 1, 2, 3)" in out
    assert "verdict: no measured speed change" in out
    assert "h = torch.where(torch.as_tensor(drop_block == 0), block(h), h)" in (proj / "train.py").read_text()
