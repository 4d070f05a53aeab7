"""The tensor-lr fix for an optimizer class that lives in another file of the project, imported through a
package's re-export (the way a vendored Lion or Muon is used): the class is found and checked there, and
the construction and the schedule writes in the training script are rewritten."""

from __future__ import annotations

from pathlib import Path

from torchmend.analysis.source import Context
from torchmend.codemods.base import NoFix, Proposal
from torchmend.codemods.engine import Session
from torchmend.codemods.examples import findings_from_markers
from torchmend.values import Root

OPTIM = """import torch
from torch.optim.optimizer import Optimizer


def update_fn(p, grad, buf, lr, beta):
    buf.lerp_(grad, 1 - beta)
    p.add_(buf.sign(), alpha=-lr)


class SignLion(Optimizer):
    def __init__(self, params, lr=1e-4, beta=0.9):
        super().__init__(params, dict(lr=lr, beta=beta))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            for p in group["params"]:
                buf = self.state[p].setdefault("buf", torch.zeros_like(p))
                update_fn(p, p.grad, buf, group["lr"], group["beta"])
"""

TRAIN = """import torch
from mypkg import SignLion


def train(model, batches):
    opt = SignLion(model.parameters(), lr=3e-4)
    step = torch.compile(opt.step)
    for i, batch in enumerate(batches):
        for g in opt.param_groups:
            g["lr"] = 3e-4 * min(1.0, (i + 1) / 10)
        model(batch).sum().backward()
        step()  # tm: TM203 variable=self.param_groups[0]['lr']
"""


def _propose(root: Path, optim: str) -> tuple[Session, list]:
    (root / "mypkg").mkdir()
    (root / "mypkg" / "__init__.py").write_text("from mypkg.optim import SignLion\n")
    (root / "mypkg" / "optim.py").write_text(optim)
    (root / "train.py").write_text(TRAIN)
    session = Session(Context(str(root), lambda p: Path(p).read_text()))
    return session, session.propose(findings_from_markers(str(root / "train.py"), TRAIN, Root(root)))


def test_a_project_optimizer_imported_from_another_file_gets_the_tensor_lr(tmp_path: Path) -> None:
    session, results = _propose(tmp_path, OPTIM)
    proposals = [r for r in results if isinstance(r, Proposal)]
    assert len(proposals) == 1, [getattr(r, "reason", r) for r in results]
    session.accept(proposals[0])
    ((path, (before, after)),) = session.changed().items()
    assert path.endswith("train.py")
    assert "opt = SignLion(model.parameters(), lr=torch.tensor(3e-4))" in after
    assert 'g["lr"].fill_(3e-4 * min(1.0, (i + 1) / 10))' in after


def test_a_float_lr_need_in_the_other_file_is_named(tmp_path: Path) -> None:
    needs_float = OPTIM.replace(
        '            for p in group["params"]:',
        '            if group["lr"] <= 0:\n                continue\n            for p in group["params"]:',
    )
    _, results = _propose(tmp_path, needs_float)
    (nofix,) = [r for r in results if isinstance(r, NoFix)]
    assert "line 17 (mypkg/optim.py)" in nofix.reason and "branches on the lr" in nofix.reason
