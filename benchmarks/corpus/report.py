"""The corpus benchmark's report: Markdown and a plot from run.py's JSON lines.

    python benchmarks/corpus/report.py benchmarks/results/corpus-torch2.13.0-transformers5.23.0.jsonl

Writes the .md and a .png beside the JSON lines file (the plot needs matplotlib, in the dev extras; without it
the Markdown is still written). The last record of a model counts (run.py --redo appends a newer one). One
section per model list (dev, eval, ...), each with its per-model table, its totals and what is left by rule and GB
id; the findings left are listed per model with torchmend's reason.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path

STATUS = {
    "ok": "breaks or recompiles",
    "clean": "compiles cleanly",
    "driver_error": "driver error: does not build or run with the generic inputs (eager)",
    "compile_error": "fails under torch.compile before any graph",
    "torchmend_failure": "torchmend failure",
    "timeout": "timed out",
}

FIX = {"not_fixable": "not fixable", "proposal": "proposed, not kept", "skipped": "nothing to fix"}  # explain.py


def load(path: Path) -> list[dict]:
    last: dict[str, dict] = {}
    for line in path.read_text().splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue
        last[rec["model"]] = rec
    return list(last.values())


def total(c: dict | None) -> int:
    return ((c or {}).get("graph_breaks") or 0) + ((c or {}).get("recompiles") or 0)


def cell(s: object, limit: int = 0) -> str:
    """Text for a table cell: one line, no pipes, cut to `limit` characters."""
    s = " ".join(str(s if s is not None else "").split()).replace("|", "\\|")
    return s[: limit - 1] + "…" if limit and len(s) > limit else s


def _ratio(c: dict, key: str) -> str:
    return "" if c.get(key) is None else f"{c[key]:.3g}"


def model_row(r: dict) -> str:
    b, a = r.get("before") or {}, r.get("after") or {}
    fix = r.get("fix") or {}
    w = r.get("written") or {}
    if b:
        counts = f"{b.get('graph_breaks')} + {b.get('recompiles')} = {total(b)}"
        after = f"{a.get('graph_breaks')} + {a.get('recompiles')} = {total(a)}" if a else "—"
    else:
        counts = after = "—"
    changes = ""
    if w.get("files"):
        rules = sorted({x.split()[0] for x in w.get("rules", [])})
        changes = f"{len(w['files'])} files, {w['lines']} lines ({', '.join(rules)})"
    verdict = fix.get("verdict") or fix.get("outcome") or ("no fix run" if b and not fix else "")
    if fix.get("numerics") and fix.get("verdict") != "refused":  # a refusal names the difference itself
        verdict += f" ({fix['numerics']})"
    if fix.get("verdict_reasons"):
        verdict += ": " + "; ".join(fix["verdict_reasons"])
    steady = ""
    if b.get("steady_step_s") and a.get("steady_step_s") and a.get("rescanned"):
        steady = f"{1000 * b['steady_step_s']:.1f} → {1000 * a['steady_step_s']:.1f}"
    status = r["status"] if r["status"] in ("ok", "clean") else f"**{r['status']}**"
    return (
        f"| {r['model']} | {status} | {counts} | {after} | {cell(changes)} | {cell(verdict, 160)} | {steady} | "
        f"{r.get('seconds', '')} |"
    )


def left_by_rule(records: list[dict]) -> list[str]:
    groups: dict[tuple, dict] = defaultdict(
        lambda: {"findings": 0, "count": 0, "models": set(), "why": defaultdict(int)}
    )
    for r in records:
        for f in r.get("left") or []:
            key = (f.get("rule"), f.get("gb_id") or "—", f.get("kind"))
            g = groups[key]
            g["findings"] += 1
            g["count"] += f.get("count") or 0
            g["models"].add(r["model"])
            g["why"][f"{FIX.get(f.get('fix'), f.get('fix') or '?')}: {f.get('why') or ''}"] += f.get("count") or 1
    rows = [
        "| rule | GB id | kind | findings | count | models | torchmend's reason (the most counted) |",
        "|---|---|---|---|---|---|---|",
    ]
    for (rule, gb, kind), g in sorted(groups.items(), key=lambda kv: -kv[1]["count"]):
        why = max(g["why"].items(), key=lambda kv: kv[1])[0]
        rows.append(
            f"| {rule} | {gb} | {kind} | {g['findings']} | {g['count']} | {len(g['models'])} | {cell(why, 160)} |"
        )
    return rows


def findings_left(r: dict) -> list[str]:
    rows = []
    for f in r.get("left") or []:
        place = f"{f.get('file')}:{f.get('line')}"
        if f.get("user_frame"):
            place += f" (from {f['user_frame']})"
        fix = FIX.get(f.get("fix"), f.get("fix") or "?")
        why = f.get("why") or ""
        rows.append(
            f"| {f.get('rule')} | {f.get('gb_id') or '—'} | {f.get('severity')} | {cell(place, 110)} | "
            f"{f.get('count')} | {cell(f.get('reason'), 140)} | {fix}: {cell(why, 220)} |"
        )
    return rows


def section(label: str, records: list[dict]) -> list[str]:
    n = len(records)
    by_status: dict[str, list[str]] = defaultdict(list)
    for r in records:
        by_status[r["status"]].append(r["model"])
    measured = [r for r in records if r.get("before") and r.get("after")]
    breaking = [r for r in measured if total(r["before"])]
    before = sum(total(r["before"]) for r in breaking)
    after = sum(total(r["after"]) for r in breaking)
    fully = [r["model"] for r in breaking if total(r["after"]) == 0]
    written = [r["model"] for r in records if (r.get("written") or {}).get("files")]
    pct = f"{100 * (before - after) / before:.0f} %" if before else "—"
    out = [f"## {label}: {n} models", ""]
    out += [f"- {len(v)} {STATUS.get(k, k)}: {', '.join(v)}" for k, v in sorted(by_status.items())]
    out += [
        f"- across the {len(breaking)} models that break or recompile: **{before} → {after}** graph breaks + "
        f"recompiles, **{pct} removed**; changes written on {len(written)} ({', '.join(written) or 'none'}); "
        f"fully fixed: {len(fully)} ({', '.join(fully) or 'none'})",
        "",
        "| model | status | breaks + recompiles before | after | changes written (rules) | fix verdict | "
        "steady step ms before → after | wall s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    out += [model_row(r) for r in records if r["status"] != "clean"]  # the clean ones are named above
    contained = [
        f"{r['model']} ({f.get('rule')} at {f.get('file')}:{f.get('line')})"
        for r in records
        for f in r.get("left") or []
        if "internal error" in (f.get("why") or "")
    ]
    if contained:  # a codemod crashed and torchmend went on: no torchmend failure, but a bug to report
        out += ["", f"torchmend internal errors given as a finding's reason: {'; '.join(contained)}"]
    unhelpful = [
        r["model"]
        for r in records
        if (r.get("written") or {}).get("files") and total(r.get("after")) >= total(r.get("before"))
    ]
    if unhelpful:
        out += ["", f"changes written that left the count as it was: {', '.join(unhelpful)}"]
    failed = [r for r in records if r.get("failure")]
    if failed:
        out += ["", "Did not run through:", ""]
        for r in failed:
            fl = r["failure"]
            out.append(
                f"- {r['model']} ({fl['kind']}, stage {fl.get('stage')}, exit {fl.get('rc')}): "
                f"`{cell(last_line(fl.get('detail')), 300)}`"
            )
    if any(r.get("left") for r in records):
        out += ["", f"### {label}: what is left, by rule and GB id", ""] + left_by_rule(records)
        out += ["", f"### {label}: every finding left", ""]
        for r in records:
            if r.get("left"):
                out += (
                    [
                        f"**{r['model']}**",
                        "",
                        "| rule | GB id | severity | where | count | reason | torchmend's fix |",
                        "|---|---|---|---|---|---|---|",
                    ]
                    + findings_left(r)
                    + [""]
                )
    return out + [""]


def last_line(text: str | None) -> str:
    """The exception line of a traceback tail (the last line that is not PyTorch's verbose-mode hint)."""
    lines = [ln for ln in (text or "").splitlines() if ln.strip() and "TORCHDYNAMO_VERBOSE" not in ln]
    for ln in reversed(lines):
        if "Error" in ln or "Exception" in ln or ln.startswith("error"):
            return ln.strip()
    return lines[-1].strip() if lines else ""


def plot(records: list[dict], png: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    rows = [r for r in records if r.get("before") and total(r["before"])]
    if not rows:
        return False
    rows.sort(key=lambda r: (r.get("list", ""), -total(r["before"])))
    names = [f"{r['model'].removesuffix('Model')} ({r.get('list', '')})" for r in rows]
    fig, ax = plt.subplots(figsize=(max(8, 0.45 * len(rows) + 2), 5))
    x = range(len(rows))
    ax.bar([i - 0.2 for i in x], [total(r["before"]) for r in rows], 0.4, label="before", color="#c44e52")
    ax.bar([i + 0.2 for i in x], [total(r.get("after")) for r in rows], 0.4, label="after fix", color="#55a868")
    ax.set_xticks(list(x))
    ax.set_xticklabels(names, rotation=60, ha="right", fontsize=8)
    ax.set_ylabel("graph breaks + recompiles")
    r0 = rows[0]
    ax.set_title(
        f"torchmend on transformers {r0.get('transformers')} models\n(torch {r0.get('torch')}, "
        f"{r0.get('backend')}, {r0.get('steps')} steps; fix --yes --unsafe)",
        fontsize=10,
    )
    ax.legend()
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    plt.close(fig)
    return True


def write_report(jsonl: Path) -> str:
    records = load(jsonl)
    md, png = jsonl.with_suffix(".md"), jsonl.with_suffix(".png")
    r0 = records[0] if records else {}
    lists: dict[str, list[dict]] = defaultdict(list)
    for r in records:
        lists[r.get("list", "custom")].append(r)
    order = sorted(lists, key=lambda k: (k != "dev", k))
    commits = sorted({str(r.get("torchmend")) for r in records})
    out = [
        f"# Corpus: transformers {r0.get('transformers')} models under torchmend (torch {r0.get('torch')})",
        "",
        "Each model class is built from its config at a small size (random weights), copied into a scratch project "
        "with the whole `transformers` package (so its model files are project code), trained in train mode for "
        f"{r0.get('steps')} steps under `torch.compile`; `torchmend scan` → `fix --yes --unsafe` → `scan`, all "
        f"with `--backend {r0.get('backend')}` (benchmarks/corpus/README.md). Counts are graph breaks + "
        "recompiles as `scan` reports them; *after* is the before scan when `fix` wrote nothing. torchmend "
        f"commit(s): {', '.join(commits)}; runs of {min((r.get('date', '') for r in records), default='')} to "
        f"{max((r.get('date', '') for r in records), default='')}.",
        "",
    ]
    for label in order:
        out += section(label, lists[label])
    if plot(records, png):
        out.insert(4, f"![graph breaks + recompiles before and after fix]({png.name})\n")
    md.write_text("\n".join(out))
    return f"wrote {md}" + (f" and {png}" if png.exists() else "")


if __name__ == "__main__":
    for arg in sys.argv[1:] or ["-h"]:
        if arg in ("-h", "--help"):
            print(__doc__)
            sys.exit(0)
        print(write_report(Path(arg)))
