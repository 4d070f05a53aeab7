"""What the scalar-argument fix (TM202) says: why a None guard is no changing number, the advice to keep a number,
the kind of number a guard compares with, and a list of function names."""

from __future__ import annotations

import re

_NUMBER_IN_GUARD = re.compile(r"==\s*-?(?P<num>[0-9][0-9_]*(?P<frac>\.[0-9]*)?(?P<exp>[eE][-+]?[0-9]+)?)\s*$")


KEEP_NUMBER = (
    "keep it a Python number: after one recompile dynamo treats a changing float or int as symbolic "
    "(automatic dynamic); if a branch depends on it, decide it outside the compiled function and pass "
    "the outcome"
)


def number_kind(guard: str | None) -> str:
    found = _NUMBER_IN_GUARD.search(guard or "")
    if not found:
        return ""
    return "float" if found["frac"] is not None or found["exp"] is not None else "int"


NONE_WHY = (
    "is None on some calls and a value on others (the guard checks `is None`): not a changing number, and "
    "a tensor cannot stand in for None"
)


NONE_ADVICE = (
    "pass the same kind of value on every call (e.g. a tensor of zeros where None means nothing to add), or "
    "accept one compile per kind: the recompiles stop once both are cached"
)


def call_names(calls: list[str]) -> str:
    return ", ".join(f"{c}()" for c in dict.fromkeys(calls))
