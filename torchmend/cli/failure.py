"""The error document of the machine formats: a consumer of `--format json`, `sarif` or `github` gets a parseable
document on stdout when a command fails too, with the error and the exit code inside (docs/formats.md, "On an
error").

Three parts meet here. As click parses a command line, app._Command notes the `--format` it asks for (want()); the
one way to fail, app.fail(), and the other exits that say why (a stop signal, a full disk, a usage error of click's)
note what went wrong (record()); main.run, which every exit code passes, asks for the document (document()) and
writes it when the command failed before its report reached stdout. Imports nothing heavy at start-up."""

from __future__ import annotations

import json
from dataclasses import dataclass

from torchmend import __version__
from torchmend.cli.exitcodes import DESCRIPTIONS, ExitCode

SCHEMA = "torchmend.error/1"
# The formats a program reads; table and markdown are for people, who have the message on stderr.
MACHINE = ("json", "sarif", "github")
# Exits whose stdout cannot take a document (it failed, or its reader left) or that are no error at all.
NO_DOCUMENT = (ExitCode.OK, ExitCode.STDOUT_FAILED, ExitCode.BROKEN_PIPE)


@dataclass(frozen=True)
class Failure:
    """What a command said when it failed: plain text (no markup), as stderr showed it."""

    code: int
    message: str
    detail: str = ""


@dataclass
class _Asked:
    command: str = ""
    format: str = ""  # one of MACHINE, or "" (table, markdown, none given)
    failure: Failure | None = None


_asked = _Asked()


def want(command: str, format: object) -> None:
    """Note the command and the `--format` value its command line gives (an enum member, a string or None)."""
    value = str(getattr(format, "value", format) or "")
    _asked.command = command
    _asked.format = value if value in MACHINE else ""


def record(code: int, message: str, detail: str = "") -> None:
    """Note why the command is about to exit with `code` (the last one noted stands)."""
    _asked.failure = Failure(int(code), message, detail)


def document(code: int) -> str | None:
    """The error document for an exit with `code` in the format asked for, ending in a newline; None when no
    machine format was asked for or `code` is no error a document can carry."""
    if not _asked.format or code in NO_DOCUMENT:
        return None
    failure = _asked.failure if _asked.failure is not None and _asked.failure.code == code else None
    try:
        name = ExitCode(code).name
        meaning = DESCRIPTIONS[ExitCode(code)]
    except ValueError:  # a code of no torchmend meaning (a script's own, passed through): said as it is
        name, meaning = f"EXIT_{code}", f"exit status {code}"
    message = failure.message if failure is not None else meaning
    detail = failure.detail if failure is not None else ""
    if _asked.format == "json":
        return json.dumps(_json(code, name, meaning, message, detail), indent=2) + "\n"
    if _asked.format == "sarif":
        from torchmend.cli.formats.sarif import error_log

        return json.dumps(error_log(code, name, message, detail), indent=2) + "\n"
    from torchmend.cli.formats.github import error_command

    return error_command(code, name, message, detail) + "\n"


def _json(code: int, name: str, meaning: str, message: str, detail: str) -> dict[str, object]:
    return {
        "schema": SCHEMA,
        "torchmend_version": __version__,
        "command": _asked.command,
        "exit_code": code,
        "exit_name": name,
        "meaning": meaning,
        "error": {"message": message, "detail": detail},
    }
