"""The --format options as the commands take them: the new values are offered, and a combination that cannot work
is refused with a usage error before anything runs (no script is needed to see it). In-process (typer's runner):
nothing here runs a script."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from torchmend.cli.main import app


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "200", "NO_COLOR": "1"})
    return result.exit_code, " ".join(result.output.split())


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("fix", "train.py", "--format", "sarif"), "--format sarif goes with --check"),
        (("fix", "train.py", "--format", "github", "--yes"), "--format github goes with --check"),
        (("fix", "train.py", "--check", "--format", "json"), "'json' is not one of"),
        (("scan", "train.py", "--format", "xml"), "'xml' is not one of"),
    ],
)
def test_a_format_that_cannot_work_is_a_usage_error(args, message):
    code, output = run(*args)
    assert code == 2, output
    assert message in output


@pytest.mark.parametrize(
    ("command", "values"), [("scan", "table|json|sarif|github"), ("fix", "table|sarif|github"), ("verify", "github")]
)
def test_help_offers_the_formats(command, values):
    code, output = run(command, "--help")
    assert code == 0
    assert values in output.replace(" ", "")
