"""End to end (issue 41): a trainer that compiles with `model = torch.compile(model)`, saves `model.state_dict()`
and restores it into a fresh module fails in load_state_dict (`_orig_mod.` keys, TM107 at the load).
`fix --yes --unsafe-fixes` compiles in place, `model.compile()`, and the verified re-run runs to its end with the
same losses and weights (fixtures/compiled_save/resume)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from conftest import ROOT, torchmend

FIXTURE = ROOT / "fixtures" / "compiled_save" / "resume" / "train.py"


def test_a_checkpoint_of_a_compiled_model_is_fixed_by_compiling_in_place(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    shutil.copy(FIXTURE, script)
    verdict = tmp_path / "verdict.json"
    env = {"TORCHMEND_STATE_DIR": str(tmp_path / "state")}
    # no --steps: the failing load comes after the last step
    args = ("fix", "--yes", "--unsafe-fixes", "--backend", "aot_eager", "--verdict-json", str(verdict), str(script))
    fixed = torchmend(*args, cwd=tmp_path, env=env)
    out, said = " ".join(fixed.stdout.split()), " ".join(fixed.stderr.split())
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    # the scan: the original failed at the fresh module's load_state_dict
    assert "the script failed after compiling" in said and "Unexpected key(s) in state_dict" in said
    assert "TM107 change removed TM107 at train.py:51" in out
    text = script.read_text()
    assert text == FIXTURE.read_text().replace("    model = torch.compile(model)\n", "    model.compile()\n")
    doc = json.loads(verdict.read_text())
    assert doc["outcome"] == "verified" and [(c["rule"], c["safety"]) for c in doc["written"]] == [("TM107", "unsafe")]
    verification = doc["verification"]
    numerics = verification["numerics"]
    assert numerics["losses_equal"] and numerics["params_equal"] and numerics["steps_compared"] == 6, numerics
    assert verification["failure"] is None  # the patched run ran to its end, the restore included
    assert (verification["original_failure"]["line"], verification["original_failure"]["ended_by"]) == (51, "error")
