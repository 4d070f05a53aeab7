"""End to end, per rewrite family: scan a fixture (aot_eager), accept every proposal, write the result into a
scratch copy, scan the copy, and check that what was targeted is gone and nothing got worse."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from conftest import ROOT, SCAN_FIXTURES, scan_json, torchmend
from torchmend.codemods.base import Proposal
from torchmend.codemods.engine import Session
from torchmend.codemods.source import Context
from torchmend.profiler.findings import Finding

# fixture -> the rules whose findings get a proposal (and must be gone after the rewrite)
TARGETS = {
    "print_in_forward": {"TM101"},
    "logger_in_forward": {"TM102"},
    "tensor_if": {"TM103"},
    "item_arith": {"TM104", "TM205"},
    "two_file": {"TM104", "TM205"},
    "module_counter": {"TM201", "TM250"},
    "float_arg": {"TM202"},
    "global_scalar": {"TM202", "TM206"},
    "float_lr_warmup": {"TM203"},
    "varying_batch": {"TM204"},
    "several": {"TM101", "TM103", "TM201", "TM202", "TM250"},
}


def _fix_copy(name: str, tmp_path: Path) -> tuple[dict, set[str], Path]:
    before = scan_json(SCAN_FIXTURES / name / "train.py")
    assert before.returncode == 0, before.stderr
    findings = [Finding.from_json(f) for f in before.json["findings"]]
    session = Session(Context(str(ROOT), lambda p: Path(p).read_text()))
    results = session.propose(findings)
    proposed = {f.rule for r in results if isinstance(r, Proposal) for f in r.findings}
    for r in results:
        if isinstance(r, Proposal):
            session.accept(r)
    copy = tmp_path / name
    shutil.copytree(SCAN_FIXTURES / name, copy)
    for path, (_, new) in session.changed().items():
        (copy / Path(path).relative_to(SCAN_FIXTURES / name)).write_text(new)
    return before.json, proposed, copy


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_rewrite_removes_what_it_targets(name: str, tmp_path: Path) -> None:
    before, proposed, copy = _fix_copy(name, tmp_path)
    assert proposed == TARGETS[name]
    after = torchmend("scan", str(copy / "train.py"), "--backend", "aot_eager", "--format", "json",
                      "--project", str(copy), "--timeout", "300")
    assert after.returncode == 0, after.stderr
    left = {f["rule"] for f in after.json["findings"] if f["where"] == "project"}
    assert not (left & proposed), f"still there after the rewrite: {sorted(left & proposed)}"
    b, a = before["summary"], after.json["summary"]
    assert a["graph_breaks"] + a["recompiles"] < b["graph_breaks"] + b["recompiles"]
    assert a["recompile_limit_hits"] <= b["recompile_limit_hits"]
