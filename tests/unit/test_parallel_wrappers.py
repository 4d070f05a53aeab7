"""The parallel wrappers' own breaks, told apart on recorded findings of real 2-rank runs (fixtures/recorded/
distributed: DDP and FSDP2 on 2 x H100 with NCCL on torch 2.11, and on the CPU with gloo on torch 2.13)."""

from __future__ import annotations

import io
import json
from dataclasses import replace

import pytest
from conftest import ROOT
from rich.console import Console

from torchmend.cli.render import print_scan
from torchmend.model import EndedBy, Finding, Severity, Summary
from torchmend.profiler.hotspots import parse_version
from torchmend.profiler.parallel import mark_wrapper_breaks

RECORDED = ROOT / "fixtures" / "recorded" / "distributed"


def _marked(name: str) -> tuple[list[Finding], str]:
    data = json.loads((RECORDED / name).read_text())
    findings = [Finding.from_json(f) for f in data["findings"]]
    return mark_wrapper_breaks(findings, data["torch_version"], parse_version(data["torch_version"])), data[
        "torch_version"
    ]


@pytest.mark.parametrize("name", ["ddp-h100-torch2.11.json", "ddp-cpu-torch2.13.json"])
def test_ddp_own_breaks_are_expected_and_not_to_fix(name: str) -> None:
    findings, version = _marked(name)
    minor = ".".join(version.split(".")[:2])
    expected = {(f.gb_id, f.expected) for f in findings if f.expected}
    assert expected == {
        ("GB0156", f"from DistributedDataParallel (its logger), expected on torch {minor}; not in your code"),
        (
            "GB0007",
            f"from DistributedDataParallel (`_inside_ddp_forward`), expected on torch {minor}; not in your code",
        ),
    }
    assert all(f.severity == Severity.INFO for f in findings if f.expected)
    # the user's own print and `if` in the block, and the learning rate: still to fix
    assert {f.rule for f in findings if f.severity == Severity.FIX} >= {"TM101", "TM103"}


@pytest.mark.parametrize(
    ("name", "frame"),
    [("fsdp2-h100-torch2.11.json", "_fsdp_state.py"), ("fsdp2-cpu-torch2.13.json", "_fsdp_common.py")],
)
def test_fsdp2_hooks_stop_is_tm113_per_version(name: str, frame: str) -> None:
    findings, _ = _marked(name)
    stop = [f for f in findings if f.rule == "TM113"]
    assert len(stop) == 1 and stop[0].path.endswith(frame) and stop[0].gb_id == "GB0007"
    assert stop[0].severity == Severity.FIX and stop[0].expected is None
    assert stop[0].user_frame is not None and stop[0].user_frame.file.endswith("fsdp2.py")
    assert not any(f.rule == "TM105" for f in findings)


def test_an_entry_holds_only_for_its_releases() -> None:
    """2.11's FSDP2 frame is not read as the stop on 2.13 (the hooks moved to _fsdp_common.py there)."""
    data = json.loads((RECORDED / "fsdp2-h100-torch2.11.json").read_text())
    findings = [Finding.from_json(f) for f in data["findings"]]
    marked = mark_wrapper_breaks(findings, "2.13.0", (2, 13, 0))
    assert not any(f.rule == "TM113" for f in marked)


def test_expected_breaks_are_shown_apart_and_counted_apart() -> None:
    findings, _ = _marked("ddp-cpu-torch2.13.json")
    summary = Summary(
        frames_compiled=1,
        compiles=1,
        graphs=1,
        graph_breaks=1,
        recompiles=0,
        recompile_limit_hits=0,
        compile_seconds=1.0,
        steps=4,
        ended_by=EndedBy.STEPS,
        wall_seconds=1.0,
        torch_version="2.13.0",
    )
    out = io.StringIO()
    print_scan(Console(file=out, width=200, no_color=True), findings, summary)
    text = out.getvalue()
    fix = sum(f.severity == Severity.FIX for f in findings)
    assert (
        f"{len(findings)} findings: {fix} to fix, 1 one-time, 1 informational, 2 expected from DistributedDataParallel"
        in text
    )
    assert "(a parallel wrapper's own break: expected, not in your code)" in text
    # without the mark the same findings count DDP's breaks as to fix
    raw = [replace(f, severity=Severity.FIX, expected=None) if f.expected else f for f in findings]
    assert sum(f.severity == Severity.FIX for f in raw) == fix + 2


def test_fix_skips_the_expected_breaks_instead_of_listing_them_as_unfixable() -> None:
    from torchmend.analysis.source import Context
    from torchmend.codemods.base import NoFix
    from torchmend.codemods.engine import Session

    findings, _ = _marked("ddp-cpu-torch2.13.json")
    expected = [f for f in findings if f.expected]
    results = Session(Context(str(ROOT), lambda p: "")).propose(expected)
    assert all(isinstance(r, NoFix) and r.skipped for r in results)
    assert {r.reason for r in results if isinstance(r, NoFix)} == {f.expected for f in expected}
