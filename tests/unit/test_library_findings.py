"""Library findings carry the project frame that reached them, and the user-side remedy of a known library hot
spot (issue 13, item 5). Synthetic event streams in the shape torch 2.13 writes them; no torch run."""

from __future__ import annotations

from pathlib import Path

import pytest

from torchmend.model import Where
from torchmend.profiler.findings import analyse
from torchmend.profiler.hotspots import parse_version

MODEL = "\n".join(f"    line_{n} = {n}" for n in range(1, 200)) + "\n"


@pytest.fixture
def project(tmp_path: Path) -> dict[str, str]:
    site = tmp_path / "venv" / "lib" / "python3.12" / "site-packages"
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "model.py").write_text(MODEL)
    (tmp_path / "proj" / "train.py").write_text(MODEL)
    return {
        "root": str(tmp_path / "proj"),
        "model": str(tmp_path / "proj" / "model.py"),
        "train": str(tmp_path / "proj" / "train.py"),
        "site": str(site),
    }


def _start(p, **libraries):
    return {"ev": "start", "torch": "2.13.0+cpu", "library_roots": [p["site"]], "libraries": libraries}


def _cs(cid, stack, callers):
    return {"ev": "compile_start", "compile_id": cid, "stack": stack, "callers": callers}


def _ce(cid, file, line, name, **extra):
    return {
        "ev": "compile_end",
        "compile_id": cid,
        "co_name": name,
        "co_filename": file,
        "co_firstlineno": line,
        "graph_op_count": 2,
        "has_guarded_code": True,
        **extra,
    }


def _library_break(p, lib_file, lib_line, lib_function, gb_type, explanation):
    """A break inside the library whose user stack, as torch 2.13 writes it, skips the compiled project frame."""
    text = (
        f"Graph break in user code at {lib_file}:{lib_line}\nGraph Break Reason: {gb_type}\n"
        f"  Explanation: {explanation}\n\nUser code traceback:\n"
        f'  File "{p["train"]}", line 30, in main\n    logits = compiled(tokens)\n'
        f'  File "{p["site"]}/torch/nn/modules/module.py", line 1789, in _call_impl\n'
        f"    return forward_call(*args, **kwargs)\n"
        f'  File "{lib_file}", line {lib_line}, in {lib_function}\n    x = 1\n'
    )
    return {"ev": "graph_break", "compile_id": "1/0", "text": text}


def _after_a_break(p, brk, later_resume=True):
    """forward (model.py:10) breaks at line 18; its resume breaks inside the library, called from line 142."""
    events = [
        _start(p, transformers="4.57.1"),
        _cs("0/0", [[p["train"], 30, "main"], [p["model"], 10, "forward"]], [[p["train"], 30, "main"]]),
        _ce("0/0", p["model"], 10, "forward"),
        _cs(
            "1/0",
            [[p["model"], 18, "torch_dynamo_resume_in_forward_at_18"]],
            [[p["train"], 30, "main"], [p["model"], 18, "forward"]],
        ),
        *([brk] if brk else []),
        _ce("1/0", p["model"], 18, "torch_dynamo_resume_in_forward_at_18"),
    ]
    if later_resume:
        events += [
            _cs(
                "2/0",
                [[p["model"], 142, "torch_dynamo_resume_in_forward_at_142"]],
                [[p["model"], 18, "forward"], [p["model"], 142, "torch_dynamo_resume_in_forward_at_18"]],
            ),
            _ce("2/0", p["model"], 142, "torch_dynamo_resume_in_forward_at_142"),
        ]
    return events + [{"ev": "end", "reason": "finished", "steps": 1}]


def test_a_library_break_after_a_break_is_reached_from_the_models_line_not_the_training_loop(project):
    p = project
    lib = f"{p['site']}/transformers/modeling_utils.py"
    brk = _library_break(
        p,
        lib,
        4769,
        "loss_function",
        "Logger not supported for non-export cases",
        "logging.Logger method not supported for non-export cases.",
    )
    (f,), _ = analyse(_after_a_break(p, brk), Path(p["root"]))
    assert (f.rule, f.where, f.path, f.line) == ("TM102", Where.LIBRARY, lib, 4769)
    # the resume dynamo started after this break is called from model.py:142: that is the user's line
    assert (f.user_frame.file, f.user_frame.line, f.user_frame.function) == ("model.py", 142, "forward")
    # the user's line is read from the user's file at the user's line, never at the library's line
    assert f.user_frame.code == "line_142 = 142"


def test_without_a_later_resume_the_resume_frames_own_line_is_used(project):
    p = project
    lib = f"{p['site']}/torch/nn/modules/transformer.py"
    brk = _library_break(
        p,
        lib,
        1245,
        "_detect_is_causal_mask",
        "Unsupported Tensor.item() call",
        "Dynamo does not support tracing `Tensor.item()`",
    )
    (f,), _ = analyse(_after_a_break(p, brk, later_resume=False), Path(p["root"]))
    assert (f.user_frame.file, f.user_frame.line) == ("model.py", 18)


def test_a_library_recompile_in_a_resumed_frame_is_reached_from_the_resume_line(project):
    p = project
    lib = f"{p['site']}/transformers/models/bert/modeling_bert.py"
    reason = (
        f"1/0: self.config.problem_type == 'single_label_classification'  "
        f"# if self.config.problem_type is None:  # {lib}:1520 in forward"
    )
    events = _after_a_break(p, None, later_resume=False)[:-1]
    events += [
        _cs(
            "1/1",
            [[p["model"], 18, "torch_dynamo_resume_in_forward_at_18"]],
            [[p["train"], 30, "main"], [p["model"], 18, "forward"]],
        ),
        _ce("1/1", p["model"], 18, "torch_dynamo_resume_in_forward_at_18", recompile_reason=reason),
        {"ev": "end", "reason": "finished", "steps": 1},
    ]
    (f,), _ = analyse(events, Path(p["root"]))
    assert (f.where, f.line, f.variable) == (Where.LIBRARY, 1520, "self.config.problem_type")
    assert (f.user_frame.file, f.user_frame.line) == ("model.py", 18)  # not train.py:30
    assert "model.config.problem_type" in f.reason  # the known hot spot's remedy


def test_known_hot_spots_give_their_remedy_only_for_the_releases_they_were_read_from(project):
    p = project
    lib = f"{p['site']}/transformers/modeling_utils.py"
    brk = _library_break(
        p,
        lib,
        4769,
        "loss_function",
        "Logger not supported for non-export cases",
        "logging.Logger method not supported for non-export cases.",
    )
    events = _after_a_break(p, brk)
    (f,), _ = analyse(events, Path(p["root"]))
    assert "model.loss_type" in f.reason
    events[0] = _start(p, transformers="4.40.0")  # before PreTrainedModel.loss_function existed
    (old,), _ = analyse(events, Path(p["root"]))
    assert "loss_type" not in old.reason


def test_the_nn_transformer_mask_check_gets_the_is_causal_remedy(project):
    p = project
    lib = f"{p['site']}/torch/nn/modules/transformer.py"
    brk = _library_break(
        p,
        lib,
        1245,
        "_detect_is_causal_mask",
        "Unsupported Tensor.item() call",
        "Dynamo does not support tracing `Tensor.item()`",
    )
    (f,), _ = analyse(_after_a_break(p, brk), Path(p["root"]))
    assert f.rule == "TM104" and "is_causal=True" in f.reason


def test_versions_parse():
    assert parse_version("2.13.0+cpu") == (2, 13, 0) and parse_version("4.46.0.dev0") == (4, 46, 0)
    assert parse_version("") is None
