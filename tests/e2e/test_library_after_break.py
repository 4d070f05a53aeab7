"""End to end for issue 13, item 5: a break inside torch.nn reached from a frame dynamo resumed after the model's
own break names the model's line (not the training loop), with the library hot spot's remedy."""

from __future__ import annotations

from conftest import SCAN_FIXTURES, scan_json


def test_a_library_break_after_a_break_points_at_the_models_call_and_says_what_to_pass():
    report = scan_json(SCAN_FIXTURES / "library_after_break" / "train.py").json
    (lib,) = [f for f in report["findings"] if f["where"] == "library"]
    assert lib["rule"] == "TM104" and lib["function"] == "_detect_is_causal_mask"
    uf = lib["user_frame"]
    assert (uf["file"].rsplit("/", 1)[-1], uf["line"], uf["function"]) == ("model.py", 21, "forward")
    assert uf["code"] == "h = self.encoder(h, mask=causal)"
    assert "is_causal=True" in lib["reason"]
