"""What the codemods buy on each scan fixture: scan, accept every proposal, re-run the patched sources
(from memory, nothing written), and print graph breaks / recompiles / limit hits before and after.

    .venv/bin/python benchmarks/fix_effect.py [--backend aot_eager] [fixture ...]

Both runs of a fixture use the same backend and budget, one after the other; the counts are exact, the
seconds are this machine's (shared and noisy: compare them only within a row).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

from torchmend import pipeline
from torchmend.profiler.runner import RunSpec

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures" / "scan"


def measure(name: str, backend: str) -> str:
    script = FIXTURES / name / "train.py"
    spec = RunSpec(script=script, backend=backend, cwd=script.parent)
    scan = pipeline.scan(spec, ROOT, own_caches=False)
    fixes = pipeline.propose(scan.findings, ROOT)
    pipeline.accept_all(fixes, unsafe=True)
    rules = sorted({f.rule for r in fixes.accepted for f in r.findings})
    overlay = tuple((p, new) for p, (_, new) in fixes.changes().items())
    patched = pipeline.scan(replace(spec, overlay=overlay), ROOT, own_caches=False)
    before, after, outcome = scan.summary, patched.summary, patched.outcome
    left = sorted({f.rule for f in patched.findings if f.where == "project"})

    def cell(b: int, a: int) -> str:
        return f"{b} → {a}"

    return (
        f"| {name} | {', '.join(rules) or '—'} | {len(fixes.accepted)} | "
        f"{cell(before.graph_breaks, after.graph_breaks)} | {cell(before.recompiles, after.recompiles)} | "
        f"{cell(before.recompile_limit_hits, after.recompile_limit_hits)} | "
        f"{before.compile_seconds:.2f} → {after.compile_seconds:.2f} | {', '.join(left) or '—'} | "
        f"{outcome.ended_by} |"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", default="aot_eager")
    parser.add_argument("fixtures", nargs="*")
    args = parser.parse_args()
    names = args.fixtures or sorted(
        p.name for p in FIXTURES.iterdir() if (p / "train.py").exists() and p.name != "clean"
    )
    print(f"backend {args.backend}; every proposal accepted (safe and unsafe)\n")
    print(
        "| fixture | rules fixed | changes | graph breaks | recompiles | limit hits | compile s | "
        "project findings left | patched run |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for name in names:
        print(measure(name, args.backend), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
