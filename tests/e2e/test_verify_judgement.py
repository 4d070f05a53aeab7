"""Verification that judges more than bit-equal runs, on real `fix` runs (aot_eager): the eager reference names a
miscompile and the known hazard, the counter's fallback candidate verifies in its place, and the original's own
compiled-vs-eager spread is the noise band that keeps equal code from being refused."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.conftest import ROOT, torchmend
from torchmend.profiler.hazards import HAZARDS

FIXTURES = ROOT / "fixtures" / "verify"


def _fix(tmp_path: Path, name: str, steps: str) -> tuple[str, str]:
    shutil.copy(FIXTURES / name / "train.py", tmp_path / "train.py")
    r = torchmend(
        "fix", "train.py", "--yes", "--unsafe", "--verify-backend", "aot_eager", "--steps", steps, cwd=tmp_path
    )
    assert r.returncode == 0, r.stdout + r.stderr
    return " ".join(r.stdout.split()), (tmp_path / "train.py").read_text()  # rich wraps long lines


def test_the_counter_buffer_is_refused_as_a_known_miscompile_and_its_fallback_written(tmp_path: Path) -> None:
    import torch

    out, text = _fix(tmp_path, "counter_scale", "6")
    hazard = next(h for h in HAZARDS if h.name == "recomputed-read-of-mutated-buffer")
    assert hazard.affects(torch.__version__), "the table says this torch is not affected: re-measure the fixture"
    # the in-place buffer form: refused, and the verdict says whose difference it is and which hazard
    assert "the compiler mis-compiled the rewritten code" in out
    assert "a known PyTorch hazard: AOTAutograd's partitioner recomputes a read of a module buffer" in out
    assert "pytorch PR #197039" in out
    assert "TM201 change at train.py:11 refused (the only change)" in out
    # its fallback takes its place and verifies: one graph, numbers equal
    assert "trying its next candidate instead" in out and "verdict: no measured speed change" in out
    assert "numerics match" in out.split("trying its next candidate")[1]
    assert 'self.register_buffer("calls", torch.tensor(0), persistent=False)' in text
    assert "self.calls = self.calls + 1" in text and "add_" not in text


def test_zero_gradient_noise_under_adamw_is_within_the_originals_own_band(tmp_path: Path) -> None:
    out, text = _fix(tmp_path, "adamw_zero_grad", "5")
    assert "verdict: no measured speed change" in out
    # Accepted, and said why: the patched compiled run equals the original eager run (verify/reference.py, checked
    # first since issue 26's TM110 work), or, where it does not, lies within the original's own noise band.
    flat = " ".join(out.split())
    assert ("against the original eager run, numerics match" in flat) or (
        "numerics equal within the noise band" in flat and "equals its eager run bit for bit" in flat
    ), out
    # the print's reordering (issue 30) is a global setting: judged on aot_eager, it is withheld, and said so
    assert "not written: a global compiler setting" in flat and "reorderable_logging_functions" not in text


def test_a_fresh_leaf_that_was_the_only_gradient_path_is_refused_with_why(tmp_path: Path) -> None:
    """TM109's flag off under compile where the zeros leaf is all the loss depends on: backward fails in the patched
    run, and the verdict says that the leaf was the only path of gradients (the failure's exception and line too)."""
    shutil.copy(FIXTURES / "leaf_only_path" / "train.py", tmp_path / "train.py")
    r = torchmend("fix", "train.py", "--yes", "--unsafe", "--verify-backend", "aot_eager", cwd=tmp_path)
    out = " ".join(r.stdout.split())
    assert r.returncode == 10 and "nothing was written" in r.stderr, r.stdout + r.stderr  # 10: verification refused
    assert "element 0 of tensors does not require grad" in out and "train.py:22" in out
    assert "that tensor was the only path of gradients to the loss" in out
    assert (tmp_path / "train.py").read_text() == (FIXTURES / "leaf_only_path" / "train.py").read_text()


def test_a_script_that_does_not_compute_the_same_twice_is_never_blamed_on_the_rewrite(tmp_path: Path) -> None:
    """fixtures/verify/not_deterministic: the weights start with a jitter from an unseeded generator, so every run
    differs (as CUDA's atomic adds make them differ). The gated print computes the same, yet one eager run each way
    differs: the original's second eager run measures its own noise, and the verdict (within that band, or refused)
    never says the rewrite changed the math or the compiler mis-compiled it."""
    shutil.copy(FIXTURES / "not_deterministic" / "train.py", tmp_path / "train.py")
    r = torchmend("fix", "train.py", "--yes", "--verify-backend", "aot_eager", "--steps", "5", cwd=tmp_path)
    out = " ".join(r.stdout.split())
    assert r.returncode in (0, 10), r.stdout + r.stderr  # written within the band, or refused: chance decides
    assert "before (eager, again)" in r.stderr + r.stdout
    assert "the original does not compute the same twice: its own runs differ from each other by" in out, out
    assert "the rewrite changed the math" not in out and "mis-compiled" not in out, out
    if r.returncode == 10:
        assert "the eager reference could not tell whose difference it is" in out, out
        assert "torch.use_deterministic_algorithms(True)" in out
