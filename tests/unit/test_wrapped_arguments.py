"""Recompiles that reach the compiled function through a wrapper's `*args` / `**kwargs`: the guard's `args[i]` /
`kwargs['k']` bound to the call site's argument and the wrapped def's parameter (analysis/binding.py,
calls.py; the TM202 fix's wrapped.py), and a precise reason where that cannot be done."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import libcst as cst
import pytest

from torchmend.analysis.binding import bind, packed_argument, packed_key
from torchmend.analysis.calls import forwarding_call
from torchmend.analysis.source import Context
from torchmend.codemods.base import NoFix, Proposal
from torchmend.codemods.engine import Session
from torchmend.codemods.examples import findings_from_markers
from torchmend.values import Root

PAIRS = Path(__file__).resolve().parents[2] / "fixtures" / "codemods" / "TM202"
ROOT = "/tm-example"


def _call(code: str) -> cst.Call:
    node = cst.parse_expression(code)
    assert isinstance(node, cst.Call)
    return node


def _def(code: str) -> cst.FunctionDef:
    node = cst.parse_statement(code)
    assert isinstance(node, cst.FunctionDef)
    return node


WRAPPER = _def("def wrapper(self, *args, **kwargs):\n    return func(self, *args, **kwargs)\n")


@pytest.mark.parametrize(
    "variable, expected",
    [("args[2]", ("args", 2)), ("kwargs['scale']", ("kwargs", "scale")), ('kw["t"]', ("kw", "t")), ("x", None)],
)
def test_packed_key(variable: str, expected: object) -> None:
    assert packed_key(variable) == expected


def test_a_wrappers_args_and_kwargs_bind_to_the_calls_arguments() -> None:
    b = bind(_call("layer(h, mask, bias, enc, past=p, scale=0.5)"), WRAPPER, bound=True)
    arg, _ = packed_argument(b, "args", 2)
    assert arg is not None and cst.Module([]).code_for_node(arg.value) == "bias"
    arg, _ = packed_argument(b, "kwargs", "scale")
    assert arg is not None and cst.Module([]).code_for_node(arg.value) == "0.5"


@pytest.mark.parametrize(
    "call, star, key, why",
    [
        ("layer(*inputs, bias)", "args", 1, "the call spreads `*inputs` before it, so its position is not known"),
        ("layer(h, **extra)", "kwargs", "scale", "`scale` comes through the call's `**extra`"),
        ("layer(h)", "args", 2, "the call passes 1 argument into *args, not 3"),
        ("layer(h)", "kwargs", "scale", "the call does not pass `scale` by name"),
        ("layer(h)", "rest", 0, "wrapper() has no `*rest` parameter"),
    ],
)
def test_why_a_wrapper_argument_cannot_be_bound(call: str, star: str, key: object, why: str) -> None:
    arg, said = packed_argument(bind(_call(call), WRAPPER, bound=True), star, key)  # type: ignore[arg-type]
    assert arg is None and said.startswith(why)


def test_forwarding_call_is_the_call_that_passes_args_and_kwargs_on() -> None:
    fn = _def("def w(self, *args, **kwargs):\n    log(args)\n    return f(self, *args, **kwargs)\n")
    found = forwarding_call(fn)
    assert found is not None and cst.Module([]).code_for_node(found) == "f(self, *args, **kwargs)"
    assert forwarding_call(_def("def w(self, *args, **kwargs):\n    return f(self, *args)\n")) is None
    assert forwarding_call(_def("def w(self, x):\n    return f(self, x)\n")) is None


def _propose(case: str, **change: str) -> list[object]:
    path = f"{ROOT}/{case}.in.py"
    text = (PAIRS / f"{case}.in.py").read_text()
    ctx = Context(ROOT, lambda p: text if p == path else Path(p).read_text())
    findings = [replace(f, **change) for f in findings_from_markers(path, text, Root(Path(ROOT)))]
    return Session(ctx).propose(findings)


def test_the_fix_lands_at_the_entry_through_a_decorator() -> None:
    (result,) = _propose("decorator_wrapper_keyword")
    assert isinstance(result, Proposal), result
    assert "pass `temperature` to compiled()" in result.why
    assert "forward() now receives a tensor for `temperature`" in (result.note or "")


def test_a_checkpointing_base_class_wrapper_is_seen_through_a_module_list() -> None:
    (result,) = _propose("checkpointing_wrapper")
    assert isinstance(result, Proposal), result
    assert "pass `scale` to layer() as a 0-d tensor on `hidden`'s device" in result.why
    assert "forward() now receives a tensor for `scale`" in (result.note or "")


def test_a_module_list_of_two_classes_says_why_not() -> None:
    (result,) = _propose("noop_checkpointing_mixed_layers")
    assert isinstance(result, NoFix)
    assert result.reason.startswith(
        "`args[2]` is `scale` at line 48, passed on by forward_with_checkpointing() to a function torchmend cannot "
        "find from `layer`"
    ), result.reason


def test_a_none_guard_through_a_wrapper_names_the_argument_and_why() -> None:
    (result,) = _propose("noop_wrapper_none_guard", guard="args[2] is None")
    assert isinstance(result, NoFix)
    assert result.reason.startswith(
        "`args[2]` is `bias` at line 36, passed on by forward_with_checkpointing() to forward()'s `position_bias`; "
        "it is None on some calls and a value on others"
    ), result.reason


def test_a_none_guard_on_a_plain_parameter_is_not_a_number() -> None:
    (result,) = _propose(
        "noop_wrapper_none_guard",
        guard="expected type of 'bias' to be a tensor type, ' but found <class 'NoneType'>",
        variable="expected",
    )
    assert isinstance(result, NoFix) and result.reason.startswith("`bias` is None on some calls"), result.reason


@pytest.mark.parametrize("rule", ["TM202", "TM206"])
def test_a_guard_on_the_whole_args_tuple_says_why_and_does_not_recurse(rule: str) -> None:
    """`len(args) == 2` through a wrapper that calls a local alias of the wrapped forward: TM202 and TM206 each
    took `args` for the other's (a closure variable / a parameter) and handed it back until the stack ran out."""
    (result,) = _propose("noop_wrapper_args_length", rule=rule)
    assert isinstance(result, NoFix), result
    assert "`args` is the *args of call_forward()" in result.reason, result.reason
    assert "not on a number" in result.reason


def test_a_none_guard_through_a_wrapper_torchmend_cannot_see_is_still_not_a_number() -> None:
    """`args[2] is None` where the wrapper whose *args holds it is a library's (an end user's run): the reason is
    the None, not a missing `*args` parameter."""
    path = f"{ROOT}/layer.py"
    text = (
        "def forward(self, h, position_bias=None):\n"
        "    if position_bias is None:  # tm: TM202 variable=args[2]\n"
        "        position_bias = h\n"
        "    return h + position_bias\n"
    )
    findings = [replace(f, guard="args[2] is None") for f in findings_from_markers(path, text, Root(Path(ROOT)))]
    (result,) = Session(Context(ROOT, lambda p: text)).propose(findings)
    assert isinstance(result, NoFix), result
    assert result.reason.startswith("`args[2]` (an argument a wrapper's *args passes on) is None on some calls")
