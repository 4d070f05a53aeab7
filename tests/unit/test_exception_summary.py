"""The one line a failed run is summed up by: the exception, never PyTorch's hints after it."""

from __future__ import annotations

from torchmend.profiler.failures import exception_summary

HINT = (
    "Set TORCHDYNAMO_VERBOSE=1 for the internal stack trace (please do this especially if you're reporting a bug "
    'to PyTorch). For even more developer context, set TORCH_LOGS="+dynamo"'
)
USER = '\nfrom user code:\n   File "/p/model.py", line 7, in forward\n    assert x.sum() > 0\n\n'


def test_an_empty_message_names_the_users_line() -> None:
    said = exception_summary(f"AssertionError: \n{USER}{HINT}\n")
    assert said == "AssertionError (no message) at /p/model.py:7 in forward: assert x.sum() > 0"


def test_an_empty_message_with_no_user_code_takes_the_traceback() -> None:
    tb = 'Traceback (most recent call last):\n  File "/p/train.py", line 12, in <module>\n    step()\n'
    assert exception_summary(f"ValueError: \n\n{HINT}", traceback=tb) == (
        "ValueError (no message) at /p/train.py:12 in <module>: step()"
    )


def test_the_hint_is_never_the_summary_of_an_output() -> None:
    out = "step 0 loss 1.0\nRuntimeError: boom\n\n" + HINT + "\n"
    assert exception_summary("", out) == "RuntimeError: boom"
    assert exception_summary("", HINT + "\n") == "(no output)"


def test_a_message_kept_whole_up_to_the_appendix() -> None:
    assert exception_summary(f"KeyError: 'w'\n{USER}{HINT}") == "KeyError: 'w'"
