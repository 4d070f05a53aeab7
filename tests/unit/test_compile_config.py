"""Config lines beside the user's compile call (codemods/fixes/compile_config, analysis/entry.py) and loggers told
by how they are bound (analysis/loggers.py): real libcst over real files in a temporary project."""

from __future__ import annotations

import textwrap
from pathlib import Path

import libcst as cst

from torchmend.analysis.entry import compile_site_for
from torchmend.analysis.loggers import logging_call
from torchmend.analysis.source import Context, SourceFile
from torchmend.codemods.base import NoFix, Proposal
from torchmend.codemods.engine import Session
from torchmend.model import Finding, Kind, Severity, Where
from torchmend.sources import read_source


def _write(root: Path, rel: str, code: str) -> Path:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(textwrap.dedent(code).lstrip("\n"))
    return p


def _finding(path: Path, line: int, rule: str, root: Path, **kw) -> Finding:
    where = kw.pop("where", Where.PROJECT)
    return Finding(
        rule=rule,
        kind=Kind.GRAPH_BREAK,
        title="t",
        file=str(path.relative_to(root)) if where == Where.PROJECT else str(path),
        line=line,
        function="f",
        path=str(path),
        where=where,
        reason=kw.pop("reason", "(test)"),
        count=2,
        severity=Severity.FIX,
        **kw,
    )


MODEL = """
import torch
from torch import nn

class Router(nn.Module):
    def forward(self, x):
        hit = (x > 0).nonzero()
        return x[hit[:, 0]]
"""

SCRIPT = """
import torch
from model import Router

model = Router()

compiled = torch.compile(model)
compiled(torch.randn(4, 3))
"""


def test_the_config_line_goes_before_the_scripts_compile_call_not_a_vendored_packages(tmp_path: Path) -> None:
    model = _write(tmp_path, "model.py", MODEL)
    script = _write(tmp_path, "train.py", SCRIPT)
    # a vendored library compiles too: it is a package, so its compile call is not the user's
    _write(tmp_path, "vendor/__init__.py", "")
    _write(tmp_path, "vendor/fast.py", "import torch\nf = torch.compile(lambda x: x)\n")
    session = Session(Context(str(tmp_path), read_source))
    (result,) = session.propose([_finding(model, 6, "TM111", tmp_path, gb_id="GB0036")])
    assert isinstance(result, Proposal) and result.path == str(script)
    session.accept(result)
    assert session.text(str(script)).splitlines()[4:8] == [
        "",
        "torch._dynamo.config.capture_dynamic_output_shape_ops = True",
        "compiled = torch.compile(model)",
        "compiled(torch.randn(4, 3))",
    ]


def test_several_findings_asking_for_one_switch_make_one_line(tmp_path: Path) -> None:
    model = _write(
        tmp_path, "model.py", MODEL.replace("return x[hit[:, 0]]", "cols = x.nonzero()\n        return cols")
    )
    script = _write(tmp_path, "train.py", SCRIPT)
    session = Session(Context(str(tmp_path), read_source))
    results = session.propose(
        [_finding(model, 6, "TM111", tmp_path, gb_id="GB0036"), _finding(model, 7, "TM111", tmp_path, gb_id="GB0036")]
    )
    (p,) = results
    assert isinstance(p, Proposal) and len(p.findings) == 2
    session.accept(p)
    assert session.text(str(script)).count("capture_dynamic_output_shape_ops") == 1


def test_two_scripts_that_compile_are_not_guessed_between(tmp_path: Path) -> None:
    model = _write(tmp_path, "model.py", MODEL)
    _write(tmp_path, "train.py", SCRIPT)
    _write(tmp_path, "bench.py", SCRIPT)
    src = Context(str(tmp_path), read_source)
    why = compile_site_for(_finding(model, 6, "TM111", tmp_path, gb_id="GB0036"), src)
    assert isinstance(why, str) and "bench.py" in why and "train.py" in why


def test_an_item_that_decides_an_if_is_refused_with_why(tmp_path: Path) -> None:
    model = _write(
        tmp_path,
        "model.py",
        """
        import torch

        def encode(mask, x):
            is_global = (mask > 0).flatten().any().item()
            out = () if (x.requires_grad and is_global) else None
            return x, out
        """,
    )
    _write(tmp_path, "train.py", "import torch\nfrom model import encode\nf = torch.compile(encode)\n")
    session = Session(Context(str(tmp_path), read_source))
    (r,) = session.propose(
        [_finding(model, 4, "TM111", tmp_path, gb_id="GB0033", reason="aten._local_scalar_dense.default")]
    )
    assert isinstance(r, NoFix) and "would only move the break" in r.reason and "line 5" in r.reason


def test_a_print_inside_a_library_is_reordered_from_the_users_script(tmp_path: Path) -> None:
    lib = _write(tmp_path / "site-packages", "lib.py", "def f(x):\n    print('x', x)\n    return x\n")
    project = tmp_path / "proj"
    script = _write(project, "train.py", "import torch\nimport lib\nf = torch.compile(lib.f)\n")
    session = Session(Context(str(project), read_source))
    (p,) = session.propose([_finding(lib, 2, "TM101", tmp_path, where=Where.LIBRARY)])
    assert isinstance(p, Proposal) and p.path == str(script) and p.safety == "safe"
    session.accept(p)
    assert "torch._dynamo.config.reorderable_logging_functions.add(print)\nf = torch.compile" in session.text(
        str(script)
    )


def test_a_library_print_torch_cannot_reorder_keeps_the_advice(tmp_path: Path) -> None:
    lib = _write(tmp_path / "site-packages", "lib.py", "def f(x):\n    print('x', x.shape)\n    return x\n")
    project = tmp_path / "proj"
    _write(project, "train.py", "import torch\nimport lib\nf = torch.compile(lib.f)\n")
    session = Session(Context(str(project), read_source))
    (r,) = session.propose([_finding(lib, 2, "TM101", tmp_path, where=Where.LIBRARY)])
    assert isinstance(r, NoFix) and "inside a library" in r.reason


def _calls(code: str) -> dict[str, bool]:
    src = SourceFile("/x/m.py", textwrap.dedent(code).lstrip("\n"))
    return {src.code(c.func): logging_call(src, c) for c in src.nodes_in(src.module, cst.Call) if c.args}


def test_loggers_are_told_by_how_they_are_bound() -> None:
    seen = _calls(
        """
        import logging
        from ...utils import logging as hf_logging
        from accelerate.logging import get_logger

        logger = hf_logging.get_logger(__name__)
        log = logging.getLogger("x")
        acc = get_logger(__name__)
        notes = []

        class Block:
            def __init__(self):
                self.logger = logging.getLogger("block")
                self.history = []

            def forward(self, x):
                logger.warning_once("a")
                logger.warning_advice("b")
                log.exception("c")
                acc.info_once("d")
                self.logger.log(10, "e")
                logging.warning("f")
                notes.append("g")
                self.history.append("h")
                return x
        """
    )
    assert seen["logger.warning_once"] and seen["logger.warning_advice"] and seen["log.exception"]
    assert seen["acc.info_once"] and seen["self.logger.log"] and seen["logging.warning"]
    assert not seen["notes.append"] and not seen["self.history.append"]
    assert not seen["hf_logging.get_logger"]


def test_a_number_that_reaches_int_through_arithmetic_in_a_closure_is_refused(tmp_path: Path) -> None:
    model = _write(
        tmp_path,
        "model.py",
        """
        import numpy as np

        def spans(lengths, p):
            eps = np.random.rand(1).item()

            def count(n):
                return int(p * n + eps)

            return [count(n) for n in lengths]
        """,
    )
    _write(tmp_path, "train.py", "import torch\nfrom model import spans\nf = torch.compile(spans)\n")
    session = Session(Context(str(tmp_path), read_source))
    (r,) = session.propose(
        [_finding(model, 4, "TM111", tmp_path, gb_id="GB0033", reason="aten._local_scalar_dense.default")]
    )
    assert isinstance(r, NoFix) and "passed to int() at line 7" in r.reason


def test_a_function_that_now_compiles_is_not_refused_for_its_extra_graph() -> None:
    """Wav2Vec2's masking function, given up on by aot_eager (aten.nonzero), compiles once the switch is on: one
    graph more, no more breaks, one finding fewer. That is the fix working, not a regression."""
    from torchmend.model import Summary
    from torchmend.profiler.runner import RunOutcome
    from torchmend.verify.compare import NEUTRAL, judge
    from torchmend.verify.runs import ArmRun

    def run(arm: str, graphs: int, findings: int) -> ArmRun:
        summary = Summary(
            frames_compiled=19,
            compiles=graphs,
            graphs=graphs,
            graph_breaks=11,
            recompiles=0,
            recompile_limit_hits=0,
            compile_seconds=1.0,
            steps=3,
            ended_by="steps",
            wall_seconds=5.0,
            torch_version="2.13",
        )
        end = {"ev": "end", "reason": "steps", "losses": [1.0, 0.9, 0.8], "params": None}
        fs = [_finding(Path("/p/m.py"), i + 1, "TM199", Path("/p")) for i in range(findings)]
        return ArmRun(arm, 0, fs, summary, RunOutcome([], "steps", 0, 5.0, "", end))

    v = judge([run("before", 6, 6)], [run("after", 7, 5)])
    assert v.verdict == NEUTRAL, v.reasons


TWO_TESTS = """
import pytest
import torch
from model import Router


@pytest.mark.torchmend
def test_first():
    torch.compile(Router(), backend="eager")(torch.randn(4))


@pytest.mark.torchmend
def test_second():
    x = torch.randn(4)
    torch.compile(Router(), backend="eager")(x)
"""


def test_the_compile_is_the_one_in_the_function_the_run_came_from(tmp_path: Path) -> None:
    """A test file compiles once per test: a setting goes before the compile of the test that ran (the plugin's
    entry, the test function from its decorator line; or a recompile's call site), not the file's first."""
    from torchmend.model import Location

    model = _write(tmp_path, "model.py", MODEL)
    tests = _write(tmp_path, "test_models.py", TWO_TESTS)
    ctx = Context(str(tmp_path), read_source)

    def site_line(**where: Location) -> int:
        site = compile_site_for(_finding(model, 6, "TM111", tmp_path, **where), ctx)
        assert not isinstance(site, str), site
        return site.src.line_of(site.statement)

    def at(line: int, function: str) -> Location:
        return Location(file="test_models.py", line=line, function=function, path=str(tests))

    assert site_line(entry=at(11, "test_second")) == 14  # the decorator's line, as pytest gives it
    assert site_line(entry=at(6, "test_first")) == 8
    assert site_line(call_site=at(14, "test_second")) == 14
    assert site_line() == 8  # nothing recorded: the one script that compiles, its first compile


def test_an_operator_no_switch_traces_gets_its_rules_own_advice() -> None:
    """TM111 and TM106 refused (no switch traces the operator) say what to do in the words of the rule's record
    (rules.BY_CODE), not in a copy the codemod keeps."""
    from torchmend import rules
    from torchmend.codemods.examples import EXAMPLE_ROOT, findings_from_markers

    for rule, reason in (
        ("TM111", "gb_id=GB0033 reason=aten.mylib_count"),
        ("TM106", "reason=failed_with_aten.index_put"),
    ):
        text = f"import torch\n\ndef f(x):\n    return torch.ops.mylib.count(x)  # tm: {rule} {reason}\n\nfast = torch.compile(f)\n"
        (result,) = Session(Context("/tm-example", lambda p, text=text: text)).propose(
            findings_from_markers("/tm-example/example.py", text, EXAMPLE_ROOT)
        )
        assert isinstance(result, NoFix) and "no config switch traces" in result.reason, result
        assert result.advice and result.advice == rules.BY_CODE[rule].advice, (rule, result.advice)


def test_fsdp_and_numpy_refusals_give_their_rules_own_advice() -> None:
    """TM113 (no compile over a fully_shard'ed model) and TM114 (no NumPy call on the line) refused say what to do
    in the words of the rule's record, as TM111 and TM106 do, not in a copy the codemod keeps."""
    from torchmend import rules
    from torchmend.codemods.examples import EXAMPLE_ROOT, findings_from_markers

    for rule in ("TM113", "TM114"):
        text = f"import torch\n\ndef f(x):\n    return x * 2  # tm: {rule}\n\nfast = torch.compile(f)\n"
        (result,) = Session(Context("/tm-example", lambda p, text=text: text)).propose(
            findings_from_markers("/tm-example/example.py", text, EXAMPLE_ROOT)
        )
        assert isinstance(result, NoFix) and not result.skipped, result
        assert result.advice and result.advice == rules.BY_CODE[rule].advice, (rule, result.advice)


def test_each_codemod_has_a_module_of_its_own() -> None:
    """One codemod per file (docs/STYLE.md): a module of codemods/fixes/ defines at most one Codemod (TM201 and
    TM250 share module_buffer's edit from two modules, TM104 and TM205 tensor_scalar's)."""
    from torchmend.codemods.registry import codemods

    modules: dict[str, list[str]] = {}
    for cm in codemods():
        modules.setdefault(type(cm).__module__, []).append(type(cm).__name__)
    shared = {m: names for m, names in modules.items() if len(names) > 1}
    assert not shared, shared
    assert len({m for m in modules if m.startswith("torchmend.codemods.fixes.compile_config")}) == 3, modules
