"""Fixes whose call and whose definition live in different files of the project: a compiled bound method
(`torch.compile(teacher.update)`) whose guard names `fn.__self__.updates`, with the class in a package, and a
compiled module whose forward is defined in another file (the call is bound to its parameters there)."""

from __future__ import annotations

from pathlib import Path

from torchmend.analysis.source import Context
from torchmend.codemods.base import NoFix, Proposal
from torchmend.codemods.engine import Session
from torchmend.codemods.examples import findings_from_markers
from torchmend.values import Root

TEACHER = """import torch
from torch import nn


class Teacher(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)
        self.updates = 0

    def update(self, x):
        self.updates += 1
        return self.proj(x) * 0.5


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, src, mask=None):
        return self.proj(src)
"""

TRAIN = """import torch
from mypkg import Encoder, Teacher


def main(batches):
    teacher = Teacher()
    fast_update = torch.compile(teacher.update)
    model = torch.compile(Encoder())
    for x in batches:
        fast_update(x)  # tm: TM201 variable=fn.__self__.updates where=library
        model(mask=None, src=x)  # tm: TM204 variable=L['src'] guard=size_mismatch_at_index_0
"""


def _propose(root: Path, train: str = TRAIN) -> tuple[Session, list]:
    (root / "mypkg").mkdir()
    (root / "mypkg" / "__init__.py").write_text("from mypkg.models import Encoder, Teacher\n")
    (root / "mypkg" / "models.py").write_text(TEACHER)
    (root / "train.py").write_text(train)
    session = Session(Context(str(root), lambda p: Path(p).read_text()))
    return session, session.propose(findings_from_markers(str(root / "train.py"), train, Root(root)))


def test_a_compiled_bound_method_gets_its_buffer_in_the_class_of_another_file(tmp_path: Path) -> None:
    session, results = _propose(tmp_path)
    (buffer,) = [r for r in results if isinstance(r, Proposal) and r.rule == "TM201"]
    assert buffer.path.endswith("models.py")
    session.accept(buffer)
    ((path, (before, after)),) = session.changed().items()
    assert path.endswith("models.py")
    assert 'self.register_buffer("updates", torch.tensor(0), persistent=False)' in after
    assert "self.updates.add_(1)" in after


def test_a_forward_defined_in_another_file_binds_the_keyword_argument(tmp_path: Path) -> None:
    session, results = _propose(tmp_path)
    (mark,) = [r for r in results if isinstance(r, Proposal) and r.rule == "TM204"]
    session.accept(mark)
    ((path, (before, after)),) = session.changed().items()
    assert path.endswith("train.py")
    assert "        torch._dynamo.maybe_mark_dynamic(x, 0)\n        model(mask=None, src=x)" in after


def test_a_bound_method_whose_object_is_a_parameter_says_why(tmp_path: Path) -> None:
    train = TRAIN.replace("def main(batches):\n    teacher = Teacher()\n", "def main(batches, teacher):\n")
    _, results = _propose(tmp_path, train)
    (nofix,) = [r for r in results if isinstance(r, NoFix) and r.finding.rule == "TM201"]
    assert "`teacher` is a parameter of main()" in nofix.reason
    assert "line 9 of train.py" in nofix.reason
