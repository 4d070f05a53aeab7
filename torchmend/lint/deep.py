"""Deeply nested code, told apart from what Python refuses. A 600-term `y = x + x + ... + x` is a module Python
runs, but libcst and the analysis walk it with a few frames per term: past Python's default recursion limit (1000)
and, in C, past the main thread's stack. So lint analyses in a thread of its own with a large stack and a raised
limit (`deeply`); what Python itself refuses (a 100,000-term sum) is told by Python's parser at its usual limit
(`python_refuses`), and is a TM904 finding, never analysed: libcst would take hours on it."""

from __future__ import annotations

import ast
import sys
import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

STACK_BYTES = 512 * 2**20  # reserved, not used: the pages are touched only as deep as the code goes
LIMIT = 200_000  # frames; the stack above holds them (a frame of libcst's visitors takes well under 2 KiB of C)
PYTHON_LIMIT = 1000  # Python's default: what `python script.py` parses with


def deeply(fn: Callable[..., T], *args: object) -> T:
    """`fn(*args)` in a thread with a large stack and a raised recursion limit; its result, or its exception."""
    done: list[T] = []
    failed: list[BaseException] = []

    def work() -> None:
        try:
            done.append(fn(*args))
        except BaseException as e:  # handed to the caller's thread, which raises it
            failed.append(e)

    old_stack = threading.stack_size(STACK_BYTES)
    old_limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old_limit, LIMIT))
    try:
        thread = threading.Thread(target=work, name="torchmend-lint", daemon=True)
        thread.start()
        thread.join()
    finally:
        threading.stack_size(old_stack)
        sys.setrecursionlimit(old_limit)
    if failed:
        raise failed[0]
    return done[0]


def too_deep(error: BaseException) -> bool:
    """The error is, or was raised while handling, a RecursionError or MemoryError (libcst's metadata turns a
    RecursionError into a KeyError in its cleanup)."""
    seen: set[int] = set()
    e: BaseException | None = error
    while e is not None and id(e) not in seen:
        if isinstance(e, (RecursionError, MemoryError)):
            return True
        seen.add(id(e))
        e = e.__cause__ or e.__context__
    return False


def python_refuses(text: str | bytes) -> tuple[int, str] | None:
    """(line, message) where Python's own parser, at its default recursion limit, refuses this source; None when
    it parses. Called where the limit may be raised (in `deeply`): it is lowered for the parse and put back."""
    old = sys.getrecursionlimit()
    try:
        sys.setrecursionlimit(min(old, PYTHON_LIMIT))
    except RecursionError:  # this thread is deeper than that already: parse at the limit it has
        pass
    try:
        ast.parse(text)
    except SyntaxError as e:
        return (e.lineno or 1, e.msg)
    except ValueError as e:  # null bytes
        return (1, str(e))
    except (RecursionError, MemoryError):
        return (1, NESTED)
    finally:
        sys.setrecursionlimit(old)
    return None


NESTED = "it is nested too deeply for Python's parser (maximum recursion depth exceeded)"
