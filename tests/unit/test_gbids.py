"""Graph breaks classified by their registry id (torchmend/profiler/gbids.py), the texts only where the table does
not know the id; the table checked against the installed torch's registry (scripts/gb_ids.py --check).

fixtures/gb_ids/torch-<release>.json hold the breaks of fixtures/gb_ids/probe.py (one problem per function) as torch
2.11.0 (the H100 machine), 2.13.0, 2.14.1 and 2.15.0 reported them, recorded from real runs."""

from __future__ import annotations

import ast
import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

from torchmend.profiler import gbids
from torchmend.profiler.classify import classify_break, text_rule
from torchmend.profiler.events import read_events
from torchmend.profiler.hotspots import parse_version
from torchmend.profiler.traceparse import GraphBreak, parse_graph_break

PROBE = ROOT / "fixtures" / "gb_ids"
SCRIPT = ROOT / "scripts" / "gb_ids.py"
RECORDED_2_11 = ROOT / "fixtures" / "recorded" / "torch-2.11"

# probe function -> (id, rule) of each break it gave, per release. The rule is the same on every release; the ids
# are not (2.14 gave `disable()` called in compiled code ids of its own, 2.15 time functions).
_SAME = {
    "c_print": [("GB0059", "TM101")],
    "c_logger": [("GB0291", "TM102")],
    "c_warn": [("GB0007", "TM105")],
    "c_graph_break": [("GB0025", "TM199")],  # yours: informational (TM901) only inside a library
    "c_disabled": [("GB0098", "TM105")],
    "c_item": [("GB0124", "TM104")],
    "c_tolist": [("GB0109", "TM104")],
    "c_float": [("GB0124", "TM104")],
    "c_int": [("GB0124", "TM104")],
    "c_branch": [("GB0170", "TM103")],
    "c_nonzero": [("GB0036", "TM111")],
    "c_unique": [("GB0036", "TM111")],
}
# c_logging_module: logging.warning() breaks inside logging's own code (a dynamo limitation, not a rule).
_LOGGING_2_13 = {"logging": [("GB4841", "TM199")], "c_requires_grad_": [("GB8985", "TM109")]}
EXPECTED = {
    "2.11": {
        **_SAME,
        "logging": [("GB0156", "TM199")],
        "c_time": [("GB0007", "TM105")],
        "c_time_time": [("GB0007", "TM105")],
        "c_random": [("GB0007", "TM110")],
        "c_disable_call": [("GB0007", "TM105"), ("GB0098", "TM105")],
        "c_dynamo_disable_call": [("GB0007", "TM105"), ("GB0098", "TM105")],
        "c_requires_grad": [("GB0206", "TM109")],
        "c_requires_grad_": [("GB0125", "TM109")],
    },
    "2.13": {
        **_SAME,
        **_LOGGING_2_13,
        **_SAME,
        "c_time": [("GB0007", "TM105")],
        "c_time_time": [("GB0007", "TM105")],
        "c_random": [("GB0007", "TM110")],  # random.random(): a skipped builtin; traced from 2.14 on
        "c_disable_call": [("GB0007", "TM105"), ("GB0098", "TM105")],
        "c_dynamo_disable_call": [("GB0007", "TM105"), ("GB0098", "TM105")],
        "c_requires_grad": [("GB0206", "TM109")],
    },
    "2.14": {
        **_SAME,
        **_LOGGING_2_13,
        "c_time": [("GB0007", "TM105")],
        "c_time_time": [("GB0007", "TM105")],
        "c_disable_call": [("GB0377", "TM105"), ("GB0098", "TM105")],
        "c_dynamo_disable_call": [("GB0376", "TM105"), ("GB0098", "TM105")],
        "c_requires_grad": [("GB0206", "TM109")],
    },
    "2.15": {
        **_SAME,
        **_LOGGING_2_13,
        "c_time": [("GB9193", "TM105")],
        "c_time_time": [("GB9193", "TM105")],
        "c_disable_call": [("GB0377", "TM105"), ("GB0098", "TM105")],
        "c_dynamo_disable_call": [("GB0376", "TM105"), ("GB0098", "TM105")],
        "c_requires_grad": [("GB8985", "TM109")],  # the setattr is traced on 2.15; returning the tensor is not
    },
}


def _probe_functions() -> dict[int, str]:
    """probe.py line -> the function it is in."""
    tree = ast.parse((PROBE / "probe.py").read_text())
    return {
        line: node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef)
        for line in range(node.lineno, (node.end_lineno or node.lineno) + 1)
    }


def _probe_breaks(release: str) -> tuple[tuple[int, ...] | None, list[GraphBreak]]:
    data = json.loads((PROBE / f"torch-{release}.json").read_text())
    breaks = [parse_graph_break(text) for text in data["breaks"]]
    assert all(breaks)
    return parse_version(data["torch"]), [b for b in breaks if b is not None]


@pytest.mark.parametrize("release", sorted(EXPECTED))
def test_each_release_breaks_classify_by_id(release):
    version, breaks = _probe_breaks(release)
    functions = _probe_functions()
    source = (PROBE / "probe.py").read_text().splitlines()
    got: dict[str, list[tuple[str | None, str]]] = {}
    for gb in breaks:
        mine = gb.file.endswith("probe.py")
        name = functions[gb.line] if mine else Path(gb.file).parent.name  # logging/__init__.py
        rule = classify_break(gb, "project" if mine else "library", source[gb.line - 1] if mine else "", version)
        got.setdefault(name, []).append((gb.gb_id, rule))
    assert got == EXPECTED[release]


def test_a_time_call_and_a_disable_call_are_one_rule_on_every_release_where_the_texts_differ():
    """The texts alone said TM199 for 2.15's time ids and for GB0376: the ids keep them with their 2.13 rule."""
    by_release = {}
    for release in EXPECTED:
        version, breaks = _probe_breaks(release)
        by_release[release] = {
            (gb.gb_id, text_rule(gb, "project"), classify_break(gb, "project", "", version)) for gb in breaks
        }
    assert ("GB9193", "TM199", "TM105") in by_release["2.15"]
    assert ("GB0376", "TM199", "TM105") in by_release["2.14"]
    assert ("GB0007", "TM105", "TM105") in by_release["2.13"] and ("GB0007", "TM105", "TM105") in by_release["2.11"]


def _gb(gb_id: str | None, gb_type: str, explanation: str = "") -> GraphBreak:
    return GraphBreak("/p/model.py", 3, gb_type, explanation, gb_id, None)


@pytest.mark.parametrize(
    ("gb_id", "version", "expected"),
    [
        ("GB9999", (2, 15), "TM101"),  # an id no registry read has: the texts decide
        (None, (2, 15), "TM101"),  # no id (a record older than the registry)
        ("GB9193", (2, 13), "TM101"),  # 2.15's id on 2.13, whose registry lacks it: not taken on trust
        ("GB4841", (2, 11), "TM101"),  # 2.13's id on 2.11
        ("GB0059", (2, 13), "TM101"),
    ],
)
def test_an_id_the_table_does_not_know_falls_back_to_the_texts(gb_id, version, expected):
    gb = _gb(gb_id, "Failed to trace builtin operator", "Dynamo does not know how to trace builtin operator `print`")
    assert classify_break(gb, "project", "", version) == expected


def test_a_known_id_is_not_reclassified_by_its_texts():
    # A skipped call that mentions logging only in a path is still the id's; an id with no rule is TM199 whatever
    # its text says.
    gb = _gb("GB4841", "Unsupported python_type() call", "GetAttrVariable(LoggingLoggerVariable(), handlers)")
    assert text_rule(gb, "project") == "TM102"
    assert classify_break(gb, "project", "", (2, 13)) == "TM199"
    builtin = _gb(
        "GB0059", "Failed to trace builtin operator", "Dynamo does not know how to trace builtin operator `len`"
    )
    assert classify_break(builtin, "project", "", (2, 15)) == "TM199"


@pytest.mark.parametrize(
    ("gb_id", "gb_type", "explanation", "rule"),
    [
        (
            "GB0007",
            "Attempted to call function marked as skipped",
            "the builtin `<unknown module>.Random.uniform.`",
            "TM110",
        ),
        ("GB0007", "Attempted to call function marked as skipped", "the Python builtin `_warnings.warn`.", "TM105"),
        ("GB0297", "random.Random() with improper arguments", "random.Random() with > 1 arg", "TM110"),
        (
            "GB0098",
            "Skip calling `torch.compiler.disable()`d function",
            "Skip calling function `log_to_logging`",
            "TM102",
        ),
    ],
)
def test_an_id_that_covers_several_calls_reads_which_call(gb_id, gb_type, explanation, rule):
    assert classify_break(_gb(gb_id, gb_type, explanation), "project", "", (2, 13)) == rule


def test_graph_break_call_is_informational_only_in_a_library():
    gb = _gb("GB0025", "Call to `torch._dynamo.graph_break()`", "User-inserted graph break. Message: None")
    assert classify_break(gb, "library", "", (2, 13)) == "TM901"
    assert classify_break(gb, "project", "", (2, 13)) == "TM199"


def test_releases_around_the_ones_read():
    assert gbids.READ == ((2, 11), (2, 13), (2, 14), (2, 15))
    assert gbids.known_ids((2, 10)) == gbids.known_ids((2, 11, 0)) == gbids.REGISTRIES[(2, 11)]
    assert gbids.known_ids((2, 12, 1)) == gbids.REGISTRIES[(2, 11)]  # not read: 2.12's new ids go to the texts
    assert gbids.known_ids((2, 16, 0)) == gbids.known_ids(None) == gbids.REGISTRIES[(2, 15)]
    assert "GB0060" in gbids.known_ids((2, 13)) and "GB0060" not in gbids.known_ids((2, 14))
    assert "GB9193" not in gbids.known_ids((2, 14)) and "GB9193" in gbids.known_ids((2, 15))
    assert [len(gbids.REGISTRIES[r]) for r in gbids.READ] == [421, 517, 561, 592]
    assert gbids.REGISTRIES[(2, 11)] < gbids.REGISTRIES[(2, 13)]  # 2.13 removed none of 2.11's ids


def test_ids_compress_and_expand():
    ids = gbids.REGISTRIES[(2, 15)]
    assert gbids.expand(gbids.compress(ids)) == ids
    assert gbids.expand("GB0001-0003 GB0170") == {"GB0001", "GB0002", "GB0003", "GB0170"}
    with pytest.raises(ValueError):
        gbids.expand("GB12")


def _recorded_2_11_breaks() -> list[GraphBreak]:
    out = []
    for path in sorted(RECORDED_2_11.glob("*.jsonl")):
        for ev in read_events(path):
            gb = parse_graph_break(ev.get("text", "")) if ev.get("ev") == "graph_break" else None
            if gb is not None and gb.gb_id:
                out.append(gb)
    return out


def test_the_2_11_recordings_mean_by_id_what_they_said_in_words():
    """The scan fixtures' 2.11 recordings: every id is in 2.11's registry with the type the table read, and the id
    gives the rule the texts gave (tests/unit/test_recorded_runs.py checks the findings themselves)."""
    breaks = _recorded_2_11_breaks()
    assert len({gb.gb_id for gb in breaks}) >= 10
    for gb in breaks:
        assert gb.gb_id in gbids.known_ids((2, 11))
        entries = [e for e in gbids.ID_RULES if e.gb_id == gb.gb_id]
        assert all(e.gb_type == gb.gb_type and e.since == (2, 11) for e in entries), gb.gb_id
        for where in ("project", "library"):
            assert classify_break(gb, where, "", (2, 11)) == text_rule(gb, where), (gb.gb_id, where)


def test_the_table_matches_the_installed_torch_registry():
    proc = subprocess.run([sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("ok: torch ")


def _installed_torch() -> Path:
    spec = importlib.util.find_spec("torch")  # found without importing torch
    assert spec is not None and spec.submodule_search_locations
    return Path(next(iter(spec.submodule_search_locations)))


def _registry_copy(tmp_path: Path, version: str | None, edit) -> Path:
    """The installed torch's registry, edited, beside a version.py of `version` (None: the installed one's)."""
    torch_dir = _installed_torch()
    registry = json.loads((torch_dir / "_dynamo" / "graph_break_registry.json").read_text())
    if version is None:
        version = re.search(r"__version__ = '([^']+)'", (torch_dir / "version.py").read_text())[1]
    edit(registry)
    (tmp_path / "torch" / "_dynamo").mkdir(parents=True)
    (tmp_path / "torch" / "version.py").write_text(f"__version__ = '{version}'\n")
    path = tmp_path / "torch" / "_dynamo" / "graph_break_registry.json"
    path.write_text(json.dumps(registry))
    return path


def test_the_check_names_what_a_registry_changed(tmp_path):
    def edit(registry):
        registry["GB0124"][0]["Gb_type"] = "Tensor.item() renamed"  # a type the table did not read
        del registry["GB0170"]  # an id of the table gone
        registry["GB0999"] = [{"Gb_type": "print()", "Explanation": "builtin operator `print`", "Hints": []}]

    path = _registry_copy(tmp_path, None, edit)
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--check", "--registry", str(path)], capture_output=True, text=True
    )
    assert proc.returncode == 1
    out = proc.stdout
    assert "GB0124 is ['Tensor.item() renamed'], not 'Unsupported Tensor.item()" in out
    assert "GB0170 (TM103) is not in the registry" in out
    assert "GB0999 ('print()') reads as TM101 and has no entry" in out
    assert re.search(r"missing GB0999, not in the registry GB0170", out)


def test_a_newer_release_with_new_ids_asks_for_the_table_to_be_read_again(tmp_path):
    def edit(registry):
        registry["GB9990"] = [{"Gb_type": "something new", "Explanation": "", "Hints": []}]

    path = _registry_copy(tmp_path, "2.99.0", edit)
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--check", "--registry", str(path)], capture_output=True, text=True
    )
    assert proc.returncode == 1 and "newer than the table" in proc.stdout
