"""Breaks inside a library fixed from the user's script (codemods/fixes/library_side.py): the end user's remedies.
Real libcst over real files: a library under a `site-packages` folder, the script in a project beside it."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from torchmend.analysis.source import Context
from torchmend.codemods.base import NoFix, Proposal
from torchmend.codemods.engine import Session
from torchmend.codemods.fixes.library_side import library_module
from torchmend.model import Finding, Kind, Severity, Where
from torchmend.sources import read_source

LIB = """
import functools
import logging
import numpy as np
import torch

logger = logging.getLogger(__name__)


def span(n):
    k = int(np.random.rand(1).item() * n) + 1
    return torch.from_numpy(np.random.choice(n, k, replace=False))


class Layer(torch.nn.Module):
    def forward(self, x):
        logger.warning("padded to %d", 4)
        logger.warning(f"shape {x.shape}")
        return x[span(x.shape[0])]

    @staticmethod
    def jitter():
        return np.random.rand()


def scale(x, lengths):
    assert lengths.max().item() <= x.shape[1]
    s = x.abs().max().item()
    flag = x.any().item()
    if flag:
        return x / s
    return x
"""

SCRIPT = "import torch\nimport pkg.sub.mod\n\nmodel = torch.compile(pkg.sub.mod.Layer())\n"


def _project(tmp_path: Path) -> tuple[Path, Path]:
    lib = tmp_path / "venv" / "lib" / "site-packages" / "pkg" / "sub" / "mod.py"
    lib.parent.mkdir(parents=True)
    lib.write_text(textwrap.dedent(LIB).lstrip("\n"))
    (tmp_path / "proj").mkdir()
    script = tmp_path / "proj" / "train.py"
    script.write_text(SCRIPT)
    return lib, script


def _finding(lib: Path, line: int, rule: str, gb_id: str | None = None) -> Finding:
    return Finding(
        rule=rule,
        gb_id=gb_id,
        kind=Kind.GRAPH_BREAK,
        title="t",
        file=str(lib),
        line=line,
        function="f",
        path=str(lib),
        where=Where.LIBRARY,
        reason="(test)",
        count=2,
        severity=Severity.FIX,
    )


def _propose(
    tmp_path: Path, line: int, rule: str, version: tuple[int, int], gb_id: str | None = None
) -> tuple[object, Session, Path]:
    lib, script = _project(tmp_path)
    session = Session(Context(str(tmp_path / "proj"), read_source, torch_version=version))
    (r,) = session.propose([_finding(lib, line, rule, gb_id)])
    return r, session, script


@pytest.mark.parametrize(
    ("path", "module"),
    [
        (
            "/v/lib/python3.11/site-packages/transformers/models/bert/modeling_bert.py",
            "transformers.models.bert.modeling_bert",
        ),
        ("/usr/lib/python3/dist-packages/pkg/__init__.py", "pkg"),
        ("/home/me/proj/model.py", None),  # not under site-packages: nothing the script can import by that path
        ("/v/site-packages/my-pkg/mod.py", None),  # not an importable name
    ],
)
def test_the_module_a_library_file_is_imported_as(path: str, module: str | None) -> None:
    assert library_module(path) == module


def test_a_host_random_helper_in_a_library_is_rebound_disabled_from_the_script(tmp_path: Path) -> None:
    p, session, script = _propose(tmp_path, 10, "TM110", (2, 13))
    assert isinstance(p, Proposal) and p.path == str(script) and p.safety == "unsafe"
    session.accept(p)
    assert "pkg.sub.mod.span = torch.compiler.disable(pkg.sub.mod.span)\nmodel = torch.compile" in session.text(
        str(script)
    )


def test_a_static_method_is_not_rebound(tmp_path: Path) -> None:
    r, _, _ = _propose(tmp_path, 22, "TM110", (2, 13))
    assert isinstance(r, NoFix) and "cannot re-bind" in r.reason


def test_a_library_logger_is_ignored_on_2_13_and_kept_from_2_14(tmp_path: Path) -> None:
    p, session, script = _propose(tmp_path, 16, "TM102", (2, 13))
    assert isinstance(p, Proposal) and p.safety == "unsafe"
    session.accept(p)
    assert "torch._dynamo.config.ignore_logging_functions.add(pkg.sub.mod.logger.warning)" in session.text(str(script))
    p, session, script = _propose(tmp_path / "b", 16, "TM102", (2, 14))
    assert isinstance(p, Proposal) and p.safety == "safe"
    session.accept(p)
    assert "reorderable_logging_functions.add(pkg.sub.mod.logger.warning)" in session.text(str(script))


def test_a_library_log_call_2_14_cannot_reorder_is_ignored(tmp_path: Path) -> None:
    # a `.shape` formatted into the message: 2.14 would trace the logging module, so the call is made a no-op
    p, session, script = _propose(tmp_path, 17, "TM102", (2, 14))
    assert isinstance(p, Proposal) and p.safety == "unsafe"
    session.accept(p)
    assert "ignore_logging_functions.add(pkg.sub.mod.logger.warning)" in session.text(str(script))


@pytest.mark.parametrize(("line", "rule"), [(26, "TM108"), (27, "TM104")])
def test_a_library_item_that_feeds_no_python_gets_capture_scalar_outputs(tmp_path: Path, line: int, rule: str) -> None:
    p, session, script = _propose(tmp_path, line, rule, (2, 13), gb_id="GB0124")
    assert isinstance(p, Proposal) and p.safety == "safe"
    session.accept(p)
    assert "torch._dynamo.config.capture_scalar_outputs = True\nmodel = torch.compile" in session.text(str(script))


def test_a_library_item_that_decides_an_if_is_left_with_the_reason(tmp_path: Path) -> None:
    r, _, _ = _propose(tmp_path, 28, "TM104", (2, 13), gb_id="GB0124")
    assert isinstance(r, NoFix) and "would only move the break" in r.reason and "`flag`" in r.reason
