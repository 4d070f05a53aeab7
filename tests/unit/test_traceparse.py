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


OBSERVED_TEXT = 'Graph break in user code at /proj/train.py:7\nGraph Break Reason: Failed to handle graph break gracefully. Skipping the function and falling back to eager. Graph break encountered:\n\nObserved exception\n  Explanation: Dynamo found no exception handler at the top-level compiled function when encountering an exception. Exception will propagate outside the compiled region.\n  Hint: Your code may result in an error when running in eager. Please double check that your code doesn\'t contain a similar error when actually running eager/uncompiled. You can do this by removing the `torch.compile` call, or by using `torch.compiler.set_stance("force_eager")`. \n  Hint: It may be possible to write Dynamo tracing rules for this code. Please report an issue to PyTorch if you encounter this graph break often and it is causing performance issues.\n\n  Developer debug context: raised exception TypeError("\'NoneType\' object is not subscriptable")\n\n For more details about this graph break, please visit: https://meta-pytorch.github.io/compile-graph-break-site/gb/gb0088.html\n\nUser code traceback:\n  File "/proj/train.py", line 13, in <module>\n    g(x).backward()\n  File "/work/main/torchmend/profiler/numerics.py", line 445, in call_compiled\n    result = compiled(*args, **kwargs)\n             ^^^^^^^^^^^^^^^^^^^^^^^^^\n  File "/proj/train.py", line 7, in f\n    return (x * mask[:, None]).sum()\n                ^^^^^^^^^^^^^^^^^^^^\n\nTraceback (most recent call last):\n  File "/work/main/.venv/lib/python3.11/site-packages/torch/_dynamo/symbolic_convert.py", line 1603, in step\n    self.dispatch_table[inst.opcode](self, inst)\n  File "/work/main/.venv/lib/python3.11/site-packages/torch/_dynamo/symbolic_convert.py", line 1076, in wrapper\n    return inner_fn(self, inst)\n           ^^^^^^^^^^^^^^^^^^^^\n  File "/work/main/.venv/lib/python3.11/site-packages/torch/_dynamo/symbolic_convert.py", line 505, in impl\n    self.push(fn_var.call_function(self, self.popn(nargs), {}))\n              ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n  File "/work/main/.venv/lib/python3.11/site-packages/torch/_dynamo/variables/builtin.py", line 1588, in call_function\n    return handler(tx, args, kwargs)  # type: ignore[return-value]\n           ^^^^^^^^^^^^^^^^^^^^^^^^^\n  File "/work/main/.venv/lib/python3.11/site-packages/torch/_dynamo/variables/builtin.py", line 1281, in builtin_dispatch\n    rv = fn(tx, args, kwargs)\n         ^^^^^^^^^^^^^^^^^^^^\n  File "/work/main/.venv/lib/python3.11/site-packages/torch/_dynamo/variables/builtin.py", line 1140, in call_self_handler\n    return self_handler(tx, *args, **kwargs)\n           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n  File "/work/main/.venv/lib/python3.11/site-packages/torch/_dynamo/variables/builtin.py", line 2224, in call_getitem\n    return vt_getitem(tx, args[0], args[1])\n           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n  File "/work/main/.venv/lib/python3.11/site-packages/torch/_dynamo/variables/object_protocol.py", line 525, in vt_getitem\n    raise_type_error(tx, f"\'{obj_type.__name__}\' object is not subscriptable")\n  File "/work/main/.venv/lib/python3.11/site-packages/torch/_dynamo/exc.py", line 526, in raise_type_error\n    raise_observed_exception(TypeError, tx, args=[msg])\n  File "/work/main/.venv/lib/python3.11/site-packages/torch/_dynamo/exc.py", line 520, in raise_observed_exception\n    raise raised_exc(*args_)\ntorch._dynamo.exc.ObservedTypeError: ConstantVariable(str: "\'NoneType\' object is not subscriptable")\n\nThe above exception was the direct cause of the following exception:\n\nTraceback (most recent call last):\n  File "/work/main/.venv/lib/python3.11/site-packages/torch/_dynamo/symbolic_convert.py", line 1950, in run\n    while self.step():\n          ^^^^^^^^^^^\n  File "/work/main/.venv/lib/python3.11/site-packages/torch/_dynamo/symbolic_convert.py", line 1608, in step\n    self.exception_handler(e)\n  File "/work/main/.venv/lib/python3.11/site-packages/torch/_dynamo/symbolic_convert.py", line 2776, in exception_handler\n    bubble_exception_to_interpreter()\n  File "/work/main/.venv/lib/python3.11/site-packages/torch/_dynamo/symbolic_convert.py", line 2734, in bubble_exception_to_interpreter\n    unimplemented(\n  File "/work/main/.venv/lib/python3.11/site-packages/torch/_dynamo/exc.py", line 723, in unimplemented\n    raise Unsupported(\ntorch._dynamo.exc.Unsupported: Observed exception\n  Explanation: Dynamo found no exception handler at the top-level compiled function when encountering an exception. Exception will propagate outside the compiled region.\n  Hint: Your code may result in an error when running in eager. Please double check that your code doesn\'t contain a similar error when actually running eager/uncompiled. You can do this by removing the `torch.compile` call, or by using `torch.compiler.set_stance("force_eager")`. \n  Hint: It may be possible to write Dynamo tracing rules for this code. Please report an issue to PyTorch if you encounter this graph break often and it is causing performance issues.\n\n  Developer debug context: raised exception TypeError("\'NoneType\' object is not subscriptable")\n\n For more details about this graph break, please visit: https://meta-pytorch.github.io/compile-graph-break-site/gb/gb0088.html'


def test_an_exception_raised_while_traced_is_named_in_the_reason():
    from torchmend.profiler.classify import reason_for_break

    gb = parse_graph_break(OBSERVED_TEXT)
    assert gb is not None and gb.gb_id == "GB0088"
    assert gb.context == "raised exception TypeError(\"'NoneType' object is not subscriptable\")"
    assert "raised TypeError(\"'NoneType' object is not subscriptable\") while dynamo traced it" in reason_for_break(gb)
