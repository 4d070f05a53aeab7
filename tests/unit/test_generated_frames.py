"""Findings inside code generated at run time (`<string>`: a dataclass's `__eq__`, a namedtuple's `__new__`, made
by exec) are reported at the nearest real frame, the line that called the generated code, never at `<string>`."""

from __future__ import annotations

from pathlib import Path

from torchmend.model import Where
from torchmend.profiler.findings import analyse
from torchmend.profiler.traceparse import Frame, GraphBreak, parse_recompile_reason
from torchmend.profiler.userframe import out_of_generated_break, out_of_generated_guard

MODEL = "\n".join(f"    line_{n} = {n}" for n in range(1, 60)) + "\n"


def _events(model: str) -> list[dict]:
    guard = (
        "0/0: opts.scale == 0.5                                        #   # <string>:4 in __eq__\n"
        "User stack trace:\n"
        f'  File "{model}", line 25, in forward\n    if opts == DEFAULT:\n'
        '  File "<string>", line 4, in __eq__\n'
    )
    brk = (
        "Graph break in user code at <string>:4\nGraph Break Reason: list_richcompare_nonconst\n"
        "  Explanation: Cannot determine list/tuple comparison at compile time.\n\nUser code traceback:\n"
        f'  File "{model}", line 40, in main\n    out = compiled(x)\n'
        f'  File "{model}", line 23, in forward\n    if Stats(h) == self.reference:\n'
        '  File "<string>", line 4, in __eq__\n'
    )
    return [
        {"ev": "start", "torch": "2.13.0+cpu", "library_roots": []},
        {"ev": "compile_start", "compile_id": "0/0", "stack": [[model, 40, "main"], [model, 20, "forward"]]},
        {"ev": "graph_break", "compile_id": "0/0", "text": brk},
        {"ev": "compile_end", "compile_id": "0/0", "co_name": "forward", "co_filename": model, "co_firstlineno": 20},
        {"ev": "compile_start", "compile_id": "0/1", "stack": [[model, 40, "main"], [model, 20, "forward"]]},
        {
            "ev": "compile_end",
            "compile_id": "0/1",
            "co_name": "forward",
            "co_filename": model,
            "co_firstlineno": 20,
            "recompile_reason": guard,
        },
        {"ev": "end", "reason": "finished", "steps": 2},
    ]


def test_a_guard_and_a_break_in_generated_code_land_on_the_calling_line(tmp_path: Path) -> None:
    model = tmp_path / "model.py"
    model.write_text(MODEL)
    findings, _ = analyse(_events(str(model)), tmp_path)
    got = {(f.rule, f.file, f.line, f.where) for f in findings}
    assert got == {("TM199", "model.py", 23, Where.PROJECT), ("TM299", "model.py", 25, Where.PROJECT)}, findings
    for f in findings:
        assert "<string>" not in f.path and f.function == "forward"
        assert "code generated at run time (<string>)" in f.reason and "`__eq__`" in f.reason


def test_guard_and_break_outside_generated_code_are_left_alone() -> None:
    g = parse_recompile_reason(
        '0/0: x == 1  # y = x + 1  # /p/m.py:3 in f\nUser stack trace:\n  File "/p/m.py", line 3, in f\n    y = x + 1\n'
    )
    assert out_of_generated_guard(g) == (g, None)
    gb = GraphBreak("/p/m.py", 3, "t", "e", None, None, (Frame("/p/m.py", 3, "f"),))
    assert out_of_generated_break(gb) == (gb, None)


def test_generated_code_with_no_real_frame_keeps_its_place() -> None:
    gb = GraphBreak("<string>", 4, "t", "e", None, None, (Frame("<string>", 4, "__eq__"),))
    moved, inner = out_of_generated_break(gb)
    assert moved is gb and inner == Frame("<string>", 4, "__eq__")


def test_a_generated_function_compiled_on_its_own_is_not_named_as_the_compiled_function(tmp_path: Path) -> None:
    """A dataclass's `__init__` compiled as a frame of its own (called from eager code after a break): its size
    guard names no line, so the finding is at the call site, and `<string>` is never offered as a file to read."""
    model = str(tmp_path / "model.py")
    (tmp_path / "model.py").write_text(MODEL)
    stack = [[model, 40, "main"], [model, 30, "forward"], ["<string>", 2, "__init__"]]
    events = [
        {"ev": "start", "torch": "2.13.0+cpu", "library_roots": []},
        *(
            e
            for cid in ("0/0", "0/1")
            for e in (
                {"ev": "compile_start", "compile_id": cid, "stack": stack, "callers": stack[:-1]},
                {
                    "ev": "compile_end",
                    "compile_id": cid,
                    "co_name": "__init__",
                    "co_filename": "<string>",
                    "co_firstlineno": 2,
                    "graph_op_count": 1,
                    **(
                        {"recompile_reason": "0/0: tensor 'hidden' size mismatch at index 0. expected 2, actual 3"}
                        if cid == "0/1"
                        else {}
                    ),
                },
            )
        ),
        {"ev": "end", "reason": "finished", "steps": 2},
    ]
    (f,) = analyse(events, tmp_path)[0]
    assert (f.rule, f.file, f.line) == ("TM204", "model.py", 30)
    assert f.compiled_function is None and f.call_site is not None and f.call_site.line == 30


def test_a_generated_guard_with_no_stack_goes_to_the_call_site(tmp_path: Path) -> None:
    model = str(tmp_path / "model.py")
    (tmp_path / "model.py").write_text(MODEL)
    stack = [[model, 40, "main"], [model, 20, "forward"]]
    events = [
        {"ev": "start", "torch": "2.13.0+cpu", "library_roots": []},
        {"ev": "compile_start", "compile_id": "0/0", "stack": stack, "callers": stack[:-1]},
        {"ev": "compile_end", "compile_id": "0/0", "co_name": "forward", "co_filename": model, "co_firstlineno": 20},
        {"ev": "compile_start", "compile_id": "0/1", "stack": stack, "callers": stack[:-1]},
        {
            "ev": "compile_end",
            "compile_id": "0/1",
            "co_name": "forward",
            "co_filename": model,
            "co_firstlineno": 20,
            "recompile_reason": "0/0: opts.scale == 0.5  #   # <string>:4 in __eq__",
        },
        {"ev": "end", "reason": "finished", "steps": 2},
    ]
    (f,) = analyse(events, tmp_path)[0]
    assert (f.file, f.line, f.where) == ("model.py", 40, Where.PROJECT)
    assert "code generated at run time (<string>)" in f.reason


def test_a_break_inside_a_dynamo_polyfill_lands_on_the_line_that_called_the_builtin(tmp_path: Path) -> None:
    """`if all(to_drop):` on a tensor breaks inside dynamo's own `all` (torch/_dynamo/polyfills/builtins.py): the
    finding is the caller's line, which somebody wrote and can change, not torch's file."""
    model = tmp_path / "model.py"
    model.write_text(MODEL)
    polyfill = "/venv/lib/python3.11/site-packages/torch/_dynamo/polyfills/builtins.py"
    brk = (
        f"Graph break in user code at {polyfill}:37\nGraph Break Reason: Data-dependent branching\n"
        "  Explanation: Detected data-dependent branching (e.g. `if my_tensor.sum() > 0:`).\n\nUser code traceback:\n"
        f'  File "{model}", line 40, in main\n    out = compiled(x)\n'
        f'  File "{model}", line 22, in forward\n    if all(to_drop):\n'
        f'  File "{polyfill}", line 37, in all\n    if not x:\n'
    )
    events = [
        {"ev": "start", "torch": "2.13.0+cpu", "library_roots": ["/venv/lib/python3.11/site-packages"]},
        {"ev": "compile_start", "compile_id": "0/0", "stack": [[str(model), 40, "main"], [str(model), 20, "forward"]]},
        {"ev": "graph_break", "compile_id": "0/0", "text": brk},
        {
            "ev": "compile_end",
            "compile_id": "0/0",
            "co_name": "forward",
            "co_filename": str(model),
            "co_firstlineno": 20,
        },
        {"ev": "end", "reason": "finished", "steps": 2},
    ]
    findings, _ = analyse(events, tmp_path)
    assert [(f.file, f.line, f.where, f.function) for f in findings] == [("model.py", 22, Where.PROJECT, "forward")]
    assert "polyfills" not in findings[0].path
    assert "inside dynamo's own version of `all`, torch/_dynamo/polyfills/builtins.py:37" in findings[0].reason
