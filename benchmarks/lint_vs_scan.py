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
ZOO_RUNS = [
    ROOT / "benchmarks" / "results" / "zoo-baseline-torch2.11-transformers5.23.0.jsonl",
    ROOT / "benchmarks" / "results" / "zoo-fix-9ef8705-torch2.11-transformers5.23.0.jsonl",
]
# The full scans (user frames of library findings) of the zoo models that break, from the a12ac11 sweep.
ZOO_SCANS = ROOT / "benchmarks" / "results" / "zoo-fix-a12ac11-torch2.11-transformers5.23.0-scans.tgz"
CORPUS_LISTS = ROOT / "benchmarks" / "corpus"
ZOO_TORCH = (2, 11)  # the zoo's scans ran on torch 2.11: lint judges the source for the same release
CORPUS_RESULT = ROOT / "benchmarks" / "results" / "lint-corpus.json"
TORCH = "2.13"
# The rules lint looks for (torchmend/lint/checks.py, dynamic.py, module_state.py, optimizers.py); the others only a
# run can show.
STATIC = {"TM101", "TM102", "TM103", "TM104", "TM105", "TM108", "TM109", "TM110", "TM111", "TM201", "TM202", "TM203"}
STATIC |= {"TM199", "TM206", "TM208", "TM209"}

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


def _evaluation_files(transformers: Path) -> tuple[set[str], set[Path]]:
    """The evaluation models (never measured here) and the modeling files that define them: a zoo model defined
    in one of those files is left out too (FlaubertWithLMHeadModel beside FlaubertModel)."""
    names: set[str] = set()
    for lst in ("models-eval.txt", "models-eval-26.txt"):
        for line in (CORPUS_LISTS / lst).read_text().splitlines():
            if line.strip() and not line.startswith("#"):
                names.add(line.split()[0])
    files = {p for p in _defining(transformers) if names & _classes(p)}
    return names, files


def _defining(transformers: Path) -> list[Path]:
    return sorted((transformers / "models").glob("*/modeling_*.py"))


def _classes(path: Path) -> set[str]:
    import re

    return set(re.findall(r"^class (\w+)\(", path.read_text(encoding="utf-8"), re.M))


def _zoo_truth() -> dict[str, set[Key]]:
    """Per zoo model, what its scans (train and eval mode) found, keyed as lint's findings are; a library finding
    at the project line that reached it (the full scans of the sweep carry it; the .jsonl's short list does not)."""
    import io
    import tarfile

    truth: dict[str, set[Key]] = {}
    for runs in ZOO_RUNS:
        for line in runs.read_text().splitlines():
            row = json.loads(line)
            if row["status"] not in ("clean", "ok") or row.get("use") != "vendored":
                continue
            keys = truth.setdefault(row["model"], set())
            for f in row.get("found", []):
                key = _key({"rule": f["rule"], "file": f["file"], "line": f["line"]})
                if key is not None:
                    keys.add(key)
    full: dict[str, set[Key]] = {}
    with tarfile.open(ZOO_SCANS) as tar:
        for member in tar.getmembers():
            if not member.name.endswith(".before.json"):
                continue
            model = member.name.rsplit("/", 1)[-1].split(".")[0]
            report = json.load(io.TextIOWrapper(tar.extractfile(member)))  # type: ignore[arg-type]
            keys = full.setdefault(model, set())
            for f in report["findings"]:
                item = {"rule": f["rule"], "file": _in_project(f["path"]), "line": f["line"]}
                if f["where"] != "project" and f.get("user_frame"):
                    item["from"] = f"{_in_project(f['user_frame']['path'])}:{f['user_frame']['line']}"
                key = _key(item)
                if key is not None:
                    keys.add(key)
    for model, keys in full.items():
        if model in truth:
            truth[model] = keys | {k for k in truth[model] if not k[1].startswith("/")}
    return truth


def _in_project(path: str) -> str:
    return path.split("/project/", 1)[-1] if "/project/" in path else path


def corpus(transformers: Path, scratch: Path, only: set[str] | None = None) -> None:
    """Lint the zoo's model classes (benchmarks/corpus/models-zoo.txt: real `transformers` code, scanned on
    aot_eager, torch 2.11, train and eval mode) and compare with what those scans found: a copy of the package in
    a scratch project, and per model a script `model = torch.compile(ModelClass(config))` (the corpus script builds
    the class by name, which no static reading can follow). The evaluation models, and every model their modeling
    files define, are left out."""
    import shutil

    from torchmend.lint.analyse import Recording, lint_entry

    if not (scratch / "transformers").exists():
        shutil.copytree(transformers, scratch / "transformers", ignore=shutil.ignore_patterns("__pycache__"))
    truth = _zoo_truth()
    evaluation, eval_files = _evaluation_files(scratch / "transformers")
    where: dict[str, Path] = {}
    for path in _defining(scratch / "transformers"):
        for name in _classes(path):
            where.setdefault(name, path)
    ctx = Recording(
        str(scratch), lambda p: Path(p).read_text(encoding="utf-8"), whole_files=True, torch_version=ZOO_TORCH
    )
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    notes = []
    by_confidence = BY_CONFIDENCE["corpus"]
    models = same_line = total_lint = left_out = 0
    for name, scan in sorted(truth.items()):
        if name in evaluation or where.get(name) in eval_files:
            left_out += 1
            continue
        if only and name not in only:
            continue
        if name not in where:
            notes.append(f"skipped {name}: no modeling file defines it")
            continue
        module = ".".join(where[name].relative_to(scratch).with_suffix("").parts)
        script = scratch / f"train_{name}.py"
        script.write_text(
            f"import torch\nfrom {module} import {name}\n\n\ndef main(config):\n"
            f"    model = torch.compile({name}(config))\n    return model\n"
        )
        made = lint_entry(ctx, script, str(scratch))
        found = {(f.rule, f.file, f.line) for f in made}
        sure = {(f.rule, f.file, f.line): f.confidence or "" for f in made}
        lint = {k for k in found if not rules.BY_CODE[k[0]].informational}
        scan = {k for k in scan if not k[1].startswith("train_model")}
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
        "left_out": left_out,
        "torch": ".".join(map(str, ZOO_TORCH)),
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
## On real model code: the zoo

The same comparison on `transformers` 5.23.0 model classes: the zoo of the corpus benchmark
(benchmarks/corpus/models-zoo.txt, the dev set in it), {kept["models"]} models, against what their scans found
(aot_eager, 3 steps, train and eval mode, torch {kept.get("torch", "2.11")}:
{", ".join(p.name for p in ZOO_RUNS)}, and the full scans of the models that break,
{ZOO_SCANS.name}, for the project line a library finding was reached from). The evaluation models
(models-eval.txt, models-eval-26.txt) and every model their modeling files define ({kept.get("left_out", 0)}) are
left out. Lint reads a copy of the package with one script per model, `model = torch.compile(ModelClass(config))`,
and judges the source for the scans' torch release (2.11: a tensor `assert` breaks there). Measured with:

    .venv/bin/python benchmarks/lint_vs_scan.py --corpus /work/corpus/venv/lib/python3.11/site-packages/transformers

Lint's default output (its likely findings; `possible` ones are shown only with `--show-possible`):

{table(kept["counts"])}

With `--show-possible` (every finding lint makes):

{table(kept.get("counts_all", kept["counts"]))}

{confidence_line(kept.get("by_confidence", {}))}

{kept["same_line"]} of the {kept["lint_findings"]} findings lint makes here are on a line where the scan reported a
graph break or recompile under some rule.

What decides these numbers (issue 30): most model code is reached only under some configurations or inputs, and the
scans run one configuration (the config class's defaults at a small size) with `input_ids` (and an all-ones
`attention_mask` where the model takes one). Lint reports as
possible, not likely, what the default configuration does not run (it reads the defaults: `layerdrop: float = 0.0`
in the config class, `self.quant = False` in `__init__`), the class `__init__` does not build by default
(`A(config) if config.do_stable_layer_norm else B(config)`), what runs past an early `return` under such a setting,
and what runs only for callers that pass an optional input (`if pixel_values is not None:`: the vision towers of
the multimodal models, `.tolist()` of image sizes). What the defaults turn on (SpecAugment's `mask_time_prob: float
= 0.05`, LayerDrop's `encoder_layerdrop = 0.05`) is likely, and those are most of the true positives. After a
likely break inside a loop nothing more of that function is reported (dynamo runs the rest of it eagerly, so a
later `.max()` on a NumPy array never breaks). Code on the None side of a parameter every call gives a value is
possible (`get_masks(..., padding_mask=attention_mask)`: its length `assert` runs only for callers with no mask;
the attention interface's warning for an implementation of None), and so is the `forward` of a class whose
decorator replaces `forward` (`@use_experts_implementation`: a setting picks the experts' implementation).

Lint judges a release as the release behaves (analysis/dynamo_tables.py, measured on 2.13.0, 2.14.1, 2.15.0 with
aot_eager; 2.11 from these scans): a tensor `assert` breaks before 2.13; a registered buffer or a submodule cast in
forward (`self.pos_encoding = self.pos_encoding.to(...)`, `self.classifier = self.classifier.to(dtype)`) breaks
before 2.13 (TM103, TM199); `copy.copy` is skipped before 2.13 (TM105). An operator of data-dependent output
(TM111: `nonzero()`, `torch.where(mask)`, a read through a boolean mask, `.tolist()`) breaks on every release, and a
tensor method called on such an argument (`h.masked_scatter(m, norm(h[m]))`) is skipped after it (TM105).

What is left, in the list below: the recompiles on an argument's value inside library layers (TM202, 11: `if
position_bias is None:` of the first layer only, the `*args` of `GradientCheckpointingLayer.__call__`, the `**kwargs`
of the output-capturing and rope wrappers, `layer_type == 'sliding_attention'`): each happens when a frame that an
upstream graph break split is entered again with another value, which a static reading cannot tell from a call
that never changes; a `copy.copy` reached through `config.per_layer_config[i]` (a `__getitem__` of an object a
property returns, TM105); the Switch Transformers router and experts, built only when a per-layer flag the stack
computes from the layer index is set (`is_sparse`, unknown to the defaults: possible); the experts of
OpenAIPrivacyFilter, whose `@use_experts_implementation` the model then sends to its own forward by overriding
`get_correct_experts_implementation` (possible, as for the other decorated experts, whose loops these scans never
ran). The rules lint does not look for (TM106 a backend failure, TM204 a changing shape, TM299) need a run.

Before this round (lint at db04e4f, the same command and zoo, TM111 and TM199 not looked for): default output
20 TP, 2 FP, 17 FN (precision 0.91, recall 0.54); counted with TM111 and TM199 as rules lint looks for, 20 TP, 2 FP,
31 FN (recall 0.39). Before issue 30 (lint at ab866ba): 6 TP, 49 FP, 31 FN (precision 0.11, recall 0.16).

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
    parser.add_argument(
        "--only", help="with --corpus: these models only (comma-separated; a quick look, not a measure)"
    )
    args = parser.parse_args(argv)
    if args.record:
        record()
    if args.corpus:
        corpus(args.corpus, args.scratch, set(args.only.split(",")) if args.only else None)
    counts, notes = measure()
    PAGE.write_text(page(counts, notes))
    print(table(counts))
    print(f"wrote {PAGE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
