"""End to end for issue 13, item 7 (bookkeeping users can trust), on a real scan of a learning-rate sweep that
resets dynamo between runs and evaluates under torch.no_grad() each epoch (fixtures/scan/train_eval_sweep)."""

from __future__ import annotations

from conftest import SCAN_FIXTURES, scan_json


def test_a_train_eval_switch_is_one_once_note_and_compiles_are_counted_per_reset():
    report = scan_json(SCAN_FIXTURES / "train_eval_sweep" / "train.py").json
    recompiles = [f for f in report["findings"] if f["kind"] == "recompile"]
    # forward, its resume frame and the loss each recompile once on the grad-mode switch: one note, not a storm
    assert [(f["rule"], f["count"], f["pattern"], f["severity"], f["variable"]) for f in recompiles] == [
        ("TM299", 1, "once", "note", "grad_mode")
    ]
    assert recompiles[0]["call_site"]["code"] == "val = loss_fn(compiled(tokens, mask), tags, mask)"
    s = report["summary"]
    # two runs (torch._dynamo.reset() between them) of three frames each: forward, its resume, the loss
    assert (s["frames_compiled"], s["compiles"], s["recompiles"]) == (6, 12, 6)
