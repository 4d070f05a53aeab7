"""The pytest plugin without a compile: what loading it imports, and the limits as the marker and the fixture take
them (torchmend/plugin/verdict.py). The recorded runs are tests/e2e/test_pytest_plugin.py."""

from __future__ import annotations

import subprocess
import sys

import pytest

from torchmend.plugin.verdict import Limits, LimitsError


def test_defaults_and_given_values():
    assert Limits.from_marker({}) == Limits(graph_breaks=0, recompiles=0, max_graphs=None, ignore=())
    given = Limits.from_marker({"graph_breaks": None, "max_graphs": 2, "ignore": ["TM104", "TM2"]})
    assert given == Limits(graph_breaks=None, recompiles=0, max_graphs=2, ignore=("TM104", "TM2"))
    assert given.words() == "graph_breaks=None, recompiles=0, max_graphs=2, ignore=['TM104', 'TM2']"


@pytest.mark.parametrize(
    "kwargs, args, words",
    [
        ({"graph_break": 0}, (), "unknown argument graph_break"),
        ({"recompiles": -1}, (), "recompiles must be a whole number >= 0"),
        ({"max_graphs": True}, (), "max_graphs must be a whole number"),
        ({"ignore": "TM104"}, (), "ignore must be a list"),
        ({"ignore": None}, (), r"ignore must be a list of rule codes or prefixes \(\['TM104', 'TM2'\]\), not None$"),
        ({"ignore": 5}, (), r"ignore must be a list .*, not 5 \(int\)$"),
        ({"ignore": [""]}, (), "ignore must be a list"),  # an empty prefix would ignore every rule
        ({"ignore": {"TM101": 1}}, (), "ignore must be a list"),
        (
            {"graph_breaks": "1"},
            (),
            r"graph_breaks must be a whole number >= 0 or None \(not checked\), not '1' \(str\)",
        ),
        ({"ignore": ["TM7"]}, (), "TM7 is no rule code"),
        ({}, (0,), "keyword arguments only"),
    ],
)
def test_refused(kwargs, args, words):
    with pytest.raises(LimitsError, match=words):
        Limits.from_marker(kwargs, args)


@pytest.mark.parametrize("value", ["no", 0, 1, None])
def test_reset_takes_true_or_false_only(value):
    with pytest.raises(LimitsError, match=rf"reset must be True or False, not {value!r}"):
        Limits.flag("reset", value)
    assert Limits.flag("reset", False) is False


def test_loading_the_plugin_imports_no_torch():
    code = "import sys, torchmend.plugin; print(sorted({'torch', 'libcst', 'rich'} & set(sys.modules)))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"
