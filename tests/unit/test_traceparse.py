"""Parsing the texts PyTorch puts in its structured trace (texts as captured from torch 2.13 runs)."""

from torchmend.profiler.traceparse import guard_variable, parse_graph_break, parse_recompile_reason

GB_TEXT = """Graph break in user code at /p/train.py:9
Graph Break Reason: Data-dependent branching
  Explanation: Detected data-dependent branching (e.g. `if my_tensor.sum() > 0:`). Dynamo does not support tracing dynamic control flow.

 For more details about this graph break, please visit: https://meta-pytorch.github.io/compile-graph-break-site/gb/gb0170.html

User code traceback:
  File "/p/train.py", line 15, in <module>
    loss=cm(x)
         ^^^^^
  File "/p/train.py", line 9, in forward
    if y.sum() > 0:
       ^^^^^^^^^^^^

NoneType: None
"""


def test_graph_break_text():
    gb = parse_graph_break(GB_TEXT)
    assert (gb.file, gb.line, gb.gb_id, gb.gb_type) == ("/p/train.py", 9, "GB0170", "Data-dependent branching")
    assert gb.docs_url.endswith("gb0170.html")
    assert [(f.line, f.function, f.code) for f in gb.user_stack] == [
        (15, "<module>", "loss=cm(x)"),
        (9, "forward", "if y.sum() > 0:"),
    ]


def test_graph_break_text_without_header_is_ignored():
    assert parse_graph_break("something else") is None


def test_recompile_reason_with_user_line_and_hint():
    text = (
        "0/1: self.calls == 1      # self.calls += 1  # t.py:6 in forward (HINT: torch.compile considers "
        "integer attributes of the nn.Module to be static.)\nUser stack trace:\n"
        '  File "/p/t.py", line 6, in torch_dynamo_resume_in_forward_at_4\n    self.calls += 1'
    )
    g = parse_recompile_reason(text)
    assert (g.compile_id, g.guard, g.variable) == ("0/1", "self.calls == 1", "self.calls")
    assert (g.site.file, g.site.line, g.site.function) == ("/p/t.py", 6, "forward")
    assert "nn.Module" in g.hint


def test_recompile_reason_without_user_line():
    g = parse_recompile_reason("0/0: tensor 'args[0]' size mismatch at index 0. expected 8, actual 5")
    assert g.variable == "args[0]" and g.site is None


def test_guard_variables():
    assert guard_variable("L['temperature'] == 2.0") == "temperature"
    assert guard_variable("self.param_groups[0]['lr'] == 0.001") == "self.param_groups[0]['lr']"
    assert guard_variable("___check_obj_id(L['mod'], 1234)") == "mod"


def test_recompile_reason_with_the_torch_frame_that_made_the_guard():
    # torch 2.13 appends the torch frame after the user's line (and shortens the user's path)
    g = parse_recompile_reason(
        "0/3: timestep.item() == 600  # alpha_prod_t = self.alphas_cumprod[timestep]  "
        "# proj/sched.py:40 in step (_dynamo/utils.py:4231 in run_node)"
    )
    assert (g.guard, g.variable) == ("timestep.item() == 600", "timestep")
    assert (g.site.file, g.site.line, g.site.function) == ("proj/sched.py", 40, "step")


def test_global_state_guard_names_what_changed():
    assert guard_variable("GLOBAL_STATE changed: grad_mode") == "grad_mode"
