"""`torchmend.lint.lint_paths`: static findings in compiled code, libcst only (no run, no torch import). The scan
fixtures get the findings below (benchmarks/lint_vs_scan.py compares them with what their runs showed); clean code
in the shapes of nanoGPT and minGPT gets none."""

from __future__ import annotations

import json
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest
from conftest import ROOT, SCAN_FIXTURES

from torchmend import pipeline
from torchmend.lint import PathNotFound, lint_paths
from torchmend.model import Finding
from torchmend.values import Root, Selection

# (rule, file, line) lint reports on each scan fixture; the fixtures not listed get none.
EXPECTED = {
    "cached_causal_mask": [("TM208", "train.py", 37)],
    "cached_pos_table": [("TM208", "train.py", 16)],
    "checks_and_random": [
        ("TM110", "train.py", 12),
        ("TM110", "train.py", 15),
        ("TM108", "train.py", 32),
        ("TM103", "train.py", 33),
        ("TM109", "train.py", 57),
        ("TM103", "train.py", 67),  # `skip` holds a tensor comparison where the default configuration sets it
    ],
    "ema_teacher_bound_method": [("TM201", "teacher.py", 20)],
    "float_arg": [("TM202", "train.py", 8)],
    "float_lr_warmup": [("TM203", "train.py", 16)],
    "global_scalar": [("TM206", "train.py", 10), ("TM202", "train.py", 22)],
    "item_arith": [("TM104", "train.py", 8)],
    "library_after_break": [("TM104", "model.py", 18)],
    # `self.log(...)` of a Lightning-style base and an installed logger's `logger.debug(...)`, filed where scan
    # files what breaks inside them; `self.config.problem_type` written in forward (TM209, one-time)
    "lightning_style": [("TM209", "train.py", 34), ("TM102", "train.py", 43), ("TM102", "train.py", 44)],
    "logger_in_forward": [("TM102", "train.py", 16)],
    "module_counter": [("TM201", "train.py", 13)],
    "moe_dispatch": [("TM111", "train.py", 17), ("TM111", "train.py", 19)],  # nonzero(), torch.where(mask)
    "own_optimizer": [("TM203", "train.py", 43)],
    "own_optimizer_train_step": [("TM203", "train.py", 51)],
    "save_compiled_model": [("TM107", "train.py", 41)],  # torch.save of the compiled model (scan: the load, 42)
    "print_in_forward": [("TM101", "train.py", 14)],
    "several": [
        ("TM201", "train.py", 20),
        ("TM103", "train.py", 22),
        ("TM101", "train.py", 24),
        ("TM202", "train.py", 25),
    ],
    "tensor_if": [("TM103", "train.py", 13)],
    "train_eval_sweep": [("TM104", "train.py", 21)],
    "two_file": [("TM104", "model.py", 13)],
}
FIXTURES = sorted(p.name for p in SCAN_FIXTURES.iterdir() if (p / "expected.json").exists())


def _lint(path: Path, root: Path | None = None, **kw) -> list[tuple[str, str, int]]:
    result = lint_paths([path], Root(root or (path if path.is_dir() else path.parent)), cache=False, **kw)
    assert not result.errors
    return sorted((f.rule, f.file, f.line) for f in result.findings)


@pytest.fixture(scope="module")
def scan_fixture_findings() -> dict[str, list[tuple[str, str, int]]]:
    """Every scan fixture linted in one run (the files are shared among processes, as a cold lint does)."""
    result = lint_paths([SCAN_FIXTURES], Root(SCAN_FIXTURES), cache=False)
    assert not result.errors
    found: dict[str, list[tuple[str, str, int]]] = {}
    for f in result.findings:
        folder, file = f.file.split("/", 1)
        found.setdefault(folder, []).append((f.rule, file, f.line))
    return found


@pytest.mark.parametrize("name", FIXTURES)
def test_scan_fixture_gets_the_expected_static_findings(name: str, scan_fixture_findings):
    assert sorted(scan_fixture_findings.get(name, [])) == sorted(EXPECTED.get(name, []))


@pytest.mark.parametrize(
    "path",
    [
        "fixtures/lint/nanogpt_shape",
        "fixtures/lint/mingpt_shape",
        "fixtures/scan/clean",
        *[f"benchmarks/scenarios/{p.name}/hand.py" for p in sorted((ROOT / "benchmarks/scenarios").iterdir())],
    ],
)
def test_clean_code_gets_no_findings(path: str):
    assert _lint(ROOT / path) == []


def test_the_clean_shapes_are_really_followed_into_their_model_code():
    """No finding must not mean nothing was looked at: the compiled GPT's blocks and attention are reached."""
    from torchmend.lint.analyse import Recording
    from torchmend.lint.regions import compiled_region

    root = ROOT / "fixtures/lint/nanogpt_shape"
    ctx = Recording(str(root), lambda p: Path(p).read_text())
    region = compiled_region(ctx.file(str(root / "train.py")), ctx)
    owners = {ctx.file(r.src.path).enclosing(r.fn, __import__("libcst").ClassDef).name.value for r in region.functions}
    assert owners == {"GPT", "Block", "CausalSelfAttention", "MLP", "LayerNorm"}


def test_a_model_picked_by_a_flag_has_every_class_it_may_be_checked():
    """pytorch/examples' word_language_model builds `model` in an if/else and compiles it after: each class's forward
    is compiled in some run. sweep.py picks with `A() if c else B()` and in try/except; train.py's model built after
    the compile is not compiled (the binding does not reach it)."""
    from torchmend.lint.analyse import Recording
    from torchmend.lint.regions import compiled_region

    root = ROOT / "fixtures/lint/either_model"
    assert _lint(root) == [("TM101", "models.py", 35), ("TM103", "models.py", 53), ("TM208", "models.py", 19)]
    ctx = Recording(str(root), lambda p: Path(p).read_text())
    reached = {}
    for script in ("train.py", "sweep.py"):
        region = compiled_region(ctx.file(str(root / script)), ctx)
        reached[script] = {
            f"{r.src.enclosing(r.fn, __import__('libcst').ClassDef).name.value}.{r.fn.name.value}"
            for r in region.functions
        }
    assert reached == {
        "train.py": {"CausalEncoder.forward", "RecurrentLM.forward"},
        "sweep.py": {"ConvLM.forward", "ConvLM._clip", "RecurrentLM.forward"},
    }


def test_static_findings_say_so_and_carry_what_the_codemods_need():
    result = lint_paths([SCAN_FIXTURES / "several"], Root(SCAN_FIXTURES / "several"), cache=False)
    by_rule = {f.rule: f for f in result.findings}
    assert {f.confidence for f in result.findings} == {"likely"}
    assert all("torchmend scan SCRIPT" in f.reason and f.count == 1 for f in result.findings)
    assert by_rule["TM201"].variable == "self.steps_seen" and by_rule["TM201"].function == "forward"
    assert by_rule["TM202"].call_site is not None and by_rule["TM202"].call_site.line == 41
    assert by_rule["TM101"].compiled_function is not None and by_rule["TM101"].compiled_function.function == "forward"
    fixes = pipeline.propose(result.findings, (SCAN_FIXTURES / "several").resolve())
    assert sorted(p.rule for p in fixes.proposals) == ["TM101", "TM103", "TM201", "TM202"]


def test_confidence_round_trips_through_json():
    result = lint_paths([SCAN_FIXTURES / "tensor_if"], Root(SCAN_FIXTURES / "tensor_if"), cache=False)
    f = result.findings[0]
    again = Finding.from_json(json.loads(json.dumps(f.to_json())))
    assert again == f and again.confidence == "likely"
    assert Finding.from_json({k: v for k, v in f.to_json().items() if k != "confidence"}).confidence is None


COMPILED_PRINT = """\
import torch

@torch.compile
def step(x):
    print("x", x)
    return x * 2
"""


def test_unparsable_file_is_tm904_and_the_others_are_still_linted(tmp_path: Path):
    (tmp_path / "ok.py").write_text(COMPILED_PRINT)
    (tmp_path / "broken.py").write_text("import torch\n\n@torch.compile\ndef f(x)\n    return x\n")
    found = _lint(tmp_path)
    assert found == [("TM101", "ok.py", 5), ("TM904", "broken.py", 4)]
    assert _lint(tmp_path, selection=Selection.of(["TM1"])) == [("TM101", "ok.py", 5)]
    assert _lint(tmp_path, selection=Selection.of(ignore=["TM904"])) == [("TM101", "ok.py", 5)]


def test_a_path_that_does_not_exist_raises(tmp_path: Path):
    with pytest.raises(PathNotFound):
        lint_paths([tmp_path / "nope.py"], Root(tmp_path), cache=False)


def test_gitignored_files_and_virtualenvs_are_not_linted(tmp_path: Path):
    for rel in ["kept.py", "ignored.py", "venv/lib/x.py", "env2/x.py", "lib/site-packages/x.py", "__pycache__/x.py"]:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(COMPILED_PRINT)
    (tmp_path / "env2" / "pyvenv.cfg").write_text("home = /usr\n")
    (tmp_path / ".gitignore").write_text("ignored.py\n")
    walked = _lint(tmp_path)  # no git work tree: walked, .gitignore not read, virtualenvs still skipped
    assert walked == [("TM101", "ignored.py", 5), ("TM101", "kept.py", 5)]
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    assert _lint(tmp_path) == [("TM101", "kept.py", 5)]


def test_only_compiled_code_is_checked(tmp_path: Path):
    (tmp_path / "train.py").write_text(
        textwrap.dedent(
            """\
            import torch

            def eager(x):
                print(x)  # never compiled
                return x.item()

            @torch.compile
            def step(x):
                if not torch.compiler.is_compiling():
                    print("eager only", x)
                y = helper(x)
                return y

            def helper(x):
                print("called from compiled code")
                return x + 1
            """
        )
    )
    assert _lint(tmp_path) == [("TM101", "train.py", 15)]


NANOGPT_LOOP = """\
import torch
from torch import nn

model = nn.Linear(4, 1)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
{compiled}
for it in range(10):
    for group in opt.param_groups:
        group["lr"] = 1e-3 * (it + 1) / 10
    loss = model(torch.randn(2, 4)).sum()
    loss.backward()
    step()
"""


def test_float_lr_into_param_groups_only_when_the_step_is_compiled(tmp_path: Path):
    eager = "def step():\n    opt.step()\n\nmodel = torch.compile(model)\n"
    (tmp_path / "train.py").write_text(NANOGPT_LOOP.format(compiled=eager))
    assert _lint(tmp_path) == []
    compiled = "@torch.compile\ndef step():\n    opt.step()\n"
    (tmp_path / "train.py").write_text(NANOGPT_LOOP.format(compiled=compiled))
    assert _lint(tmp_path) == [("TM203", "train.py", 8)]


def test_a_model_file_given_alone_is_known_compiled_by_the_script(tmp_path: Path):
    shutil.copytree(SCAN_FIXTURES / "two_file", tmp_path / "proj")
    root = tmp_path / "proj"
    assert _lint(root / "model.py", root) == [("TM104", "model.py", 13)]
    assert _lint(root / "train.py", root) == []


def test_the_cache_serves_unchanged_files_and_follows_a_changed_callee(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("TORCHMEND_CACHE_DIR", str(tmp_path / "cache"))
    shutil.copytree(SCAN_FIXTURES / "two_file", tmp_path / "proj")
    root = tmp_path / "proj"
    first = lint_paths([root], Root(root))
    assert first.files_parsed == 2 and first.cached == 0
    second = lint_paths([root], Root(root))
    assert second.files_parsed == 0 and second.cached == 1 and second.findings == first.findings
    model = root / "model.py"
    model.write_text(
        model.read_text().replace("peak = out.abs().max().item()", "peak = out.abs().max()\n        print(peak)")
    )
    third = lint_paths([root], Root(root))
    assert third.cached == 0 and "TM101" in {f.rule for f in third.findings}


def test_a_value_the_source_does_not_pin_down_is_possible(tmp_path: Path):
    (tmp_path / "train.py").write_text(
        "import torch\n\n@torch.compile\ndef f(x):\n    y = x[0] * 2\n    return y + float(x)\n"
    )
    result = lint_paths([tmp_path], Root(tmp_path), cache=False)
    assert [(f.rule, f.line, f.confidence, f.severity) for f in result.findings] == [("TM104", 6, "possible", "note")]


def test_a_large_file_is_parsed_whole(tmp_path: Path):
    """fix parses a file of 2,000 lines or more around its findings' lines; lint has none yet and reads it all."""
    filler = "".join(f"def helper_{i}(x):\n    return x + {i}\n\n\n" for i in range(600))
    (tmp_path / "big.py").write_text("import torch\n\n\n" + filler + COMPILED_PRINT.replace("import torch\n", ""))
    found = _lint(tmp_path)
    assert len(found) == 1 and found[0][0] == "TM101" and found[0][2] > 2000
