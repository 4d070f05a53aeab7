"""Scripts without backward or optimizer (sampling, inference): the child fingerprints what the compiled functions
return, and verify compares those outputs. Real child runs (aot_eager) and the real CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import torchmend

from torchmend.codemods.engine import unified_diff
from torchmend.profiler.runner import RunSpec, run
from torchmend.verify.numerics import compare

pytestmark = pytest.mark.xdist_group("output_numerics")

# The temperature is a Python float that changes every step: TM202, fixed by passing it as a tensor.
SAMPLE = '''\
"""Sampling from a small model with an annealed temperature: no backward, no optimizer."""
import torch
from torch import nn

embed, head = nn.Embedding(32, 16), nn.Linear(16, 32)


@torch.compile
def next_logits(tokens, temperature):
    return head(embed(tokens)[:, -1]) / temperature


def main():
    tokens = torch.zeros(4, 8, dtype=torch.long)
    with torch.no_grad():
        for step in range(16):
            temperature = 1.5 - step * 0.05
            logits = next_logits(tokens, temperature)
            sampled = torch.multinomial(torch.softmax(logits, dim=-1), 1)
            tokens = torch.cat([tokens[:, 1:], sampled], dim=1)
    print(tokens[0].tolist())


if __name__ == "__main__":
    main()
'''

# Every way to get a compiled callable: a decorated function returning a tuple and a dict, torch.compile(module),
# module.compile(), the decorator with arguments; and a compiled function calling another one.
SHAPES = """\
import torch
from torch import nn


@torch.compile(dynamic=False)
def pair(x):
    return x * 2, {"mean": x.mean(), "n": 3, "idx": x.argmax(-1)}


@torch.compile
def inner(x):
    return x + 1


@torch.compile
def outer(x):
    return inner(x) * 3


def main():
    net = torch.compile(nn.Linear(4, 2))
    own = nn.Linear(4, 3)
    own.compile()
    x = torch.randn(5, 4)
    with torch.no_grad():
        pair(x)
        net(x)
        own(x)
        outer(x)
    assert isinstance(net, nn.Module) and net._orig_mod.out_features == 2


main()
"""


# Inference under inference_mode, then training: once losses are seen, calls are only counted.
INFER_THEN_TRAIN = """\
import torch
from torch import nn

net = torch.compile(nn.Linear(4, 2))
with torch.inference_mode():
    for _ in range(3):
        net(torch.randn(3, 4))
opt = torch.optim.SGD(net.parameters(), lr=0.1)
for _ in range(3):
    net(torch.randn(3, 4)).sum().backward()
    opt.step()
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "sample.py").write_text(SAMPLE)
    return proj


def test_every_kind_of_compiled_callable_is_fingerprinted(tmp_path: Path) -> None:
    script = tmp_path / "shapes.py"
    script.write_text(SHAPES)
    outcome = run(RunSpec(script=script, backend="aot_eager", seed=0, timeout=120))
    assert outcome.ended_by == "finished", outcome.output_tail
    calls = outcome.end["outputs"]
    # outer's call of inner happens while dynamo traces outer: only what outer returns is recorded
    assert [c["fn"] for c in calls] == ["pair", "Linear", "Linear", "outer"]
    assert [[t["shape"] for t in c["tensors"]] for c in calls] == [[[5, 4], [], [5]], [[5, 2]], [[5, 3]], [[5, 4]]]
    assert calls[0]["tensors"][2]["dtype"] == "int64"
    assert all(isinstance(t["sum"], float) and t["abs"] >= abs(t["sum"]) for c in calls for t in c["tensors"])
    info = outcome.end["numerics"]
    assert info["output_calls_seen"] == info["output_calls_kept"] == 4 and info["errors"] == []
    assert outcome.end["losses"] == [] and outcome.end["params"] is None


def test_inference_tensors_are_read_and_training_steps_are_only_counted(tmp_path: Path) -> None:
    script = tmp_path / "infer.py"
    script.write_text(INFER_THEN_TRAIN)
    outcome = run(RunSpec(script=script, backend="aot_eager", seed=0, timeout=120))
    assert outcome.ended_by == "finished", outcome.output_tail
    info = outcome.end["numerics"]
    assert (info["output_calls_seen"], info["output_calls_kept"], info["errors"]) == (6, 4, [])  # 3 + the first step
    assert all(c["fn"] == "Linear" and "probe" in c["tensors"][0] for c in outcome.end["outputs"])
    assert len(outcome.end["losses"]) == 3


def test_same_seed_gives_equal_outputs_and_a_changed_number_diverges(project: Path) -> None:
    script = project / "sample.py"
    first, again = (run(RunSpec(script=script, backend="aot_eager", seed=0, timeout=120)) for _ in range(2))
    assert first.end["outputs"] == again.end["outputs"] and len(first.end["outputs"]) == 16
    result = compare(first.end, again.end)
    assert result.equal and result.compared and result.outputs_compared == 16
    hotter = SAMPLE.replace("1.5 - step * 0.05", "1.5 - step * 0.05 + (step == 6) * 0.05")
    changed = run(RunSpec(script=script, backend="aot_eager", seed=0, timeout=120, overlay=((str(script), hotter),)))
    result = compare(first.end, changed.end)
    assert not result.equal and result.output_divergence.call == 6


def test_scan_fix_verify_compares_the_outputs(project: Path) -> None:
    scan = torchmend("scan", "sample.py", "--backend", "aot_eager", "--format", "json", cwd=project)
    assert scan.returncode == 0, scan.stderr
    assert [(f["rule"], f["line"], f["where"]) for f in scan.json["findings"]] == [("TM202", 10, "project")]
    fix = torchmend(
        "fix", "sample.py", "--backend", "aot_eager", "--verify-backend", "aot_eager", "--yes", "--unsafe", cwd=project
    )
    assert fix.returncode == 0, fix.stdout + fix.stderr
    assert "numerics match (16 outputs of compiled functions" in fix.stdout.replace("\n", " "), fix.stdout
    assert "verdict: no measured speed change" in fix.stdout
    assert "torch.tensor(temperature" in (project / "sample.py").read_text()


def test_a_patch_that_changes_the_math_is_refused_naming_the_call(project: Path, tmp_path: Path) -> None:
    script = project / "sample.py"
    fixed = SAMPLE.replace("= next_logits(tokens, temperature)", "= next_logits(tokens, torch.tensor(temperature))")
    wrong = fixed.replace(") / temperature", ") / temperature * 1.01")
    patch = tmp_path / "change.patch"
    patch.write_text(unified_diff("sample.py", script.read_text(), wrong))
    result = torchmend(
        "verify",
        "sample.py",
        "--backend",
        "aot_eager",
        "--repeat",
        "1",
        "--patch",
        str(patch),
        "--format",
        "json",
        cwd=project,
    )
    assert result.returncode == 10, result.stdout + result.stderr
    report = result.json
    assert report["verdict"] == "refused"
    numerics = report["numerics"]
    assert numerics["compared"] and numerics["outputs_equal"] is False
    assert (numerics["output_divergence"]["call"], numerics["output_divergence"]["fn"]) == (0, "next_logits")
    assert any("outputs of compiled functions diverge at call 0 (next_logits)" in r for r in report["reasons"]), (
        json.dumps(report["reasons"])
    )
    # the eager reference: run without compiling, the patched script already differs from the original
    assert report["reference"]["whose"] == "rewrite"
    assert any(r.startswith("the rewrite changed the math") for r in report["reasons"]), json.dumps(report["reasons"])
    assert script.read_text() == SAMPLE
