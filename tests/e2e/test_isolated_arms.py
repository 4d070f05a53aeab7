"""The arms of a verification are isolated (issue 39, item 3): a script that resumes from `ckpt.pt` in its working
folder (fixtures/verify/resume_ckpt) cannot feed one run's checkpoint into the next. Every run works in a copy of
the working folder (profiler/sandbox.py): it starts from the files as they were, and the user's folder is never
written."""

from __future__ import annotations

import shutil
from pathlib import Path

from conftest import ROOT, torchmend

from torchmend.codemods.engine import unified_diff

FIXTURE = ROOT / "fixtures" / "verify" / "resume_ckpt" / "train.py"


def test_a_patch_that_scales_the_output_is_refused_and_no_checkpoint_is_left(tmp_path: Path) -> None:
    proj = tmp_path / "proj"
    proj.mkdir()
    shutil.copy(FIXTURE, proj / "train.py")
    text = (proj / "train.py").read_text()
    patch = tmp_path / "scale.patch"
    patch.write_text(unified_diff("train.py", text, text.replace("    out = step(x)\n", "    out = step(x) * 1.5\n")))
    result = torchmend(
        "verify", "train.py", "--patch", str(patch), "--backend", "aot_eager", "--repeat", "1", "--format", "json",
        cwd=proj,
    )  # fmt: skip
    assert result.returncode == 10, result.stdout + result.stderr  # VERIFY_FAILED
    report = result.json
    assert report["verdict"] == "refused"
    assert report["reasons"][0].startswith("numerics differ: losses diverge at step 0")
    # The original's compiled run and its eager reference run started from the same files: no spread between them
    # (when the eager run resumed from the checkpoint the patched run had saved, this "noise band" was 0.85).
    assert report["reference"]["band"] is not None and report["reference"]["band"] < 1e-3
    assert report["reference"]["whose"] == "rewrite"
    assert sorted(p.name for p in proj.iterdir()) == ["train.py"]  # no ckpt.pt left behind
