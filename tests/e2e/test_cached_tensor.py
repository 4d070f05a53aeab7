"""End to end for TM208 (issue 13, item 3): a tensor cached on the module in a compiled forward.

scan (aot_eager) files TM208 at the line that tests the cache; the codemod's rewrite, run from memory, leaves no
TM208 and fewer recompiles; for the word-language-model shape the causal hint also removes the `.item()` break
inside torch/nn/modules/transformer.py (`_detect_is_causal_mask`), a library break fixed at the user's call;
verify says improved with the losses and final weights unchanged.
"""

from __future__ import annotations

import pytest
from conftest import ROOT, SCAN_FIXTURES, scan_events, scan_json, torch_minor

from torchmend.analysis.source import Context
from torchmend.codemods.base import Proposal
from torchmend.codemods.engine import Session
from torchmend.model import Finding
from torchmend.profiler.events import END
from torchmend.profiler.runner import RunOutcome, RunSpec, run
from torchmend.sources import read_source
from torchmend.values import Root
from torchmend.verify.attribution import attribute
from torchmend.verify.compare import NEUTRAL, judge
from torchmend.verify.runs import from_outcome

# fixture -> (the line of the cache's `if`, the first line it becomes, whether the library mask check breaks before)
CASES = {
    "cached_causal_mask": (
        37,
        "src_mask = nn.Transformer.generate_square_subsequent_mask(len(src)).to(src.device)",
        True,
    ),
    "cached_pos_table": (16, "t = torch.arange(n, dtype=torch.float32)", False),
}


def _transformer_breaks(findings) -> list:
    return [
        f
        for f in findings
        if f.rule == "TM104" and f.where == "library" and f.path.endswith("torch/nn/modules/transformer.py")
    ]


@pytest.mark.parametrize("name", sorted(CASES))
def test_cached_tensor_scan_fix_verify(name: str) -> None:
    if torch_minor() != "2.13":
        pytest.skip("guard texts and lines recorded on torch 2.13")
    line, new_code, library_break = CASES[name]
    script = SCAN_FIXTURES / name / "train.py"
    scan = scan_json(script)
    assert scan.returncode == 0, scan.stderr
    findings = [Finding.from_json(f) for f in scan.json["findings"]]
    cached = [f for f in findings if f.rule == "TM208"]
    assert [(f.line, f.where) for f in cached] == [(line, "project")]
    assert cached[0].severity == "fix" and cached[0].count >= 2
    assert not [f for f in findings if f.rule == "TM201"], "a cached tensor is not an int/float attribute"
    assert bool(_transformer_breaks(findings)) == library_break

    events = scan_events(script)
    end = next(e for e in reversed(events) if e.get("ev") == END)
    before = from_outcome("before", 0, RunOutcome(events, end["reason"], 0, 0.0, "", end), Root(ROOT))

    session = Session(Context(str(ROOT), read_source))
    results = session.propose(cached)
    accepted = [r for r in results if isinstance(r, Proposal)]
    assert len(accepted) == 1, results
    session.accept(accepted[0])
    changes = session.changed()
    ((path, (_, text)),) = changes.items()
    lines = [t.strip() for t in text.splitlines()]
    assert new_code in lines and not any(t.startswith("if self.") for t in lines)
    assert ("is_causal=True" in text) == library_break

    after = from_outcome(
        "after", 0, run(RunSpec(script=script, backend="aot_eager", cwd=ROOT, overlay=((path, text),))), Root(ROOT)
    )
    assert after.summary.ended_by == "finished"
    assert not [f for f in after.findings if f.rule == "TM208"]
    assert not _transformer_breaks(after.findings)
    assert after.summary.recompiles < before.summary.recompiles
    if library_break:
        assert before.summary.graph_breaks > 0 and after.summary.graph_breaks == 0
    assert all(e.helped for e in attribute(accepted, after.findings, changes))

    verdict = judge([before], [after], timed=False)  # aot_eager runs: a proxy is never timed
    assert verdict.verdict == NEUTRAL, verdict.reasons
    assert verdict.numerics is not None and verdict.numerics.equal, verdict.numerics
    assert verdict.numerics.steps_compared > 0
