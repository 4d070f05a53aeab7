"""The corpus benchmark's report: Markdown and a plot from run.py's JSON lines.

    python benchmarks/corpus/report.py RESULTS.jsonl [MORE.jsonl ...]   (several: merged into one report)

Writes the .md and a .png beside the JSON lines file (the plot needs matplotlib, in the dev extras; without it
the Markdown is still written). The last record of a (model, mode, mode of use) counts (run.py --redo appends a
newer one; shards of run.py --jobs append to one file, so the report merges them). One section per model list
(dev, eval, zoo, ...), mode (train, eval) and mode of use (vendored: library maintainer; user: end user), each
with its per-model table, its totals, breaks and recompiles by cause family (CAUSES below: the families of issue
26's table and of the public corpus), and what is left by rule and GB id; the findings left are listed per model
with torchmend's reason. Records of `run.py --scan-only` (no fix) give a baseline: counts and causes, before only. A file RESULTS.cmd beside
the first file (the command that made the results) is quoted at the top.
"""

from __future__ import annotations

import json
import re
import sys
from collections import defaultdict
from pathlib import Path

STATUS = {
    "ok": "breaks or recompiles",
    "clean": "compiles cleanly",
    "driver_error": "driver error: does not build or run with the generic inputs (eager)",
    "compile_error": "fails under torch.compile before any graph",
    "compiled_error": "fails under torch.compile after a graph, with no break or recompile seen (runs eagerly)",
    "torchmend_failure": "torchmend failure",
    "timeout": "timed out",
    "not_installed": "library not installed (not run)",  # the libraries zoo (run.py --zoo libraries)
}

FIX = {"not_fixable": "not fixable", "proposal": "proposed, not kept", "skipped": "nothing to fix"}  # explain.py
USES = {"vendored": "library maintainer (library vendored)", "user": "end user (library in site-packages)"}
MAX_ROWS = 80  # a section with more breaking models lists the worst ones only (the JSON lines hold them all)

# Cause families, first match wins: (name, rules, GB ids, a pattern over the finding's code and reason).
CAUSES: list[tuple[str, set[str], set[str], str | None]] = [
    ("LayerDrop: random layer skip", set(), set(), r"layerdrop|skip_the_layer|dropout_probability"),
    ("host NumPy / Python RNG", {"TM110"}, set(), r"np\.random|numpy\.random|random\.(random|randint|uniform)\("),
    ("next() on a dict iterator", set(), {"GB4347"}, None),
    ("nn.Parameter / buffer / module built in forward", set(), {"GB0264", "GB0119"}, None),
    ("requires_grad set inside forward", {"TM109"}, {"GB8985", "GB0206"}, r"requires_grad(_\(| *= *True)"),
    (
        "data-dependent: nonzero, .item(), .tolist(), tensor branch, mask fast path",
        {"TM103", "TM104", "TM108", "TM111", "TM205"},
        {"GB0036", "GB0033", "GB0124", "GB0170", "GB0219"},
        r"nonzero|\.item\(\)|\.tolist\(\)|data.dependent",
    ),
    ("logging / print / warnings", {"TM101", "TM102"}, {"GB0291"}, None),
    ("exception raised in traced code", set(), {"GB0088"}, None),
    ("guard: changing scalar, shape, None, type (recompile)", set(), set(), None),  # kind == recompile, below
    ("informational (library's own break or recompile)", set(), set(), None),  # TM9xx, below
    ("other graph break", set(), set(), None),
]


def cause(f: dict) -> str:
    """The cause family of a finding (a `found` or `left` entry of run.py)."""
    rule, gb = f.get("rule") or "", f.get("gb_id") or ""
    text = f"{f.get('code') or ''}\n{f.get('reason') or ''}"
    if "torch/nn/modules/module.py" in (f.get("file") or ""):  # register_buffer / Parameter / a submodule, in forward
        return CAUSES[3][0]  # (torch 2.11 calls `if persistent:` of register_buffer a data-dependent branch)
    for name, rules, gbs, pattern in CAUSES[:8]:
        if rule in rules or gb in gbs or (pattern and re.search(pattern, text, re.I)):
            return name
    if rule.startswith("TM9"):
        return CAUSES[9][0]
    if f.get("kind") == "recompile" or rule.startswith("TM2"):
        return CAUSES[8][0]
    return CAUSES[10][0]


def load(*paths: Path) -> list[dict]:
    """The last record of each (model, mode, use) over the files (shards' files merge)."""
    last: dict[tuple[str, str, str], dict] = {}
    for path in paths:
        for line in path.read_text().splitlines():
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue
            rec.setdefault("mode", "train")  # records from before modes and uses existed
            rec.setdefault("use", "vendored")
            last[(rec["model"], rec["mode"], rec["use"])] = rec
    return list(last.values())


def zoo_of(records: list[dict]) -> str:
    """What the models are, for titles: `transformers 5.23.0` or the libraries zoo's libraries and versions."""
    libs = sorted({(r["library"], r.get("library_version")) for r in records if r.get("library")})
    if not libs:
        return f"transformers {records[0].get('transformers') if records else None}"
    return ", ".join(f"{lib} {v}" if v else f"{lib} (not installed)" for lib, v in libs)


def by_library(records: list[dict]) -> list[str]:
    """The libraries zoo: per library, how many built and ran, the record kinds, and breaks + recompiles."""
    groups: dict[str, list[dict]] = defaultdict(list)
    for r in records:
        groups[r.get("library") or "?"].append(r)
    rows = ["| library | models | ran (clean + breaking) | break or recompile | graph breaks + recompiles | "
            "driver errors | compile errors | timeouts | torchmend failures | not installed |",
            "|---|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for lib, rs in sorted(groups.items()):
        n = defaultdict(int)
        for r in rs:
            n[r["status"]] += 1
        gb = sum((r.get("before") or {}).get("graph_breaks") or 0 for r in rs)
        rc = sum((r.get("before") or {}).get("recompiles") or 0 for r in rs)
        rows.append(f"| {lib} | {len(rs)} | {n['clean'] + n['ok']} | {n['ok']} | {gb} + {rc} = {gb + rc} | "
                    f"{n['driver_error']} | {n['compile_error'] + n['compiled_error']} | {n['timeout']} | {n['torchmend_failure']} | "
                    f"{n['not_installed']} |")  # fmt: skip
    return rows


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


def by_cause(records: list[dict], fixed: bool) -> list[str]:
    """Finding counts by cause family: found by the first scan (and left after fix, when fix ran)."""
    found: dict[str, int] = defaultdict(int)
    left: dict[str, int] = defaultdict(int)
    models: dict[str, set] = defaultdict(set)
    for r in records:
        for f in r.get("found") or []:
            found[cause(f)] += f.get("count") or 1
            models[cause(f)].add(r["model"])
        for f in r.get("left") or []:
            left[cause(f)] += f.get("count") or 1
    if not found:
        return []
    all_found = sum(found.values())
    head = "| cause | found | share | models |" + (" left after fix |" if fixed else "")
    rows = [head, "|---|---|---|---|" + ("---|" if fixed else "")]
    for name, n in sorted(found.items(), key=lambda kv: -kv[1]):
        rows.append(
            f"| {name} | {n} | {100 * n / all_found:.0f} % | {len(models[name])} |"
            + (f" {left[name]} |" if fixed else "")
        )
    rows.append(f"| all | {all_found} | 100 % | {len({r['model'] for r in records if r.get('found')})} |"
                + (f" {sum(left.values())} |" if fixed else ""))  # fmt: skip
    return rows


def found_by_rule(records: list[dict]) -> list[str]:
    groups: dict[tuple, dict] = defaultdict(lambda: {"findings": 0, "count": 0, "models": set(), "code": ""})
    for r in records:
        for f in r.get("found") or []:
            g = groups[(f.get("rule"), f.get("gb_id") or "—", f.get("kind"))]
            g["findings"] += 1
            g["count"] += f.get("count") or 0
            g["models"].add(r["model"])
            g["code"] = g["code"] or f.get("code") or f.get("reason") or ""
    rows = ["| rule | GB id | kind | findings | count | models | e.g. |", "|---|---|---|---|---|---|---|"]
    for (rule, gb, kind), g in sorted(groups.items(), key=lambda kv: -kv[1]["count"]):
        rows.append(
            f"| {rule} | {gb} | {kind} | {g['findings']} | {g['count']} | {len(g['models'])} | {cell(g['code'], 90)} |"
        )
    return rows


def scan_row(r: dict) -> str:
    b = r.get("before") or {}
    causes: dict[str, int] = defaultdict(int)
    for f in r.get("found") or []:
        causes[cause(f)] += f.get("count") or 1
    top = ", ".join(f"{k} {v}" for k, v in sorted(causes.items(), key=lambda kv: -kv[1])[:3])
    return f"| {r['model']} | {b.get('graph_breaks')} + {b.get('recompiles')} = {total(b)} | {cell(top, 200)} |"


def section(label: str, records: list[dict]) -> list[str]:
    if records and all(r.get("scan_only") for r in records):
        return scan_section(label, records)
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
    if any(r.get("library") for r in records):
        out += ["", f"### {label}: by library", ""] + by_library(records)
    causes = by_cause(records, fixed=True)
    if causes:
        out += ["", f"### {label}: breaks and recompiles by cause (finding counts)", ""] + causes
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


def scan_section(label: str, records: list[dict]) -> list[str]:
    """A baseline (run.py --scan-only): counts and causes before any fix."""
    by_status: dict[str, list[str]] = defaultdict(list)
    for r in records:
        by_status[r["status"]].append(r["model"])
    breaking = sorted((r for r in records if total(r.get("before"))), key=lambda r: -total(r["before"]))
    gb = sum((r["before"].get("graph_breaks") or 0) for r in breaking)
    rc = sum((r["before"].get("recompiles") or 0) for r in breaking)
    out = [f"## {label}: {len(records)} models (scan only, no fix)", ""]
    for k, v in sorted(by_status.items()):
        names = ", ".join(v) if k != "clean" or len(v) <= 40 else f"{', '.join(v[:40])}, … ({len(v) - 40} more)"
        out.append(f"- {len(v)} {STATUS.get(k, k)}: {names}")
    out += [
        f"- {len(breaking)} models break or recompile: **{gb} graph breaks + {rc} recompiles = {gb + rc}**",
        "",
    ]
    if any(r.get("library") for r in records):
        out += [f"### {label}: by library", ""] + by_library(records) + [""]
    out += [f"### {label}: by cause (finding counts)", ""]
    out += by_cause(records, fixed=False)
    out += ["", f"### {label}: by rule and GB id", ""] + found_by_rule(records)
    out += ["", f"### {label}: models that break or recompile" + (f" (the {MAX_ROWS} with most)" if len(breaking) > MAX_ROWS else ""), "",
            "| model | graph breaks + recompiles | top causes |", "|---|---|---|"]  # fmt: skip
    out += [scan_row(r) for r in breaking[:MAX_ROWS]]
    failed = [r for r in records if r.get("failure")]
    if failed:
        out += ["", "Did not run through:", ""]
        out += [
            f"- {r['model']} ({r['failure']['kind']}, stage {r['failure'].get('stage')}, exit {r['failure'].get('rc')}): "
            f"`{cell(last_line(r['failure'].get('detail')), 200)}`"
            for r in failed
        ]
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
    if len(rows) > 60:
        return plot_causes(records, png, plt)
    if all(r.get("scan_only") for r in rows):
        return plot_scan(rows, png, plt)
    rows.sort(key=lambda r: (r.get("list", ""), r["mode"], r["use"], -total(r["before"])))
    names = [f"{r['model'].removesuffix('Model')} ({r.get('list', '')}, {r['mode']}, {r['use']})" for r in rows]
    fig, ax = plt.subplots(figsize=(max(8, 0.45 * len(rows) + 2), 5))
    x = range(len(rows))
    ax.bar([i - 0.2 for i in x], [total(r["before"]) for r in rows], 0.4, label="before", color="#c44e52")
    ax.bar([i + 0.2 for i in x], [total(r.get("after")) for r in rows], 0.4, label="after fix", color="#55a868")
    ax.set_xticks(list(x))
    ax.set_xticklabels(names, rotation=60, ha="right", fontsize=8)
    ax.set_ylabel("graph breaks + recompiles")
    r0 = rows[0]
    ax.set_title(
        f"torchmend on {zoo_of(rows)} models\n(torch {r0.get('torch')}, "
        f"{r0.get('backend')}, {r0.get('steps')} steps; fix --yes --unsafe)",
        fontsize=10,
    )
    ax.legend()
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    plt.close(fig)
    return True


def plot_scan(rows: list[dict], png: Path, plt: object) -> bool:
    """A baseline (scan only): each breaking (model, mode) as a bar stacked by cause family."""
    rows = sorted(rows, key=lambda r: (r["mode"] != "train", r["use"], -total(r["before"])))
    names = [f"{r['model'].removesuffix('Model')} ({r['mode']}, {r['use']})" for r in rows]
    fig, ax = plt.subplots(figsize=(max(8, 0.45 * len(rows) + 4), 6))  # type: ignore[attr-defined]
    bottom = [0] * len(rows)
    colors = plt.get_cmap("tab20").colors  # type: ignore[attr-defined]
    for i, (name, *_) in enumerate(CAUSES):
        heights = [sum(f.get("count") or 1 for f in r.get("found") or [] if cause(f) == name) for r in rows]
        if any(heights):
            ax.bar(range(len(rows)), heights, 0.7, bottom=bottom, label=name, color=colors[i % len(colors)])
            bottom = [b + h for b, h in zip(bottom, heights)]
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels(names, rotation=60, ha="right", fontsize=8)
    ax.set_ylabel("graph breaks + recompiles (finding counts)")
    r0 = rows[0]
    ax.set_title(f"{zoo_of(rows)} models that break, by cause: scan only, no fix\n"
                 f"(torch {r0.get('torch')}, {r0.get('backend')}, {r0.get('steps')} steps)", fontsize=10)  # fmt: skip
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    plt.close(fig)  # type: ignore[attr-defined]
    return True


def plot_causes(records: list[dict], png: Path, plt: object) -> bool:
    """Many models: finding counts by cause family, one bar per (mode, use), before (and after fix)."""
    groups: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for r in records:
        groups[(r["mode"], r["use"])].append(r)
    names = [c[0] for c in CAUSES]
    fig, ax = plt.subplots(figsize=(11, 0.5 * len(names) + 2))  # type: ignore[attr-defined]
    keys = sorted(groups)
    width = 0.8 / (2 * len(keys))
    for j, key in enumerate(keys):
        for k, side in enumerate(("found", "left")):
            counts: dict[str, int] = defaultdict(int)
            for r in groups[key]:
                for f in r.get(side) or []:
                    counts[cause(f)] += f.get("count") or 1
            if side == "left" and not counts:
                continue
            label = f"{key[0]}, {key[1]}" + (", before" if side == "found" else ", after fix")
            ys = [i + (2 * j + k) * width - 0.4 for i in range(len(names))]
            ax.barh(ys, [counts[n] for n in names], width, label=label)
    ax.set_yticks(range(len(names)))
    ax.set_yticklabels(names, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("graph breaks + recompiles (finding counts)")
    r0 = records[0]
    n = len({r["model"] for r in records})
    ax.set_title(f"{n} {zoo_of(records)} models by cause (torch {r0.get('torch')}, "
                 f"{r0.get('backend')}, {r0.get('steps')} steps)", fontsize=10)  # fmt: skip
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    plt.close(fig)  # type: ignore[attr-defined]
    return True


TRANSFORMERS_INTRO = (
    "Each model class is built from its config at a small size (random weights) and run for {steps} steps under "
    "`torch.compile` in train mode (training steps) or eval mode (`model.eval()`, forward under `torch.no_grad()`), "
    "with the whole `transformers` package copied into the scratch project (vendored: library maintainer; its model "
    "files are project code) or left in site-packages (user: end user; only the script is the user's); `torchmend "
    "scan` → `fix --yes --unsafe` → `scan` (or the first scan alone: scan only), all with `--backend {backend}` "
    "(benchmarks/corpus/README.md). Counts are graph breaks + recompiles as `scan` reports them; *after* is the "
    "before scan when `fix` wrote nothing; counts by cause are the findings' counts."
)
# The second zoo (run.py --zoo libraries): the same stages, other libraries, one generic script.
LIBRARIES_INTRO = (
    "Each model (`LIBRARY:NAME`) is built from its constructor or config at a tiny size (random weights, nothing "
    "downloaded) by train_library_model.py and run for {steps} steps under `torch.compile` in train mode (forward, "
    "a loss over the outputs, backward, an AdamW step) or eval mode (`model.eval()`, forward under "
    "`torch.no_grad()`), with the zoo's libraries copied into the scratch project (vendored: library maintainer) or "
    "left in site-packages (user: end user; only the script is the user's); `torchmend scan` → `fix --yes "
    "--unsafe` → `scan` (or the first scan alone: scan only), all with `--backend {backend}` "
    "(benchmarks/corpus/README.md). A model whose library the venv lacks is recorded as not installed and not run. "
    "Counts are graph breaks + recompiles as `scan` reports them; counts by cause are the findings' counts."
)


def write_report(jsonl: Path, *more: Path) -> str:
    records = load(jsonl, *more)
    md, png = jsonl.with_suffix(".md"), jsonl.with_suffix(".png")
    r0 = records[0] if records else {}
    lists: dict[tuple[str, str, str], list[dict]] = defaultdict(list)
    for r in records:
        lists[(r.get("list", "custom"), r["use"], r["mode"])].append(r)
    order = sorted(lists, key=lambda k: (k[0] != "dev", k[0], k[1] != "vendored", k[2] != "train"))
    commits = sorted({str(r.get("torchmend")) for r in records})
    libraries = any(r.get("library") for r in records)
    intro = (LIBRARIES_INTRO if libraries else TRANSFORMERS_INTRO).format(
        steps=r0.get("steps"), backend=r0.get("backend")
    )
    out = [
        f"# Corpus: {zoo_of(records)} models under torchmend (torch {r0.get('torch')})",
        "",
        f"{intro} torchmend commit(s): {', '.join(commits)}; runs of "
        f"{min((r.get('date', '') for r in records), default='')} to "
        f"{max((r.get('date', '') for r in records), default='')}.",
        "",
    ]
    cmd = jsonl.with_suffix(".cmd")
    if cmd.exists():  # how the results were made, kept beside them
        out += ["Made with:", "", "```", cmd.read_text().strip(), "```", ""]
    for key in order:
        label, use, mode = key
        out += section(f"{label}, {mode} mode, {USES.get(use, use)}", lists[key])
    if plot(records, png):
        out.insert(4, f"![graph breaks + recompiles before and after fix]({png.name})\n")
    md.write_text("\n".join(out))
    return f"wrote {md}" + (f" and {png}" if png.exists() else "")


if __name__ == "__main__":
    args = sys.argv[1:] or ["-h"]
    if any(arg in ("-h", "--help") for arg in args):
        print(__doc__)
        sys.exit(0)
    print(write_report(*map(Path, args)))  # several files (shards): one report, beside the first
