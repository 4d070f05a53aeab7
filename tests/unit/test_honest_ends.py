"""Issue 31 without a child run: how a run that left no end record is described (its real status, a full disk),
the bounded echo of its output, a failed original never judged as "numerics differ", rule codes on the command
line, and the ASCII fallback of the consoles where the stream cannot encode (LC_ALL=C, PYTHONUTF8=0)."""

from __future__ import annotations

import io
import json
import re
import signal
from pathlib import Path

import pytest
from rich.console import Console

from torchmend.cli.app import degrade_streams
from torchmend.model import Summary
from torchmend.profiler.runner import RunOutcome, _tail, disk_full, ended_without_end
from torchmend.rules import closest_codes, is_code_prefix
from torchmend.verify.compare import REFUSED, judge
from torchmend.verify.runs import ArmRun


def test_an_end_without_the_record_says_the_real_status(tmp_path: Path) -> None:
    assert ended_without_end(-signal.SIGKILL, False, tmp_path) == (
        "killed",
        "the script was killed by SIGKILL (the kernel's out-of-memory killer sends it)",
    )
    assert ended_without_end(-signal.SIGSEGV, False, tmp_path)[1] == "the script was killed by SIGSEGV"
    how, said = ended_without_end(0, False, tmp_path)
    assert how == "lost" and "exited with status 0" in said and "os._exit" in said and "killed" not in said
    how, said = ended_without_end(1, True, tmp_path)
    assert how == "lost" and "status 1 before its end record" in said
    assert f"the disk holding {tmp_path} is full (No space left on device)" in said


def test_a_full_disk_is_recognised_from_the_output_or_the_file_system(tmp_path: Path) -> None:
    assert disk_full(tmp_path, "OSError: [Errno 28] No space left on device: '/tmp/x'")
    assert not disk_full(tmp_path, "RuntimeError: boom")  # this folder has room
    assert not disk_full(tmp_path / "missing", "", look=True)


def test_the_echo_of_the_output_is_bounded_by_bytes_and_lines(tmp_path: Path) -> None:
    log = tmp_path / "output.log"
    log.write_bytes(b"first\n" + b"x" * 3_000_000 + b"\nTraceback (most recent call last):\nValueError: boom\n")
    tail = _tail(log)
    assert len(tail.encode()) < 4096 and tail.endswith("ValueError: boom")
    assert tail.startswith("[... the output's first") and "xxx" not in tail
    log.write_bytes(b"Traceback (most recent call last):\nValueError: " + b"x" * 5_000_000)  # 5 MB in one line
    tail = _tail(log)
    assert len(tail.encode()) < 2048 and "bytes of this line left out" in tail and tail.endswith("xxx")
    many = tmp_path / "many.log"
    many.write_text("".join(f"line {i}\n" for i in range(1000)))
    lines = _tail(many).splitlines()
    assert lines[-1] == "line 999" and len(lines) == 30
    assert _tail(tmp_path / "absent.log") == ""


def _arm(arm: str, ended_by: str, losses: tuple[float, ...], end: bool = True) -> ArmRun:
    summary = Summary(
        frames_compiled=1,
        compiles=1,
        graphs=2,
        graph_breaks=1 if arm == "before" else 0,
        recompiles=0,
        recompile_limit_hits=0,
        compile_seconds=1.0,
        steps=len(losses),
        ended_by=ended_by,
        wall_seconds=5.0,
        torch_version="2.13",
        first_step_s=1.0,
        steady_step_s=0.01,
    )
    record = {"ev": "end", "reason": ended_by, "losses": list(losses), "params": None} if end else {}
    detail = "" if end else ended_without_end(1, True, Path("/tmp/torchmend-run-x"))[1]
    return ArmRun(arm, 0, [], summary, RunOutcome([], ended_by, 1 if detail else 0, 5.0, "", record, detail))


def test_a_failed_original_is_never_numerics_that_differ() -> None:
    # The full-TMPDIR case: the scan (the original) died at step 1 without its end record, the patch ran on.
    v = judge([_arm("before", "lost", (), end=False)], [_arm("after", "finished", (1.0, 0.9, 0.8))])
    assert v.verdict == REFUSED
    assert not any("numerics differ" in r.text for r in v.reasons), v.reasons
    assert any("the original run failed" in r.text and "No space left on device" in r.text for r in v.reasons), (
        v.reasons
    )
    assert "original run failed" in v.numerics_text()
    # The patched run failing is said as its failure, as before; numbers that differ still do.
    v = judge([_arm("before", "finished", (1.0, 0.9))], [_arm("after", "lost", (), end=False)])
    assert v.verdict == REFUSED and not any("numerics differ" in r.text for r in v.reasons), v.reasons
    v = judge([_arm("before", "finished", (1.0, 0.9))], [_arm("after", "finished", (1.0, 0.5))])
    assert any("numerics differ" in r.text for r in v.reasons)


def test_rule_codes_on_the_command_line() -> None:
    assert all(is_code_prefix(c) for c in ("TM", "TM1", "TM10", "TM101", "TM9"))
    assert not any(is_code_prefix(c) for c in ("TM999", "tm1", "T", "TM1x", ""))
    assert closest_codes("tm1") == ["TM1"]
    assert "TM199" in closest_codes("TM999")


def test_a_stream_that_cannot_encode_gets_ascii(monkeypatch: pytest.MonkeyPatch) -> None:
    raw = io.BytesIO()
    stream = io.TextIOWrapper(raw, encoding="ascii", errors="strict", write_through=True)
    monkeypatch.setattr("sys.stdout", stream)
    monkeypatch.setattr("sys.stderr", io.TextIOWrapper(io.BytesIO(), encoding="utf-8"))
    degrade_streams()
    console = Console(file=stream, width=60, color_system=None)
    console.print("paths: /a → /b — 2× faster ✓ café…")
    console.print(__import__("rich.table", fromlist=["Table"]).Table("rule", "what", title="t"))
    out = raw.getvalue().decode("ascii")
    assert "paths: /a -> /b - 2x faster ok cafe..." in out
    assert "+" in out or "-" in out  # rich drew its box in ASCII


def test_what_fix_prints_renders_in_ascii(monkeypatch: pytest.MonkeyPatch) -> None:
    # fix's views on a recorded scan (the several fixture, torch 2.13): proposals, a change panel, what was
    # written, the unfixed findings and a verdict, through a stream that only takes ASCII.
    from conftest import ROOT, SCAN_FIXTURES
    from rich.text import Text

    from torchmend import pipeline
    from torchmend.cli.fixview import change_panel, print_proposal_list, print_written, unfixed_view, verification_view
    from torchmend.codemods.engine import span
    from torchmend.profiler import pathmap
    from torchmend.profiler.events import read_events
    from torchmend.profiler.findings import analyse

    events = read_events(ROOT / "fixtures" / "recorded" / "torch-2.13" / "several.jsonl")
    root = (SCAN_FIXTURES / "several").resolve()
    recorded = re.search(r'"([^"]*)/fixtures/scan/several/', json.dumps(events))
    assert recorded is not None  # the checkout the recording was made in: mapped onto this one
    events = pathmap.apply(events, [pathmap.Mapping(recorded.group(1), str(ROOT))])
    findings, _ = analyse(events, root, "steps")
    fixes = pipeline.propose(findings, root, torch_version="2.13")
    pipeline.accept_all(fixes, True)
    raw = io.BytesIO()
    stream = io.TextIOWrapper(raw, encoding="ascii", errors="strict", write_through=True)
    monkeypatch.setattr("sys.stdout", stream)
    degrade_streams()
    console = Console(file=stream, width=100, color_system=None)
    p = fixes.proposals[0]
    line = span(fixes.session.ctx.file(p.path), p)[0]
    console.print(change_panel(p, fixes.session.display(p.path), line, "x = 1\n", "x = 2\n", 1, 2))
    print_proposal_list(console, fixes.proposals, fixes.where)
    print_written(console, fixes.change_diffs(), fixes.where, False)
    console.print(unfixed_view(fixes.unfixed, 100))
    console.print(verification_view(judge([_arm("before", "finished", (1.0,))], [_arm("after", "finished", (1.0,))])))
    console.print(Text("  \u2713 TM101 change removed \u2026  \u21bb trying its next candidate"))
    out = raw.getvalue().decode("ascii")
    assert (
        p.rule in out and "verdict: no measured speed change" in out and "ok TM101 change removed ...  ~> trying" in out
    )
