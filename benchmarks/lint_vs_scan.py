"""How far `torchmend lint` (static, nothing run) agrees with `torchmend scan` (what a run showed): per rule, the
findings both report (TP), lint alone (FP) and scan alone (FN), keyed by (rule, file, line), with precision and
recall; written as a Markdown table into docs/lint-precision.md.

The runtime side: every scan fixture's expected.json ("2.13" list, what the e2e tests check a live scan against),
and the benchmark scenarios (broken.py and hand.py), scanned once on aot_eager and kept in
benchmarks/results/lint-scan-scenarios.json (`--record` runs those scans again: minutes). A library finding counts
at the project line that reached it (`from`). Informational findings (TM9xx: nothing to fix) are left out.

    .venv/bin/python benchmarks/lint_vs_scan.py            # measure, write docs/lint-precision.md
    .venv/bin/python benchmarks/lint_vs_scan.py --record   # scan the scenarios again first
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from torchmend import rules  # noqa: E402
from torchmend.lint import lint_paths  # noqa: E402

SCAN_FIXTURES = ROOT / "fixtures" / "scan"
SCENARIOS = ROOT / "benchmarks" / "scenarios"
RECORDED = ROOT / "benchmarks" / "results" / "lint-scan-scenarios.json"
PAGE = ROOT / "docs" / "lint-precision.md"
CORPUS_RUNS = ROOT / "benchmarks" / "results" / "corpus-torch2.13.0-transformers5.23.0.jsonl"
CORPUS_RESULT = ROOT / "benchmarks" / "results" / "lint-corpus.json"
TORCH = "2.13"
# The rules lint looks for (torchmend/lint/checks.py, optimizers.py); the others only a run can show.
STATIC = {"TM101", "TM102", "TM103", "TM104", "TM105", "TM108", "TM109", "TM110", "TM201", "TM202", "TM203"}
STATIC |= {"TM206", "TM208"}

Key = tuple[str, str, int]
# confidence -> [TP, FP] of lint's findings, for the fixtures and scenarios ("cases") and the corpus
BY_CONFIDENCE: dict[str, dict[str, list[int]]] = {
    "cases": defaultdict(lambda: [0, 0]),
    "corpus": defaultdict(lambda: [0, 0]),
}  # rule, file (relative to the case's folder), line


def _key(item: dict) -> Key | None:
    if rules.BY_CODE[item["rule"]].informational:
        return None
    if "from" in item:  # a library finding: the project line that reached it
        file, line = item["from"].rsplit(":", 1)
        return item["rule"], file, int(line)
    return item["rule"], item["file"], int(item["line"])


def _observed(finding: dict, folder: Path) -> dict:
    """A scan JSON finding in expected.json's shape."""
    item = {"rule": finding["rule"], "file": os.path.relpath(finding["path"], folder), "line": finding["line"]}
    if finding["where"] != "project" and finding.get("user_frame"):
        item["file"] = "<library>/" + finding["path"].split("site-packages/")[-1]
        uf = finding["user_frame"]
        item["from"] = f"{os.path.relpath(uf['path'], folder)}:{uf['line']}"
    return item


def record() -> None:
    """Scan every scenario script once (aot_eager, 12 steps) and keep its findings."""
    found: dict[str, list[dict]] = {}
    for script in sorted(SCENARIOS.glob("*/*.py")):
        name = f"{script.parent.name}/{script.name}"
        print(f"scanning {name}", file=sys.stderr, flush=True)
        done = subprocess.run(
            [sys.executable, "-m", "torchmend", "scan", str(script), "--backend", "aot_eager", "--steps", "12"]
            + ["--timeout", "300", "--format", "json"],
            capture_output=True,
            text=True,
            cwd=ROOT,
        )
        report = json.loads(done.stdout)
        found[name] = [_observed(f, script.parent) for f in report["findings"]]
    RECORDED.write_text(json.dumps({"torch": TORCH, "backend": "aot_eager", "steps": 12, "findings": found}, indent=1))


def cases() -> list[tuple[str, Path, list[Path], list[dict]]]:
    """(name, folder, paths to lint, runtime findings) for every fixture and scenario script."""
    out = []
    for folder in sorted(p for p in SCAN_FIXTURES.iterdir() if (p / "expected.json").exists()):
        expected = json.loads((folder / "expected.json").read_text()).get(TORCH, [])
        out.append((f"fixtures/scan/{folder.name}", folder, [folder], expected))
    recorded = json.loads(RECORDED.read_text())["findings"]
    for name, found in sorted(recorded.items()):
        script = SCENARIOS / name
        out.append((f"benchmarks/scenarios/{name}", script.parent, [script], found))
    return out


def _tally(counts: dict[str, list[int]], lint: set[Key], scan: set[Key]) -> None:
    for rule, _file, _line in lint & scan:
        counts[rule][0] += 1
    for rule, _file, _line in lint - scan:
        counts[rule][1] += 1
    for rule, _file, _line in scan - lint:
        counts[rule][2] += 1


def _shown(lint: set[Key], sure: dict[Key, str]) -> set[Key]:
    """What lint's default output holds: the likely findings (possible ones need --show-possible)."""
    return {k for k in lint if sure.get(k) != "possible"}


# Counts of lint with --show-possible (every finding it makes), beside the default output's.
ALL_COUNTS: dict[str, dict[str, list[int]]] = {
    "cases": defaultdict(lambda: [0, 0, 0]),
    "corpus": defaultdict(lambda: [0, 0, 0]),
}


def measure() -> tuple[dict[str, list[int]], list[str]]:
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])  # TP, FP, FN
    by_confidence = BY_CONFIDENCE["cases"]
    notes = []
    for name, folder, paths, runtime in cases():
        result = lint_paths(paths, folder, cache=False)
        lint = {(f.rule, f.file, f.line) for f in result.findings if not rules.BY_CODE[f.rule].informational}
        sure = {(f.rule, f.file, f.line): f.confidence or "" for f in result.findings}
        scan = {k for k in map(_key, runtime) if k is not None}
        if len(paths) == 1 and paths[0].is_file():  # a scenario: its own script's findings only
            scan = {k for k in scan if k[1] == paths[0].name}
        for key in lint:
            by_confidence[sure.get(key, "")][0 if key in scan else 1] += 1
        _tally(ALL_COUNTS["cases"], lint, scan)
        lint = _shown(lint, sure)
        _tally(counts, lint, scan)
        for rule, file, line in sorted(lint - scan):
            notes.append(f"FP {rule} {name}: {file}:{line} ({sure.get((rule, file, line), '')})")
        for rule, file, line in sorted(scan - lint):
            notes.append(f"FN {rule} {name}: {file}:{line}")
    return counts, notes


def corpus(transformers: Path, scratch: Path) -> None:
    """Lint the model classes of the corpus benchmark (benchmarks/corpus: real `transformers` code, scanned on
    aot_eager) and compare with what those scans found: a copy of the package in a scratch project, and per model
    a script `model = torch.compile(ModelClass(config))` (the corpus script builds the class by name, which no
    static reading can follow). Models whose fix was written are left out: their remaining findings carry the
    patched file's lines."""
    import shutil

    from torchmend.lint.analyse import Recording, lint_entry

    rows = {}
    for line in CORPUS_RUNS.read_text().splitlines():
        row = json.loads(line)
        if not (row.get("written") or {}).get("files"):
            rows[row["model"]] = row
    if not (scratch / "transformers").exists():
        shutil.copytree(transformers, scratch / "transformers", ignore=shutil.ignore_patterns("__pycache__"))
    from torchmend.lint.analyse import installed_torch

    ctx = Recording(
        str(scratch), lambda p: Path(p).read_text(encoding="utf-8"), whole_files=True, torch_version=installed_torch()
    )
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    notes = []
    by_confidence = BY_CONFIDENCE["corpus"]
    models = same_line = total_lint = 0
    for name, row in sorted(rows.items()):
        defined = [p for p in (scratch / "transformers" / "models").glob("*/modeling_*.py")]
        defined = [p for p in defined if f"class {name}(" in p.read_text(encoding="utf-8")]
        if not defined:
            notes.append(f"skipped {name}: no modeling file defines it")
            continue
        module = ".".join(defined[0].relative_to(scratch).with_suffix("").parts)
        script = scratch / f"train_{name}.py"
        script.write_text(
            f"import torch\nfrom {module} import {name}\n\n\ndef main(config):\n"
            f"    model = torch.compile({name}(config))\n    return model\n"
        )
        made = lint_entry(ctx, script, str(scratch))
        found = {(f.rule, f.file, f.line) for f in made}
        sure = {(f.rule, f.file, f.line): f.confidence or "" for f in made}
        lint = {k for k in found if not rules.BY_CODE[k[0]].informational}
        scan = set()
        for f in row.get("left", []):
            item = {"rule": f["rule"], "file": f["file"], "line": f["line"]}
            if f["where"] != "project" and f.get("user_frame"):
                item["from"] = f"{f['user_frame']['file']}:{f['user_frame']['line']}"
            key = _key(item)
            if key is not None and not key[1].startswith("train_model"):
                scan.add(key)
        models += 1
        scan_lines = {(file, line) for _, file, line in scan}
        same_line += sum((file, line) in scan_lines for _, file, line in lint)
        total_lint += len(lint)
        for key in lint:
            by_confidence[sure.get(key, "")][0 if key in scan else 1] += 1
        _tally(ALL_COUNTS["corpus"], lint, scan)
        lint = _shown(lint, sure)
        _tally(counts, lint, scan)
        for rule, file, line in sorted(lint - scan):
            notes.append(f"FP {rule} {name}: {file}:{line} ({sure.get((rule, file, line), '')})")
        for rule, file, line in sorted(scan - lint):
            notes.append(f"FN {rule} {name}: {file}:{line}")
    kept = {
        "models": models,
        "counts": counts,
        "counts_all": ALL_COUNTS["corpus"],
        "notes": notes,
        "same_line": same_line,
        "lint_findings": total_lint,
        "by_confidence": by_confidence,
    }
    CORPUS_RESULT.write_text(json.dumps(kept, indent=1))


def _ratio(a: int, b: int) -> str:
    return f"{a / b:.2f}" if b else "—"


def confidence_line(tally: dict[str, list[int]]) -> str:
    parts = [
        f"{conf or 'none'}: {tp} TP, {fp} FP, precision {_ratio(tp, tp + fp)}"
        for conf, (tp, fp) in sorted(tally.items())
    ]
    return "By confidence: " + "; ".join(parts) + "."


def table(counts: dict[str, list[int]]) -> str:
    lines = [
        "| rule | name | lint looks for it | TP | FP | FN | precision | recall |",
        "|---|---|---|---:|---:|---:|---:|---:|",
    ]
    total = [0, 0, 0]
    static = [0, 0, 0]
    for rule in sorted(counts):
        tp, fp, fn = counts[rule]
        looks = rule in STATIC
        lines.append(
            f"| {rule} | {rules.BY_CODE[rule].name} | {'yes' if looks else 'no'} | {tp} | {fp} | {fn} "
            f"| {_ratio(tp, tp + fp)} | {_ratio(tp, tp + fn)} |"
        )
        for acc in (total, static) if looks else (total,):
            for i, n in enumerate((tp, fp, fn)):
                acc[i] += n
    for label, (tp, fp, fn) in (("rules lint looks for", static), ("all rules", total)):
        lines.append(f"| **{label}** | | | {tp} | {fp} | {fn} | {_ratio(tp, tp + fp)} | {_ratio(tp, tp + fn)} |")
    return "\n".join(lines)


def _corpus_section() -> str:
    if not CORPUS_RESULT.exists():
        return ""
    kept = json.loads(CORPUS_RESULT.read_text())
    notes = "\n".join(f"- {n}" for n in kept["notes"]) or "- none"
    return f"""
## On real model code: the corpus

The same comparison on `transformers` 5.23.0 model classes, against the scans of the corpus benchmark
(benchmarks/corpus, aot_eager, torch 2.13: {CORPUS_RUNS.name}), {kept["models"]} models (those whose fix was
written are left out: their recorded findings carry the patched lines). Lint reads a copy of the package with one
script per model, `model = torch.compile(ModelClass(config))`. Measured with:

    .venv/bin/python benchmarks/lint_vs_scan.py --corpus /work/corpus/venv/lib/python3.11/site-packages/transformers

Lint's default output (its likely findings; `possible` ones are shown only with `--show-possible`):

{table(kept["counts"])}

With `--show-possible` (every finding lint makes):

{table(kept.get("counts_all", kept["counts"]))}

{confidence_line(kept.get("by_confidence", {}))}

{kept["same_line"]} of the {kept["lint_findings"]} findings lint makes here are on a line where the scan reported a
graph break or recompile under some rule. Some of those scans were made by torchmend before TM109 and TM110 had
rules of their own (they were TM199 then), which the strict comparison above counts as one FP and one FN. The
other disagreements are mostly code that only some configurations run (LayerDrop and SpecAugment masking are off
in the corpus's small configs, so a `torch.rand([]) < self.layerdrop` branch never runs), which a static reading
cannot tell from code that runs. Lint also reads every class a module may hold (`self.encoder = A(config)` in one
arm of an if/else, `B(config)` in the other; `self.adapter = Adapter(config) if config.add_adapter else None`): the
class the corpus's config builds agrees with the scan; what lint finds in the one it does not build counts as FP.

{notes}
"""


def page(counts: dict[str, list[int]], notes: list[str]) -> str:
    n = len(cases())
    return f"""# How often `torchmend lint` agrees with `torchmend scan`

`lint` reads the source and runs nothing; `scan` runs the script and reports what PyTorch did. This page compares
the two on {n} cases: every scan fixture (`fixtures/scan/*/`, the findings its `expected.json` lists for torch
{TORCH}) and every benchmark scenario (`benchmarks/scenarios/*/broken.py` and `hand.py`, scanned on aot_eager for
12 steps, kept in `benchmarks/results/lint-scan-scenarios.json`). A finding is the same when rule, file and line
agree; a finding scan makes inside a library counts at the project line that reached it. Informational findings
(TM9xx) are left out.

Measured with:

    .venv/bin/python benchmarks/lint_vs_scan.py

Lint's default output (its likely findings; `possible` ones are shown only with `--show-possible`):

{table(counts)}

With `--show-possible` (every finding lint makes):

{table(ALL_COUNTS["cases"])}

{confidence_line(BY_CONFIDENCE["cases"])}

TP: both report it. FP: lint alone (a static guess the run did not confirm). FN: scan alone. "lint looks for it":
whether lint has a check for that rule at all; the others (a changing input shape, a recompile limit reached, a
number carried across a graph break, a dtype that changes, a backend that fails) depend on values only a run sees:
`torchmend scan SCRIPT` finds them. The clean-code shapes (`fixtures/lint/nanogpt_shape` and `mingpt_shape`:
nanoGPT- and minGPT-shaped training scripts, and the scenarios' `hand.py`) get no finding;
tests/unit/test_lint_engine.py checks both.

## Every disagreement (default output)

{chr(10).join(f"- {n}" for n in notes) or "- none"}
{_corpus_section()}"""


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--record", action="store_true", help="scan the scenarios again first (minutes)")
    parser.add_argument("--corpus", type=Path, help="the installed transformers package: measure the corpus too")
    parser.add_argument("--scratch", type=Path, default=Path("/tmp/torchmend-lint-corpus"), help="for --corpus")
    args = parser.parse_args(argv)
    if args.record:
        record()
    if args.corpus:
        corpus(args.corpus, args.scratch)
    counts, notes = measure()
    PAGE.write_text(page(counts, notes))
    print(table(counts))
    print(f"wrote {PAGE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
