"""What `scan` reports, from synthetic event streams (texts as torch 2.13 writes them; no torch run).

Issue 13: a function that never compiles (item 6), bookkeeping users can trust (item 7), a script that
torch.compile itself broke (item 9).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from torchmend.model import Kind, Pattern, Severity, Where
from torchmend.profiler.findings import analyse, separate_resets
from torchmend.profiler.traceparse import parse_recompile_reason, resolve_short_path

SCHED = """class Scheduler:
    def __init__(self):
        self.alphas_cumprod = None

    def step(self, model_output, timestep, sample):
        prev_timestep = timestep - 100
        alpha_prod_t = self.alphas_cumprod[timestep]
        alpha_prod_prev = self.alphas_cumprod[prev_timestep]
        return alpha_prod_t * sample + alpha_prod_prev * model_output


def main(scheduler, model):
    for t in range(10):
        sample = scheduler.step(model(t), t, 0)
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "sched.py").write_text(SCHED)
    return tmp_path


def _start(**extra):
    return {"ev": "start", "torch": "2.13.0", "library_roots": ["/venv/lib/python3.12/site-packages"], **extra}


def _compile_start(cid, path, line, function, caller_line=14):
    return {
        "ev": "compile_start",
        "compile_id": cid,
        "stack": [[path, caller_line, "main"], [path, line, function]],
        "callers": [[path, caller_line, "main"]],
    }


def _compile_end(cid, path, line, function, **fields):
    return {
        "ev": "compile_end",
        "compile_id": cid,
        "co_name": function,
        "co_filename": path,
        "co_firstlineno": line,
        "graph_op_count": 3,
        "has_guarded_code": True,
        "entire_frame_compile_time_s": 0.1,
        **fields,
    }


def _backend_failure(path: str) -> str:
    return f'''Backend compiler exception
  Explanation: Backend compiler `aot_eager` failed with aten._local_scalar_dense.default

    While executing %alpha_prod_t : [num_users=1] = call_function[target=operator.getitem](...)
    Original traceback:
      File "{path}", line 7, in step
        alpha_prod_t = self.alphas_cumprod[timestep]
                       ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^

    Use tlparse to see full graph. (https://github.com/pytorch/tlparse). Adding a graph break.
  Hint: Report an issue to the backend compiler repo.

  Developer debug context: Backend: aot_eager
    Traceback:
      File "{path}", line 8, in step
        alpha_prod_prev = self.alphas_cumprod[prev_timestep]


 For more details about this graph break, please visit:
 https://meta-pytorch.github.io/compile-graph-break-site/gb/gb0219.html
'''


def _def_line_break(path: str, headline: str) -> dict:
    text = (
        f"Graph break in user code at {path}:5\nGraph Break Reason: {headline} Graph break encountered:\n\n"
        f'{_backend_failure(path)}\nUser code traceback:\n  File "{path}", line 14, in main\n'
        "    sample = scheduler.step(model(t), t, 0)\n"
    )
    return {"ev": "graph_break", "compile_id": "0/0", "text": text}


def _wont_convert(path: str, check: dict | None = None) -> list[dict]:
    events = [_start(), _compile_start("0/0", path, 5, "step")]
    if check is not None:
        events.append({"ev": "backend_check", "compile_id": "0/0", "detect": "aot_eager", **check})
    events += [
        _def_line_break(path, "Encountered graph break that we cannot resume from."),
        {"ev": "graph_break", "compile_id": "0/0", "text": f"WON'T CONVERT step {path} line 5\n== stack =="},
        _def_line_break(path, "Failed to handle graph break gracefully. Skipping the function and falling back."),
        _compile_end(
            "0/0",
            path,
            5,
            "step",
            fail_type="Unsupported",
            fail_reason=_backend_failure(path),
            graph_op_count=None,
            has_guarded_code=False,
        ),
        {"ev": "end", "reason": "finished", "steps": 10},
    ]
    return events


# --- item 6: a function that never compiles --------------------------------------------------------------------


def test_a_function_that_never_converts_is_one_finding_at_the_line_the_failure_names(project):
    path = str(project / "sched.py")
    findings, summary = analyse(_wont_convert(path), project)
    assert [(f.rule, f.line, f.function, f.count) for f in findings] == [("TM106", 7, "step", 1)]
    f = findings[0]
    assert f.kind == Kind.GRAPH_BREAK and f.severity == Severity.FIX and f.where == Where.PROJECT
    assert f.code == "alpha_prod_t = self.alphas_cumprod[timestep]"
    assert "runs eagerly" in f.reason and "aot_eager" in f.reason and f.gb_id == "GB0219"
    assert f.call_site.line == 14 and f.compiled_function.line == 5
    # the two `def`-line texts are the same failure, not graph breaks; nothing was compiled
    assert summary.graph_breaks == 0 and summary.frames_compiled == 0 and summary.graphs == 0


def test_the_report_says_when_the_scripts_own_backend_compiles_what_the_detection_backend_cannot(project):
    path = str(project / "sched.py")
    agree = analyse(
        _wont_convert(path, {"own": "inductor", "own_compiles": False, "own_error": "DataDependentOutputException: x"}),
        project,
    )[0][0]
    assert "own backend `inductor` fails on it too" in agree.reason
    disagree = analyse(_wont_convert(path, {"own": "eager", "own_compiles": True, "own_error": None}), project)[0][0]
    assert "own backend `eager` compiles this graph" in disagree.reason
    assert "disagree" in disagree.reason and "--backend eager" in disagree.reason


def test_a_backend_failure_break_in_a_frame_that_still_compiled_stays_a_graph_break(project):
    path = str(project / "sched.py")
    events = [
        _start(),
        _compile_start("0/0", path, 5, "step"),
        _def_line_break(path, "Encountered graph break that we cannot resume from."),
        _compile_end("0/0", path, 5, "step"),
        {"ev": "end", "reason": "finished", "steps": 1},
    ]
    findings, summary = analyse(events, project)
    assert [(f.rule, f.line) for f in findings] == [("TM199", 5)]
    assert summary.graph_breaks == 1 and summary.frames_compiled == 1


# --- item 7: bookkeeping ---------------------------------------------------------------------------------------


def test_a_guard_naming_its_source_line_is_filed_there_even_with_the_torch_frame_after_it(project):
    path = str(project / "sched.py")
    reason = (
        "0/0: timestep.item() == 900  # alpha_prod_t = self.alphas_cumprod[timestep]  "
        f"# {path[1:].split('/', 1)[1]}:7 in step (_dynamo/utils.py:4231 in run_node)"
    )
    g = parse_recompile_reason(reason)
    assert g.guard == "timestep.item() == 900" and g.variable == "timestep"
    assert (g.site.line, g.site.function, g.site.code) == (7, "step", "alpha_prod_t = self.alphas_cumprod[timestep]")
    events = [
        _start(),
        _compile_start("0/0", path, 5, "step"),
        _compile_end("0/0", path, 5, "step"),
        _compile_start("0/1", path, 5, "step"),
        _compile_end("0/1", path, 5, "step", recompile_reason=reason),
        {"ev": "end", "reason": "finished", "steps": 1},
    ]
    (f,), _ = analyse(events, project)
    assert (f.path, f.line, f.variable) == (path, 7, "timestep")
    assert f.call_site.code == "sample = scheduler.step(model(t), t, 0)"  # read from the file
    assert f.compiled_function.code == "def step(self, model_output, timestep, sample):"


def test_shortened_guard_paths_are_resolved_like_torch_shortened_them(tmp_path):
    torch_root = tmp_path / "venv" / "site-packages" / "torch"
    lib = tmp_path / "venv" / "site-packages" / "transformers" / "modeling_utils.py"
    lib.parent.mkdir(parents=True)
    torch_root.mkdir()
    lib.write_text("x = 1\n")
    # a library file: relative to site-packages (the common prefix with torch's own directory)
    assert resolve_short_path("transformers/modeling_utils.py", [], str(torch_root)) == str(lib)
    adam = torch_root / "optim" / "adam.py"
    adam.parent.mkdir()
    adam.write_text("x = 1\n")
    assert resolve_short_path("optim/adam.py", [], str(torch_root)) == str(adam)  # torch's own: relative to torch/
    # a project file beside the venv: relative to their common ancestor, or matched to a file the run named
    named = ["/home/a/proj/train.py"]
    assert resolve_short_path("proj/train.py", named, "/home/a/venv/torch") == "/home/a/proj/train.py"
    # only `/` in common: torch also drops the first character
    assert resolve_short_path("mp/exp/t.py", ["/tmp/exp/t.py"], "/usr/lib/python3/torch") == "/tmp/exp/t.py"
    assert resolve_short_path("/abs/t.py", [], None) == "/abs/t.py"


def test_a_guard_in_a_library_file_is_where_library(project, tmp_path):
    site = tmp_path / "venv" / "lib" / "python3.12" / "site-packages"
    lib = site / "transformers" / "loss_utils.py"
    lib.parent.mkdir(parents=True)
    (site / "torch").mkdir()
    lib.write_text("\n" * 20)
    path = str(project / "sched.py")
    reason = "0/0: self.config.problem_type == 'x'  # if x:  # transformers/loss_utils.py:12 in forward"
    events = [
        {**_start(), "library_roots": [str(site)], "torch_root": str(site / "torch")},
        _compile_start("0/0", path, 5, "step"),
        _compile_end("0/0", path, 5, "step"),
        _compile_start("0/1", path, 5, "step"),
        _compile_end("0/1", path, 5, "step", recompile_reason=reason),
        {"ev": "end", "reason": "finished", "steps": 1},
    ]
    (f,), _ = analyse(events, project)
    assert (f.path, f.line, f.where) == (str(lib), 12, Where.LIBRARY)
    assert f.user_frame.line == 14


def test_one_grad_mode_switch_in_a_frame_and_its_resume_frame_is_one_once_note(project):
    path = str(project / "sched.py")
    resume = "torch_dynamo_resume_in_step_at_8"
    events = [_start()]
    for frame, fn, line in (("0", "step", 5), ("1", resume, 8)):
        events += [_compile_start(f"{frame}/0", path, line, fn), _compile_end(f"{frame}/0", path, line, fn)]
    for frame, fn, line in (("0", "step", 5), ("1", resume, 8)):
        events += [
            _compile_start(f"{frame}/1", path, line, fn),
            _compile_end(f"{frame}/1", path, line, fn, recompile_reason=f"{frame}/0: GLOBAL_STATE changed: grad_mode "),
        ]
    events.append({"ev": "end", "reason": "finished", "steps": 1})
    (f,), summary = analyse(events, project)
    assert (f.rule, f.count, f.pattern, f.variable) == ("TM299", 1, Pattern.ONCE, "grad_mode")
    assert f.severity == Severity.NOTE
    assert summary.recompiles == 2 and summary.frames_compiled == 2


def test_compile_ids_are_not_merged_across_dynamo_reset(project):
    path = str(project / "sched.py")
    other = str(project / "sched.py")
    events = [
        _start(),
        _compile_start("0/0", path, 5, "step"),
        _compile_end("0/0", path, 5, "step"),
        # torch._dynamo.reset(): ids start again at 0/0, for another function
        _compile_start("0/0", other, 12, "main"),
        _compile_end("0/0", other, 12, "main"),
        _compile_start("0/1", other, 12, "main"),
        _compile_end(
            "0/1", other, 12, "main", recompile_reason=f"0/0: n == 3  # for t in range(10):  # {other}:13 in main"
        ),
        {"ev": "end", "reason": "finished", "steps": 1},
    ]
    assert [e.get("compile_id") for e in separate_resets(events)][1:6] == ["0/0", "0/0", "1.0/0", "1.0/0", "1.0/1"]
    (f,), summary = analyse(events, project)
    assert f.compiled_function.function == "main"  # not `step`, the frame 0 of before the reset
    assert summary.frames_compiled == 2


def test_frames_compiled_counts_each_compiled_function_once(project):
    path = str(project / "sched.py")
    events = [_start()]
    for frame, fn, line in (("0", "step", 5), ("1", "main", 12), ("2", "helper", 1)):
        for n in range(3):
            events += [
                _compile_start(f"{frame}/{n}", path, line, fn),
                _compile_end(
                    f"{frame}/{n}", path, line, fn, recompile_reason=f"{frame}/{n - 1}: x == {n}" if n else None
                ),
            ]
    events.append({"ev": "end", "reason": "finished", "steps": 1})
    _, summary = analyse(events, project)
    assert (summary.frames_compiled, summary.compiles, summary.recompiles) == (3, 9, 6)


# --- item 9: torch.compile broke the script --------------------------------------------------------------------

_WO_ERROR = (
    "UnpicklingError: Weights only load failed. This file can still be loaded, to do so you have two "
    "options.\n\tWeightsUnpickler error: Unsupported global: GLOBAL torch._dynamo.eval_frame.OptimizedModule "
    "was not an allowed global by default."
)


def _failed_run(path: str, error: str, line: int, code: str) -> list[dict]:
    tb = (
        f'Traceback (most recent call last):\n  File "{path}", line 14, in main\n    {code}\n'
        '  File "/venv/lib/python3.12/site-packages/torch/serialization.py", line 1609, in load\n'
        f"    raise pickle.UnpicklingError(_get_wo_message(str(e))) from None\n{error}\n"
    )
    tb = tb.replace("line 14", f"line {line}")
    return [
        _start(),
        _compile_start("0/0", path, 5, "step"),
        _compile_end("0/0", path, 5, "step"),
        {"ev": "end", "reason": "error", "error": error, "traceback": tb, "steps": 3},
    ]


def test_a_compiled_model_pickled_whole_and_loaded_with_weights_only_is_recognised(project):
    path = str(project / "sched.py")
    findings, _ = analyse(
        _failed_run(path, _WO_ERROR, 14, "restored = torch.load(p, weights_only=True)"), project, "error"
    )
    (f,) = findings
    assert (f.rule, f.kind, f.line, f.where, f.severity) == (
        "TM107",
        Kind.SCRIPT_FAILURE,
        14,
        Where.PROJECT,
        Severity.FIX,
    )
    assert "OptimizedModule" in f.reason and "model._orig_mod.state_dict()" in f.reason


def test_a_compiled_models_state_dict_loaded_into_the_plain_module_is_recognised(project):
    path = str(project / "sched.py")
    error = (
        "RuntimeError: Error(s) in loading state_dict for Classifier:\n\tMissing key(s) in state_dict: "
        '"head.weight", "head.bias". \n\tUnexpected key(s) in state_dict: "_orig_mod.head.weight", '
        '"_orig_mod.head.bias". '
    )
    (f,), _ = analyse(_failed_run(path, error, 13, "model.load_state_dict(torch.load(p))"), project, "error")
    assert f.rule == "TM107" and f.line == 13
    assert "_orig_mod." in f.reason and "model.compile()" in f.reason


def test_other_failures_are_not_taken_for_a_saved_compiled_model(project):
    path = str(project / "sched.py")
    findings, _ = analyse(_failed_run(path, "ValueError: bad batch", 13, "x = next(it)"), project, "error")
    assert findings == []
