"""lint's reach and quiet (issue 30 item 7): modules held in nn.Sequential / ModuleList / ModuleDict of any
classes and imported from another file of the project are followed; a tensor `assert` the installed torch compiles
to an async assert is not reported; possible findings stay out of the default output and exit code. libcst only:
fixtures/lint/containers' lines are the ones `scan --backend aot_eager` reports there on torch 2.13 (its TM207 and
TM202 only a run can see)."""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path

import pytest
from conftest import ROOT
from typer.testing import CliRunner

from torchmend.lint import lint_paths
from torchmend.values import Root

CONTAINERS = ROOT / "fixtures/lint/containers"


def test_blocks_in_containers_and_imported_classes_are_followed():
    result = lint_paths([CONTAINERS], Root(CONTAINERS), cache=False)
    assert not result.errors
    assert sorted((f.rule, f.file, f.line) for f in result.findings) == [
        ("TM101", "blocks.py", 17),  # Block, in nn.Sequential(Block(), Block()) and a ModuleList
        ("TM101", "blocks.py", 26),  # Head, in a ModuleDict called as self.heads["cls"](x)
        ("TM102", "blocks.py", 18),
        ("TM102", "blocks.py", 32),  # Tail, in a Sequential compiled in place (.compile())
        ("TM108", "blocks.py", 20),  # `a and b` of tensors jumps on a tensor; line 19's isfinite assert does not
    ]


def _asserts(tmp_path: Path, version: tuple[int, ...] | None) -> list[int]:
    import libcst as cst

    from torchmend.analysis.source import SourceFile
    from torchmend.lint.checks import async_assert

    code = textwrap.dedent(
        """
        def f(h, n):
            assert torch.isfinite(h).all(), "nan"
            assert h.sum() > 0
            assert not torch.isnan(h).any()
            assert h.isnan().sum() == 0 and h.isinf().sum() == 0
            assert torch.isfinite(h).all(), f"nan at {h.sum()}"
            assert h.sum().item() > 0
        """
    )
    src = SourceFile(str(tmp_path / "m.py"), code, torch_version=version)
    return [src.line_of(a) for a in src.nodes_in(src.module, cst.Assert) if async_assert(src, a)]


def test_a_tensor_assert_is_quiet_where_the_installed_torch_compiles_it(tmp_path: Path):
    """Measured by counting graphs on 2.13.0, 2.14.1 and 2.15.0: lines 3 and 4 give one graph, the rest two."""
    assert _asserts(tmp_path, (2, 13)) == [3, 4] == _asserts(tmp_path, (2, 15))
    assert _asserts(tmp_path, (2, 12)) == [] == _asserts(tmp_path, None)


def test_possible_findings_are_shown_only_when_asked(tmp_path: Path):
    from torchmend.cli.main import app

    (tmp_path / "train.py").write_text(
        textwrap.dedent(
            """
            import torch
            from torch import nn

            class Net(nn.Module):
                def forward(self, x):
                    if self.training and self.drop > 0.0:  # a setting many configurations never enter
                        print("dropping")
                    return x

            model = torch.compile(Net())
            """
        )
    )
    env = {"TORCHMEND_CACHE_DIR": str(tmp_path / "cache")}
    runner = CliRunner()
    quiet = runner.invoke(app, ["lint", str(tmp_path), "--format", "json"], env=env)
    assert quiet.exit_code == 0, quiet.output
    report = json.loads(quiet.output)
    assert report["findings"] == [] and report["possible_not_shown"] == 1
    shown = runner.invoke(app, ["lint", str(tmp_path), "--format", "json", "--show-possible"], env=env)
    assert shown.exit_code == 6
    assert [(f["rule"], f["confidence"]) for f in json.loads(shown.output)["findings"]] == [("TM101", "possible")]
    table = runner.invoke(app, ["lint", str(tmp_path)], env={**env, "COLUMNS": "200"})
    assert "1 possible finding not shown" in table.output and "--show-possible" in table.output


def _judged(version: tuple[int, ...]) -> set[tuple[str, int]]:
    from torchmend.lint.analyse import Recording, lint_entry

    root = (ROOT / "fixtures/lint/data_dependent").resolve()
    ctx = Recording(str(root), lambda p: Path(p).read_text(), whole_files=True, torch_version=version)
    found = lint_entry(ctx, root / "train.py", Root(root))
    assert all(f.confidence == "likely" for f in found)
    return {(f.rule, f.line) for f in found}


def test_data_dependent_operators_and_what_each_release_breaks_on():
    """The lines `scan --backend aot_eager` reports on torch 2.13 (TM111 at the masked read, the masked update,
    bincount/nonzero and torch.where; TM105 at the masked_scatter called on a masked read); on 2.11 also the
    buffer and the submodule cast in forward and `copy.copy` (the zoo's 2.11 scans: TM103, TM199, TM105)."""
    on_213 = {("TM105", 35), ("TM111", 35), ("TM111", 36), ("TM111", 52), ("TM111", 54)}
    assert _judged((2, 13)) == on_213 == _judged((2, 15))
    assert _judged((2, 11)) == on_213 | {("TM103", 37), ("TM199", 38), ("TM105", 39)}


def test_an_input_the_caller_passes_through_and_a_row_of_nonzero_compared():
    """What `scan --backend aot_eager` reports on 2.13 (TM111 at nonzero(), TM103 at `if e == self.count:`); the
    length check that runs only when the caller gives no padding mask (it passes forward's optional
    `attention_mask` through) is possible, not likely."""
    root = ROOT / "fixtures/lint/optional_inputs"
    found = lint_paths([root], Root(root), cache=False).findings
    assert sorted((f.rule, f.line, f.confidence) for f in found) == [
        ("TM103", 32, "likely"),
        ("TM108", 16, "possible"),
        ("TM111", 29, "likely"),
    ]
    assert "when `padding_mask is None` holds" in next(f.reason for f in found if f.rule == "TM108")


REGISTRY = ROOT / "fixtures/lint/registry"
# What each script's compiled model reaches, in fixtures/lint/registry's models/ package
BY_REGISTRY = {
    # MODELS = {"informer": Informer, "autoformer": Autoformer}; MODELS[args.model](args): either may be built
    "train_dict.py": [("TM101", "models/informer.py", 12), ("TM104", "models/autoformer.py", 14)],
    "train_inline.py": [("TM101", "models/informer.py", 12)],  # torch.compile({"informer": Informer}[name](args))
    # getattr(importlib.import_module("models.dlinear"), "DLinear")(args), then model.compile()
    "train_importlib.py": [("TM103", "models/dlinear.py", 13)],
    # self.model_dict = {"PatchTST": PatchTST} (a module); self.model_dict[name].Model(self.args).float()
    "exp_basic.py": [("TM101", "models/PatchTST.py", 12)],
}


@pytest.mark.parametrize("script", sorted(BY_REGISTRY))
def test_a_model_class_named_through_a_registry_or_importlib_is_followed(tmp_path: Path, script: str):
    shutil.copytree(REGISTRY / "models", tmp_path / "models")
    shutil.copy(REGISTRY / script, tmp_path / script)  # alone: no other script's compile reaches the models
    result = lint_paths([tmp_path], Root(tmp_path), cache=False)
    assert not result.errors
    assert sorted((f.rule, f.file, f.line) for f in result.findings) == sorted(BY_REGISTRY[script])
