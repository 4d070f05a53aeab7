"""The --format options as the commands take them: the new values are offered, and a combination that cannot work
is refused with a usage error before anything runs (no script is needed to see it)."""

from __future__ import annotations

import pytest
from conftest import torchmend


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("fix", "train.py", "--format", "sarif"), "--format sarif goes with --check"),
        (("fix", "train.py", "--format", "github", "--yes"), "--format github goes with --check"),
        (("fix", "train.py", "--check", "--format", "json"), "'json' is not one of"),
        (("scan", "train.py", "--format", "xml"), "'xml' is not one of"),
    ],
)
def test_a_format_that_cannot_work_is_a_usage_error(tmp_path, args, message):
    r = torchmend(*args, cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    assert message in " ".join(r.stderr.split())


@pytest.mark.parametrize(
    ("command", "values"),
    [("scan", "table|json|sarif|github"), ("fix", "table|sarif|github"), ("verify", "github")],
)
def test_help_offers_the_formats(command, values):
    r = torchmend(command, "--help")
    assert r.returncode == 0
    assert values in r.stdout.replace(" ", "")
