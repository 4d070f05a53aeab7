"""Issue 30: one rule per cause, and lint's reach on real model code.

- A setting forward writes (`self.config.problem_type = "..."` under `if ... is None:`) is TM209 for scan (its
  guard) and for lint (the write), never a cached tensor (TM208).
- A break inside an installed logger or a framework's `self.log` is filed at the project line that logged (TM102).
- lint tells code the default configuration runs (likely) from code that only some configurations or callers run
  (possible): config defaults, optional inputs, early returns, the class `__init__` builds by default; and stops at
  a break inside a loop, after which dynamo runs the def eagerly.

Synthetic event streams in torch 2.13's shape and in-process lint; no torch run."""

from __future__ import annotations

import textwrap
from pathlib import Path

from torchmend.lint import lint_paths
from torchmend.model import Where
from torchmend.profiler.classify import classify_guard, logging_line
from torchmend.profiler.findings import analyse
from torchmend.profiler.traceparse import Frame, GuardFailure
from torchmend.values import Root


def _guard(guard: str, variable: str, site: Frame | None = None) -> GuardFailure:
    return GuardFailure("0/1", guard, variable, site, None, guard)


def test_a_config_setting_written_in_forward_is_its_own_rule(tmp_path: Path) -> None:
    assert classify_guard(_guard("self.config.problem_type is None", "self.config.problem_type")) == "TM209"
    assert classify_guard(_guard("self.config.loss_type == 'ForCausalLM'", "self.config.loss_type")) == "TM209"
    model = tmp_path / "model.py"
    model.write_text(
        "class M:\n    def forward(self):\n        if self.mode is None:\n            self.mode = 'fast'\n"
    )
    assert classify_guard(_guard("self.mode is None", "self.mode", Frame(str(model), 3, "forward"))) == "TM209"
    # a tensor cached on the module keeps its rule; a number attribute that changes too
    model.write_text("class M:\n    def forward(self, x):\n        if self.mask is None:\n            self.mask = x\n")
    assert classify_guard(_guard("self.mask is None", "self.mask", Frame(str(model), 3, "forward"))) == "TM208"
    assert classify_guard(_guard("self.config.step == 3", "self.config.step")) == "TM201"


def test_logging_lines_are_told_from_other_calls() -> None:
    for code in ('self.log("loss", loss)', "self.log_dict(metrics)", 'logger.info("x")', "log.opt(depth=1).debug(m)"):
        assert logging_line(code), code
    for code in ("x = torch.log(y)", "self.log_softmax(x)", "catalog.info(x)", "out = model(x)"):
        assert not logging_line(code), code


def test_a_break_inside_an_installed_logger_is_filed_at_the_line_that_logged(tmp_path: Path) -> None:
    site = tmp_path / "venv" / "lib" / "python3.12" / "site-packages"
    lib = f"{site}/logkit/__init__.py"
    (tmp_path / "proj").mkdir()
    train = tmp_path / "proj" / "train.py"
    train.write_text("\n" * 29 + '    logger.info("step {}", step)\n')
    text = (
        f"Graph break in user code at {lib}:16\nGraph Break Reason: Attempted to call function marked as skipped\n"
        "  Explanation: Dynamo does not know how to trace the builtin `sys._getframe.`\n\nUser code traceback:\n"
        f'  File "{train}", line 30, in training_step\n    logger.info("step {{}}", step)\n'
        f'  File "{lib}", line 16, in _log\n    caller = sys._getframe(2)\n'
    )
    events = [
        {"ev": "start", "torch": "2.13.0+cpu", "library_roots": [str(site)], "libraries": {}},
        {"ev": "compile_start", "compile_id": "0/0", "stack": [[str(train), 30, "training_step"]], "callers": []},
        {"ev": "graph_break", "compile_id": "0/0", "text": text},
        {"ev": "end", "reason": "finished", "steps": 1},
    ]
    (f,), _ = analyse(events, tmp_path / "proj")
    assert (f.rule, f.where, f.file, f.line) == ("TM102", Where.PROJECT, "train.py", 30)
    assert f"{lib}:16" in f.reason and "torch.compiler.disable" in f.reason


def _lint(tmp_path: Path, files: dict[str, str], show: bool = True) -> set[tuple[str, int, str]]:
    for name, text in files.items():
        (tmp_path / name).write_text(textwrap.dedent(text))
    found = lint_paths([tmp_path], Root(tmp_path), cache=False).findings
    return {(f.rule, f.line, f.confidence or "") for f in found}


CONFIG = """\
    class NetConfig:
        mask_prob: float = 0.05
        layerdrop: float = 0.0
        stable: bool = False
"""


def test_config_defaults_decide_likely_or_possible(tmp_path: Path) -> None:
    model = """\
    import numpy as np
    import torch
    from torch import nn


    class Plain(nn.Module):
        def forward(self, x):
            return x


    class Stable(nn.Module):
        def forward(self, x):
            print("stable")
            return x


    class Net(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.config = config
            self.layerdrop = config.layerdrop
            self.body = Stable() if config.stable else Plain()

        def forward(self, x, extra=None):
            if self.config.mask_prob > 0 and self.training:
                x = x * float(np.random.rand())
            if self.training and self.layerdrop > 0.0:
                print("layerdrop")
            if extra is not None:
                x = x + extra.sum().item()
            return self.body(x)


    net = torch.compile(Net(None))
    """
    got = _lint(tmp_path, {"config.py": CONFIG, "model.py": model})
    assert ("TM110", 26, "likely") in got  # mask_prob defaults to 0.05: the default training run draws
    assert ("TM101", 28, "possible") in got  # layerdrop defaults to 0.0
    assert ("TM104", 30, "possible") in got  # only callers that pass `extra`
    assert ("TM101", 13, "possible") in got  # `Stable` is built only when config.stable, False by default


def test_early_return_and_a_break_in_a_loop(tmp_path: Path) -> None:
    model = """\
    import torch
    from torch import nn


    class Quant(nn.Module):
        def __init__(self):
            super().__init__()
            self.quant = False

        def forward(self, x):
            if not self.quant:
                return x
            print("quantised")
            return x


    class Mask(nn.Module):
        def forward(self, x, lengths):
            for n in lengths:
                if n.item() > 3:
                    x = x + 1
            assert x.max().item() < 10
            return torch.zeros_like(x, requires_grad=self.training)


    q = torch.compile(Quant())
    m = torch.compile(Mask())
    """
    got = _lint(tmp_path, {"model.py": model})
    assert ("TM101", 13, "possible") in got  # past `if not self.quant: return`, and quant is False by default
    assert ("TM104", 20, "likely") in got
    # the break inside the loop makes dynamo run the rest of forward eagerly: nothing after it is reported
    assert not {(rule, line) for rule, line, _ in got if line > 20 and line < 24}


def test_an_assert_on_item_and_requires_grad_in_a_factory(tmp_path: Path) -> None:
    model = """\
    import torch
    from torch import nn


    class Head(nn.Module):
        def forward(self, x, slen):
            assert x.max().item() <= slen
            return torch.zeros_like(x, requires_grad=self.training)


    h = torch.compile(Head())
    """
    got = _lint(tmp_path, {"model.py": model})
    assert ("TM108", 7, "likely") in got  # scan files a break on an assert's line as TM108
    assert ("TM109", 8, "likely") in got
