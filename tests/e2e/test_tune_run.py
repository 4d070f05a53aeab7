"""`torchmend tune` on a real run (the e2e test for issue 16's tune; aot_eager, a one-layer model, a few steps,
one run per setting, so it stays near 20 s on a 2-core CPU): eager compiles nothing, the compiled setting does,
every run reports its step times and peak memory, and the report and its plot are written."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from conftest import torchmend

SCRIPT = """\
import torch
from torch import nn

model = nn.Linear(8, 1)
step = torch.compile(model, mode="max-autotune")
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for i in range(1000):
    loss = step(torch.randn(4, 8)).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
"""


def test_tune_times_eager_and_a_compiled_setting_and_writes_the_report(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(SCRIPT)
    r = torchmend(
        "tune",
        "train.py",
        "--backend",
        "aot_eager",
        "--settings",
        "default",
        "--steps",
        "8",
        "--repeat",
        "1",
        "--report",
        "out/COMPILE_LOG.md",
        "--format",
        "json",
        cwd=tmp_path,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    data = r.json
    runs = {run["setting"]: run for run in data["runs"]}
    assert list(runs) == ["eager", "default"]
    assert runs["eager"]["compile_seconds"] == 0 and runs["default"]["compile_seconds"] > 0
    for run in runs.values():
        assert run["ended_by"] == "steps" and len(run["step_s"]) == run["steps"] == 8
        assert run["peak_rss_mb"] > 50 and run["cuda_peak_mb"] is None
    # The script's own call (mode="max-autotune") is recorded; aot_eager has no modes, so none was passed on.
    assert data["script_compile_calls"][0]["mode"] == "max-autotune"
    assert data["recommended"] in ("eager", "default") and data["reason"]
    row = next(s for s in data["settings"] if s["setting"] == "default")
    assert row["break_even"] is not None
    report = (tmp_path / "out" / "COMPILE_LOG.md").read_text()
    assert f"**Recommended: `{data['recommended']}`**" in report and "| default |" in report
    assert "(COMPILE_LOG.svg)" in report and "torch 2." in report
    plot = ET.parse(tmp_path / "out" / "COMPILE_LOG.svg").getroot()
    assert len(plot.findall("{http://www.w3.org/2000/svg}polyline")) == 2


def test_a_report_that_cannot_be_written_at_the_end_loses_no_result(tmp_path: Path) -> None:
    # The path is free when tune checks it; the script itself then puts a folder there, so the write at the end fails.
    report = tmp_path / "COMPILE_LOG.md"
    blocking = f"import os\nos.makedirs({str(report)!r}, exist_ok=True)\n"
    (tmp_path / "train.py").write_text(blocking + SCRIPT)
    r = torchmend(
        "tune", "train.py", "--backend", "eager", "--settings", "default", "--steps", "3", "--repeat", "1",
        "--report", str(report), cwd=tmp_path, timeout=300,
    )  # fmt: skip
    said = " ".join(r.stderr.split())
    assert r.returncode == 2, said[-3000:]
    assert f"cannot write the report {report}" in said and "the results are above" in said, said
    assert "recommended:" in r.stdout and "default" in r.stdout  # the table came out first
