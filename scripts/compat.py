"""The torch version matrix (`python3 dev.py compat VERSION`): record the scan fixtures, keep each run's results,
and generate docs/compat.md from them.

    python scripts/compat.py record 2.15          # scan every fixture on the installed torch; keep its events in
                                                  # fixtures/recorded/torch-2.15/ and its findings in
                                                  # benchmarks/results/compat/record-2.15.json
    python scripts/compat.py expect 2.15          # write those findings into fixtures/scan/*/expected.json as "2.15"
    python scripts/compat.py result 2.15 JUNIT --seconds S --command CMD --workers N
                                                  # one matrix run's outcomes -> benchmarks/results/compat/torch-2.15.json
    python scripts/compat.py table [--check]      # docs/compat.md from those files

`record` and `result` run under the matrix venv's python (they read its torch); `expect` and `table` need only
the standard library and this checkout.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SCAN_FIXTURES = ROOT / "fixtures" / "scan"
RECORDED = ROOT / "fixtures" / "recorded"
RESULTS = ROOT / "benchmarks" / "results" / "compat"
DOC = ROOT / "docs" / "compat.md"
VERSIONS = ("2.11", "2.13", "2.14", "2.15")
SCAN_TEST = "test_scan_reports_expected_findings"
FIX_TEST = "test_rewrite_removes_what_it_targets"


def fixtures() -> list[str]:
    return sorted(p.name for p in SCAN_FIXTURES.iterdir() if (p / "expected.json").exists())


def torch_version() -> str:
    import torch

    return str(torch.__version__)


def observed(findings: list[dict[str, Any]], fixture_dir: Path) -> list[dict[str, Any]]:
    """Scan JSON findings in the shape expected.json keeps them (the same as tests/conftest.py's observed())."""
    out = []
    for f in findings:
        item: dict[str, Any] = {"rule": f["rule"]}
        if f["where"] == "project":
            item["file"] = os.path.relpath(f["path"], fixture_dir)
        else:
            item["file"] = "<library>/" + f["path"].split("site-packages/")[-1]
        item["line"], item["count"] = f["line"], f["count"]
        if f["where"] != "project":
            uf = f["user_frame"]
            item["from"] = f"{os.path.relpath(uf['path'], fixture_dir)}:{uf['line']}"
        out.append(item)
    return sorted(out, key=lambda d: json.dumps(d, sort_keys=True))


def _record_one(name: str, out_dir: Path) -> dict[str, Any]:
    fixture_dir = SCAN_FIXTURES / name
    with tempfile.TemporaryDirectory(prefix="torchmend-compat-") as tmp:
        events = Path(tmp) / "events"
        started = time.monotonic()
        # What tests/conftest.py's scan_json runs: the same command, from the checkout's root
        cmd = [sys.executable, "-m", "torchmend", "scan", str(fixture_dir / "train.py"), "--backend", "aot_eager"]
        cmd += ["--format", "json", "--timeout", "300", "--keep-events", str(events)]
        proc = subprocess.run(
            cmd,
            cwd=ROOT,
            env=dict(os.environ, COLUMNS="200", NO_COLOR="1"),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=900,
        )
        seconds = time.monotonic() - started
        if not (events / "events.jsonl").exists():
            return {"name": name, "returncode": proc.returncode, "error": proc.stderr[-3000:]}
        shutil.copy(events / "events.jsonl", out_dir / f"{name}.jsonl")
    try:
        report = json.loads(proc.stdout)
    except json.JSONDecodeError:
        return {"name": name, "returncode": proc.returncode, "error": proc.stderr[-3000:]}
    return {
        "name": name,
        "returncode": proc.returncode,
        "seconds": round(seconds, 1),
        "ended_by": report["summary"]["ended_by"],
        "findings": observed(report["findings"], fixture_dir.resolve()),
    }


def record(version: str, workers: int) -> int:
    installed = torch_version()
    if not installed.startswith(version + "."):
        print(f"torch {installed} is installed, not {version}", file=sys.stderr)
        return 2
    out_dir = RECORDED / f"torch-{version}"
    out_dir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with ThreadPoolExecutor(workers) as pool:
        runs = list(pool.map(lambda n: _record_one(n, out_dir), fixtures()))
    for r in runs:
        state = r.get("error") or f"{r['ended_by']}, {len(r['findings'])} findings, {r['seconds']} s"
        print(f"{r['name']}: {state}", flush=True)
    summary = {
        "torch": installed,
        "python": platform.python_version(),
        "backend": "aot_eager",
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
        "seconds": round(time.monotonic() - started),
        "workers": workers,
        "runs": runs,
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"record-{version}.json").write_text(json.dumps(summary, indent=1) + "\n")
    return 1 if any("error" in r for r in runs) else 0


def _key(finding: dict[str, Any]) -> str:
    return json.dumps(finding, sort_keys=True)


def dump_expected(data: dict[str, Any]) -> str:
    """expected.json as the fixtures keep it: one finding a line."""
    lines = []
    for key, value in data.items():
        if isinstance(value, list):
            if not value:
                lines.append(f"  {json.dumps(key)}: []")
            else:
                items = ",\n".join(f"    {json.dumps(item)}" for item in value)
                lines.append(f"  {json.dumps(key)}: [\n{items}\n  ]")
        else:
            lines.append(f"  {json.dumps(key)}: {json.dumps(value)}")
    return "{\n" + ",\n".join(lines) + "\n}\n"


def expect(version: str, replace: bool) -> int:
    summary = json.loads((RESULTS / f"record-{version}.json").read_text())
    for run in summary["runs"]:
        if "error" in run:
            print(f"{run['name']}: no findings recorded ({run['error'][-200:]})", file=sys.stderr)
            continue
        path = SCAN_FIXTURES / run["name"] / "expected.json"
        data = json.loads(path.read_text())
        if version in data and not replace:
            if sorted(map(_key, data[version])) != sorted(map(_key, run["findings"])):
                print(f"{run['name']}: the recording differs from expected.json's {version!r} entry (kept; --replace)")
            continue
        if data.get("ended_by", "finished") != run["ended_by"]:
            print(f"{run['name']}: ended by {run['ended_by']} on {version}, not {data.get('ended_by', 'finished')}")
        data[version] = run["findings"]
        path.write_text(dump_expected(data))
    return 0


def result(
    version: str, junit: Path, seconds: float, command: str, workers: int, elsewhere: dict[str, str | None]
) -> int:
    """One matrix run's outcomes; `elsewhere` names the torch, Python and machine of a run made on another machine
    (the JUnit XML brought back from it), which this interpreter cannot read."""
    tests: dict[str, str] = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        outcome = "passed"
        for child in case:
            if child.tag in ("failure", "error"):
                outcome = "failed"
            elif child.tag == "skipped":
                outcome = "skipped"
        tests[case.get("name", "")] = outcome
    suite = ET.parse(junit).getroot()
    suite = suite if suite.tag == "testsuite" else suite.find("testsuite") or suite
    data = {
        "torch": elsewhere.get("torch") or torch_version(),
        "python": elsewhere.get("python") or platform.python_version(),
        "machine": elsewhere.get("machine") or f"{platform.machine()}, {os.cpu_count()} CPUs",
        "date": (suite.get("timestamp") or time.strftime("%Y-%m-%d", time.gmtime()))[:10],
        "command": command,
        "workers": workers,
        "seconds": seconds,
        "tests": dict(sorted(tests.items())),
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"torch-{version}.json").write_text(json.dumps(data, indent=1) + "\n")
    return table(check=False)


def _rules(findings: list[dict[str, Any]]) -> str:
    codes = sorted({f["rule"] for f in findings})
    return " ".join(codes) if codes else "none"


def _gb_ids(version: str) -> dict[str, set[str]]:
    """fixture -> the graph-break ids its recording on `version` names (in the break texts' documentation links)."""
    out = {}
    for path in sorted((RECORDED / f"torch-{version}").glob("*.jsonl")):
        out[path.stem] = {m.upper() for m in re.findall(r"\b(gb\d{4})\.html", path.read_text(), re.IGNORECASE)}
    return out


def _short(f: dict[str, Any]) -> str:
    where = f"{f['file'].removeprefix('<library>/')}:{f['line']}"
    return f"{f['rule']} {where} ×{f['count']}" + (f" (from {f['from']})" if "from" in f else "")


def render() -> str:
    runs = {v: json.loads(p.read_text()) for v in VERSIONS if (p := RESULTS / f"torch-{v}.json").exists()}
    recorded = {v: {p.stem for p in (RECORDED / f"torch-{v}").glob("*.jsonl")} for v in VERSIONS}
    out = [
        "# Torch versions: what torchmend finds and fixes on each",
        "",
        "<!-- generated by scripts/compat.py from benchmarks/results/compat/*.json, fixtures/scan/*/expected.json and",
        "     fixtures/recorded/: do not edit by hand -->",
        "",
        "Each row is a scan fixture (`fixtures/scan/NAME/train.py`), each column a torch release. **found** is the rules",
        "`torchmend scan --backend aot_eager` reports on that release (its `expected.json` entry): ✓ where the matrix",
        "run's live scan gave exactly those findings, ✗ where it did not, *rec* where the figure comes from the",
        "recorded events only (`fixtures/recorded/torch-VERSION/`, classified by the unit tier). **fixed** is the",
        "codemod end-to-end test of the fixtures that have one (`tests/e2e/test_codemods_e2e.py`: every proposal",
        "accepted, the patched script re-run, the targeted findings gone, losses and final weights unchanged).",
        "",
        "pyproject.toml asks for `torch>=2.11` with no upper bound: no release from 2.11 to 2.15 was found incompatible.",
        "CI runs the 2.13 CPU build (`python3 dev.py test`); the other columns are this matrix's runs. Times are wall",
        "clock; the 2-CPU runs shared their machine with other jobs (load average 5 to 10), so read them as upper bounds.",
        "",
        "| torch | run on | tests | time | command |",
        "|---|---|---|---|---|",
    ]
    for v in VERSIONS:
        if v in runs:
            r = runs[v]
            counts: dict[str, int] = {}
            for outcome in r["tests"].values():
                counts[outcome] = counts.get(outcome, 0) + 1
            tally = ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
            when = f"{r['machine']}, Python {r['python']}, {r['date']}"
            minutes = f"{r['seconds'] / 60:.1f} min ({r['workers']} workers)"
            rec = RESULTS / f"record-{v}.json"
            if rec.exists():
                made = json.loads(rec.read_text())
                minutes += f"; recording first: {made['seconds'] / 60:.1f} min ({made['workers']} workers)"
            out.append(f"| {r['torch']} | {when} | {tally} | {minutes} | `{r['command']}` |")
        elif recorded[v]:
            out.append(f"| {v} | not run here: recordings only ({len(recorded[v])} fixtures) | — | — | — |")
    out += ["", "| fixture | " + " | ".join(VERSIONS) + " |", "|---|" + "---|" * len(VERSIONS)]
    for name in fixtures():
        expected = json.loads((SCAN_FIXTURES / name / "expected.json").read_text())
        cells = []
        for v in VERSIONS:
            if v not in expected:
                cells.append("—")
                continue
            cell = "found " + _rules(expected[v])
            tests = runs.get(v, {}).get("tests", {})
            scan = tests.get(f"{SCAN_TEST}[{name}]")
            if scan is not None:
                cell += {"passed": " ✓", "failed": " ✗", "skipped": " (skipped)"}[scan]
            elif name in recorded[v]:
                cell += " *rec*"
            fix = tests.get(f"{FIX_TEST}[{name}]")
            if fix is not None:
                cell += {"passed": "; fixed ✓", "failed": "; fix ✗", "skipped": "; fix skipped"}[fix]
            cells.append(cell)
        out.append(f"| {name} | " + " | ".join(cells) + " |")
    out += [
        "",
        "## What differs between releases",
        "",
        "Findings (rule, file, line, count; a library finding's line is torch's own) that one release reports and the",
        "release before it in this table does not, from the `expected.json` entries; a rule set that stays the same can",
        "still move a line or change a count.",
        "",
    ]
    for name in fixtures():
        expected = json.loads((SCAN_FIXTURES / name / "expected.json").read_text())
        had = [v for v in VERSIONS if v in expected]
        for before, after in zip(had, had[1:]):
            key = lambda d: json.dumps(d, sort_keys=True)  # noqa: E731
            old_set = {key(f) for f in expected[before]}
            new_set = {key(f) for f in expected[after]}
            if old_set == new_set:
                continue
            gone = [_short(json.loads(k)) for k in sorted(old_set - new_set)]
            came = [_short(json.loads(k)) for k in sorted(new_set - old_set)]
            out.append(
                f"- {name}, {before} → {after}: "
                + "; ".join(
                    [*(f"{f} → gone" for f in gone if not came), *(f"new {f}" for f in came if not gone)]
                    + ([f"{', '.join(gone)} → {', '.join(came)}"] if gone and came else [])
                )
            )
    out += [
        "",
        "## Graph-break ids in the recordings",
        "",
        "The ids PyTorch gave the breaks of every scan fixture (`fixtures/recorded/`), and where a release gave a break",
        "another id: the rule must not depend on which one.",
        "",
    ]
    ids = {v: _gb_ids(v) for v in VERSIONS}
    for v in VERSIONS:
        if ids[v]:
            seen = sorted({gb for found in ids[v].values() for gb in found})
            out.append(f"- {v}: {' '.join(seen)}")
    for name in fixtures():
        had = [v for v in VERSIONS if name in ids[v]]
        for before, after in zip(had, had[1:]):
            lost = " ".join(sorted(ids[before][name] - ids[after][name]))
            new = " ".join(sorted(ids[after][name] - ids[before][name]))
            if lost or new:
                out.append(f"- {name}, {before} → {after}: {lost or 'nothing'} → {new or 'none'}")
    out += [
        "",
        "Which figure is from which release: a column's findings are that release's own (its `expected.json` key),",
        "never carried over from another. torch 2.11 cannot be installed on the development machine: its column comes",
        "from the GPU machine (torch 2.11.0+cu130), its recordings and the live scans listed above; that machine has no",
        "libcst and no package index, so the codemod end-to-end tests (fixed) have not run on 2.11. Regenerate with",
        "`python3 scripts/compat.py table`; `python3 dev.py compat VERSION` runs a row and regenerates it.",
        "",
    ]
    return "\n".join(out)


def table(check: bool) -> int:
    text = render()
    if check:
        if not DOC.exists() or DOC.read_text() != text:
            print(f"{DOC.relative_to(ROOT)} is out of date: python3 scripts/compat.py table", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(text)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="job", required=True)
    p = sub.add_parser("record")
    p.add_argument("version", choices=VERSIONS)
    p.add_argument("--workers", type=int, default=int(os.environ.get("TORCHMEND_COMPAT_WORKERS", "2")))
    p = sub.add_parser("expect")
    p.add_argument("version", choices=VERSIONS)
    p.add_argument("--replace", action="store_true", help="replace an existing entry for that version")
    p = sub.add_parser("result")
    p.add_argument("version", choices=VERSIONS)
    p.add_argument("junit", type=Path)
    p.add_argument("--seconds", type=float, required=True)
    p.add_argument("--command", required=True)
    p.add_argument("--workers", type=int, required=True)
    p.add_argument("--torch", help="the run's torch, where it ran elsewhere")
    p.add_argument("--python", help="the run's Python version, where it ran elsewhere")
    p.add_argument("--machine", help="the machine it ran on, where it ran elsewhere")
    p = sub.add_parser("table")
    p.add_argument("--check", action="store_true")
    args = parser.parse_args(argv)
    if args.job == "record":
        return record(args.version, args.workers)
    if args.job == "expect":
        return expect(args.version, args.replace)
    if args.job == "result":
        elsewhere = {"torch": args.torch, "python": args.python, "machine": args.machine}
        return result(args.version, args.junit, args.seconds, args.command, args.workers, elsewhere)
    return table(args.check)


if __name__ == "__main__":
    sys.exit(main())
