"""A call site that itself runs inside a compiled call: the collector's 4th field on a live caller (1: torch.compile's
frame hook was on for it) becomes `call_site.traced`, which the TM204 fix reads to put no mark there."""

from __future__ import annotations

from pathlib import Path

import pytest

from torchmend.model import Finding, Location
from torchmend.profiler.findings import analyse

MODEL = "\n".join(f"    line_{n} = {n}" for n in range(1, 60)) + "\n"


def _events(model: str, traced: bool) -> list[dict]:
    # the loop (line 40) calls the model; `encode` (line 27) calls the layer, whose forward (line 10) recompiles
    callers = [[model, 40, "<module>"], [model, 27, "encode", *([1] if traced else [])]]
    stack = [[model, 10, "forward"]]
    return [
        {"ev": "start", "torch": "2.13.0+cpu", "library_roots": []},
        {"ev": "compile_start", "compile_id": "1/0", "stack": stack, "callers": callers},
        {"ev": "compile_end", "compile_id": "1/0", "co_name": "forward", "co_filename": model, "co_firstlineno": 10},
        {"ev": "compile_start", "compile_id": "1/1", "stack": stack, "callers": callers},
        {
            "ev": "compile_end",
            "compile_id": "1/1",
            "co_name": "forward",
            "co_filename": model,
            "co_firstlineno": 10,
            "recompile_reason": "1/0: tensor 'mask' size mismatch at index 1. expected 5, actual 6",
        },
        {"ev": "end", "reason": "finished", "steps": 2},
    ]


@pytest.mark.parametrize("traced", [True, False])
def test_the_call_site_says_whether_it_ran_inside_compiled_code(tmp_path: Path, traced: bool) -> None:
    model = str(tmp_path / "model.py")
    (tmp_path / "model.py").write_text(MODEL)
    (f,) = analyse(_events(model, traced), tmp_path)[0]
    assert f.rule == "TM204" and f.call_site is not None
    assert (f.call_site.line, f.call_site.traced) == (27, traced)


@pytest.mark.parametrize("traced", [True, False])
def test_the_entry_is_the_innermost_caller_outside_compiled_code(tmp_path: Path, traced: bool) -> None:
    """Finding.entry, where the run entered compiled code from the user's code: the loop's line when `encode` ran
    inside the compiled call, else `encode`'s own line (the eager-first-call fix resets the stance after it)."""
    model = str(tmp_path / "model.py")
    (tmp_path / "model.py").write_text(MODEL)
    (f,) = analyse(_events(model, traced), tmp_path)[0]
    assert f.entry is not None and not f.entry.traced
    assert f.entry.line == (40 if traced else 27)
    assert Finding.from_json(f.to_json()).entry == f.entry


def test_old_findings_without_the_field_read_back() -> None:
    """JSON written before the field existed (no `traced`) reads back as not traced."""
    data = {"file": "a.py", "line": 3, "function": "f", "path": "/p/a.py", "code": ""}
    assert Location(**data).traced is False
    finding = Finding.from_json(
        {
            "rule": "TM204",
            "kind": "recompile",
            "title": "t",
            "file": "a.py",
            "line": 3,
            "function": "f",
            "path": "/p/a.py",
            "where": "project",
            "reason": "r",
            "count": 1,
            "severity": "fix",
            "call_site": data,
        }
    )
    assert finding.call_site is not None and finding.call_site.traced is False
