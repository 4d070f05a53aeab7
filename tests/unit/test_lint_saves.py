"""lint's TM107 (issue 41): a checkpoint saved from a compiled model, seen in the source. `torch.save` of the
compiled model pickles its wrapper; of its `state_dict()`, keys prefixed `_orig_mod.` that the plain module
rejects. The original module's state, or a name taken back from the wrapper, is no finding."""

from __future__ import annotations

from pathlib import Path

from torchmend.lint import lint_paths
from torchmend.values import Root

SCRIPT = """\
import torch
from torch import nn


def main():
    model = nn.Linear(4, 1)
    model = torch.compile(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):
        model(torch.randn(2, 4)).sum().backward()
        opt.step()
    torch.save({"model": model.state_dict(), "opt": opt.state_dict()}, "ckpt.pt")
    torch.save(opt.state_dict(), "opt.pt")
    plain = nn.Linear(4, 1)
    fast = torch.compile(plain)
    torch.save(plain.state_dict(), "plain.pt")
    torch.save(fast, "fast.pt")
    model = model._orig_mod
    torch.save(model.state_dict(), "fine.pt")


main()
"""


def test_a_compiled_models_checkpoint_is_tm107_with_its_fix(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(SCRIPT)
    found = [f for f in lint_paths([tmp_path], Root(tmp_path), cache=False).findings if f.rule == "TM107"]
    assert {f.line: f.reason.split(":")[0] for f in found} == {
        12: "saves the state dict of a compiled model (`model` is torch.compile's result)",
        17: "saves the compiled model itself (`fast` is torch.compile's result)",
    }
    assert all(f.severity == "fix" and f.file == "train.py" for f in found)
    from torchmend import rules

    advice = rules.BY_CODE["TM107"].advice
    assert "model._orig_mod.state_dict()" in advice and "model.compile()" in advice


def test_lint_findings_get_the_plain_module_saved(tmp_path: Path) -> None:
    """The fix of lint's findings (what `lint --fix --unsafe-fixes` applies): `torch.save(fast, ...)` of
    `fast = torch.compile(plain)` saves `plain`; `model` is read as the wrapper (`model._orig_mod`), so compiling it in
    place would break that line: no fix, with the reason."""
    from torchmend import pipeline
    from torchmend.codemods.engine import Session

    (tmp_path / "train.py").write_text(SCRIPT)
    found = [f for f in lint_paths([tmp_path], Root(tmp_path), cache=False).findings if f.rule == "TM107"]
    fixes = pipeline.propose(found, tmp_path)
    (proposal,) = fixes.proposals
    assert (proposal.finding.line, proposal.safety) == (17, "unsafe")
    (unfixed,) = fixes.unfixed
    assert (
        unfixed.finding.line == 12 and "`model._orig_mod` (line 18) reads the wrapper's own attribute" in unfixed.reason
    )
    session: Session = fixes.session
    session.accept(proposal)
    text = session.text(str(tmp_path / "train.py"))
    assert text == SCRIPT.replace('torch.save(fast, "fast.pt")', 'torch.save(plain, "fast.pt")')
