"""End to end for issue 13, items 6 and 9: a compiled function the backend cannot compile, and a script that
torch.compile itself broke (real scans of the fixtures, aot_eager detection backend)."""

from __future__ import annotations

from conftest import ROOT, SCAN_FIXTURES, scan_events, scan_json, torch_minor

from torchmend import pipeline
from torchmend.model import Finding


def _one(report: dict, rule: str) -> dict:
    (f,) = [f for f in report["findings"] if f["rule"] == rule]
    return f


def _why_not_fixed(f: dict) -> str:
    """TM107's fix (save-plain-module) left this scan finding alone: why."""
    fixes = pipeline.propose([Finding.from_json(f)], ROOT)
    assert not fixes.proposals
    (unfixed,) = fixes.unfixed
    return unfixed.reason


def test_a_scheduler_step_that_never_converts_is_one_finding_at_the_indexing_line():
    report = scan_json(SCAN_FIXTURES / "scheduler_wont_convert" / "train.py").json
    f = _one(report, "TM106")
    assert (f["line"], f["function"], f["count"]) == (40, "step", 1)
    assert f["code"] == "alpha_prod_t = self.alphas_cumprod[timestep]"
    assert f["compiled_function"]["line"] == 38 and f["call_site"]["code"] == "sample = step(noise_pred, t, sample)"
    # the script compiles `step` with backend="eager", which compiles the graph aot_eager cannot
    assert "own backend `eager` compiles this graph" in f["reason"] and "disagree" in f["reason"]
    assert not [g for g in report["findings"] if g["rule"] == "TM199" and g["line"] == 38]
    assert report["summary"]["frames_compiled"] == 0 and report["summary"]["graphs"] == 0


def test_the_backend_check_agrees_when_the_script_uses_a_failing_backend_too():
    script = SCAN_FIXTURES / "scheduler_wont_convert" / "train.py"
    checks = [e for e in scan_events(script, "--", "--compile_backend", "aot_eager") if e["ev"] == "backend_check"]
    assert checks == []  # same backend as the detection one: no second compile
    report = scan_json(script, "--", "--compile_backend", "aot_eager").json
    assert "own backend" not in _one(report, "TM106")["reason"]


def test_a_compiled_model_saved_whole_is_recognised_with_what_to_save_instead():
    result = scan_json(SCAN_FIXTURES / "save_compiled_model" / "train.py")
    assert result.returncode == 8  # the script still failed after compiling
    f = _one(result.json, "TM107")
    assert (f["kind"], f["line"], f["severity"]) == ("script_failure", 42, "fix")
    assert f["code"] == "restored = torch.load(path, weights_only=True)"
    assert "OptimizedModule" in f["reason"] and "model._orig_mod.state_dict()" in f["reason"]
    # pickling the compiled model worked as it does without torchmend's backend check (the load is what failed)
    assert "PicklingError" not in (result.json["error"] or "")
    # weights_only=True refuses any pickled module: compiling in place would not make this load work
    assert "refuses any pickled nn.Module, compiled or not" in _why_not_fixed(f)


def test_a_compiled_models_state_dict_loaded_into_a_fresh_module_is_recognised():
    result = scan_json(SCAN_FIXTURES / "compiled_state_dict_keys" / "train.py")
    assert result.returncode == 8
    f = _one(result.json, "TM107")
    assert f["line"] == 36 and f["code"] == "export_model.load_state_dict(best_state)"
    assert '"_orig_mod.net.0.weight"' in f["reason"] and "model.compile()" in f["reason"]
    # `model = torch.compile(Regressor())`: the module has no name to compile in place or to save
    assert _why_not_fixed(f).startswith("the uncompiled module has no name of its own")


def test_dynamo_crashing_in_the_users_code_is_a_finding_at_their_line():
    """Issue 30 item 6: a Lightning-style `training_step` whose `self.log` inspects the step's signature. torch
    2.12 and 2.13 crash inside dynamo (InternalTorchDynamoError); newer releases compile it."""
    result = scan_json(ROOT / "fixtures" / "dynamo_crash" / "train.py")
    crashed = [f for f in result.json["findings"] if f["rule"] == "TM112"]
    if torch_minor() in ("2.12", "2.13"):
        assert result.returncode == 8 and result.json["summary"]["ended_by"] == "error"
        (f,) = crashed
        assert (f["line"], f["function"], f["kind"]) == (18, "step_takes", "script_failure")
        assert "@torch.compiler.disable" in f["reason"] and "InternalTorchDynamoError" in f["reason"]
    else:
        assert result.returncode == 0 and crashed == []
