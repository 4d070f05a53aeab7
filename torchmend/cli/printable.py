"""File names as output can carry them. A name that is not valid UTF-8 (`bad\\xff.py`) reaches Python as a str with
a lone surrogate (`\\udcff`, os.fsdecode's surrogateescape), as does every non-ASCII name under `LC_ALL=C` without
UTF-8 mode; writing one to a UTF-8 stream, a JSON document or a URI fails with UnicodeEncodeError. Shown here: the
name's bytes read as UTF-8, each byte that is not shown as `\\xNN`, so `модель.py` reads as itself everywhere and
`bad\\xff.py` as those ten characters. The reading is for people and parsers; the files are still found by `path`,
which keeps the real name."""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

T = TypeVar("T")


def printable(text: str) -> str:
    """`text` with no lone surrogate: the bytes a file name's surrogates stand for, read as UTF-8 (`\\xNN` where
    they are not)."""
    if text.isascii() or not any("\ud800" <= ch <= "\udfff" for ch in text):
        return text
    try:
        data = text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a surrogate no file name holds (\ud800 from a JSON escape): as its code point
        data = text.encode("utf-8", "backslashreplace")
    return data.decode("utf-8", "backslashreplace")


def printable_data(value: T) -> T:
    """A JSON-ready value (dicts, lists, strings) with every string printable(), keys included."""
    if isinstance(value, str):
        return printable(value)  # type: ignore[return-value]
    if isinstance(value, dict):
        return {printable_data(k): printable_data(v) for k, v in value.items()}  # type: ignore[return-value]
    if isinstance(value, (list, tuple)):
        return type(value)(printable_data(v) for v in value)
    return value


def printable_record(record: T) -> T:
    """A frozen dataclass (a Finding and its Locations) with every text made printable but `path`, which still
    names the file (a report reads its lines from there)."""
    if not dataclasses.is_dataclass(record) or isinstance(record, type):
        return record
    changes: dict[str, Any] = {}
    for field in dataclasses.fields(record):
        value = getattr(record, field.name)
        if field.name == "path":
            continue
        new = printable(value) if isinstance(value, str) else printable_record(value)
        if new is not value:
            changes[field.name] = new
    return dataclasses.replace(record, **changes) if changes else record
