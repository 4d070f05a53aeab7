"""The torch APIs codemods write are spelled as the run's torch release has them (torchmend/analysis/torch_api.py),
and every spelling resolves on the installed torch (scripts/torch_api.py --check)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from conftest import ROOT

from torchmend import pipeline
from torchmend.analysis import torch_api
from torchmend.analysis.torch_api import Spelling, spelling
from torchmend.codemods.examples import fix_text

SCRIPT = ROOT / "scripts" / "torch_api.py"
PRINT = (ROOT / "fixtures" / "codemods" / "TM101" / "forward_print.in.py").read_text()
NONZERO = textwrap.dedent(
    """
    import torch

    def route(x, w):
        hit = (x > 0).nonzero()  # tm: TM111 gb_id=GB0036
        return x[hit[:, 0]] * w

    fast = torch.compile(route)
    """
).lstrip()

# An API that moved (torch.compiler.nonstrict_trace is public from 2.14, torch._dynamo's before; no codemod writes it)
MOVED = (
    Spelling("compiler.nonstrict_trace", "_dynamo.nonstrict_trace", (2, 11), until=(2, 14)),
    Spelling("compiler.nonstrict_trace", "compiler.nonstrict_trace", (2, 14)),
)


@pytest.mark.parametrize(
    ("version", "expected"),
    [
        ((2, 11, 0), "_dynamo.nonstrict_trace"),
        ((2, 13, 0), "_dynamo.nonstrict_trace"),
        ((2, 14, 1), "compiler.nonstrict_trace"),
        ((2, 15, 0), "compiler.nonstrict_trace"),
        ((2, 9), "_dynamo.nonstrict_trace"),  # before every row read: the oldest
        ((2, 30), "compiler.nonstrict_trace"),
        (None, "compiler.nonstrict_trace"),  # release unknown: the newest
    ],
)
def test_a_moved_api_is_spelled_as_the_release_has_it(version, expected):
    assert spelling("compiler.nonstrict_trace", version, MOVED) == expected


def test_an_api_without_rows_is_written_as_named():
    assert spelling("where", (2, 13)) == "where"


def test_what_the_codemods_write_is_spelled_alike_on_every_release_read():
    """Read from the wheels (2.11.0, 2.13.0, 2.14.1, 2.15.0): nothing torchmend writes moved."""
    for row in torch_api.SPELLINGS:
        assert {spelling(row.api, v) for v in [(2, 11), (2, 13), (2, 14), (2, 15)]} == {row.api}


def test_the_fixes_write_the_spelling_of_the_run_release(monkeypatch):
    """The release travels from the Context into the code a fix writes: with a table where is_compiling and a config
    switch moved, a 2.11 run's fix is written the old way and a 2.15 run's the new way."""
    monkeypatch.setattr(
        torch_api,
        "SPELLINGS",
        (
            *torch_api.SPELLINGS,
            Spelling("compiler.is_compiling", "_dynamo.is_compiling", (2, 11), until=(2, 13)),
            Spelling(
                "_dynamo.config.capture_dynamic_output_shape_ops",
                "_dynamo.config.old_capture_dynamic_output_shape_ops",
                (2, 11),
                until=(2, 13),
            ),
        ),
    )
    old, _ = fix_text(PRINT, torch_version=(2, 11, 0))
    new, _ = fix_text(PRINT, torch_version=(2, 15, 0))
    assert "if not torch._dynamo.is_compiling():" in old
    assert "if not torch.compiler.is_compiling():" in new
    old, _ = fix_text(NONZERO, torch_version=(2, 11, 0))
    new, _ = fix_text(NONZERO, torch_version=(2, 15, 0))
    assert "torch._dynamo.config.old_capture_dynamic_output_shape_ops = True\n" in old
    assert "torch._dynamo.config.capture_dynamic_output_shape_ops = True\n" in new


def test_propose_takes_the_run_release(tmp_path):
    fixes = pipeline.propose([], tmp_path, torch_version="2.11.0+cu130")
    assert fixes.session.ctx.torch_version == (2, 11, 0)
    assert pipeline.propose([], tmp_path).session.ctx.torch_version is None


def test_installed_torch_is_read_without_importing_it():
    version = pipeline.installed_torch()
    assert version is not None and version.startswith("2.")
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from torchmend import pipeline; pipeline.installed_torch(); print('torch' in sys.modules)",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )
    assert proc.stdout.strip() == "False"


def test_every_spelling_resolves_on_the_installed_torch():
    proc = subprocess.run([sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("ok: torch ")
