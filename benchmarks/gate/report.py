#!/usr/bin/env python3
"""The gate's results (run.py's JSONL) as Markdown: one row per case, then each written diff and each failure.

    python benchmarks/gate/report.py RESULTS.jsonl [--out REPORT.md]   # default: RESULTS with .md

Times: median over the runs of an arm, [min–max] after it. steady = the median step over the second half of a
run's steps; first/last step = seconds from the process's launch to the end of the first/last optimizer step;
compile = summed compile seconds (dynamo's compilation metrics); ops = ops compiled summed over frames (each frame's
largest graph) / the largest single graph. "claim holds?": every written change must be faster beyond the spread
(steady step or time to last step: the slowest fixed run faster than the fastest original run) or faster to start
(compile or first step, likewise), and compute the same losses: within rtol 1e-4, or no further from the
original's than the original compiled is from the original run eagerly ("compiled vs eager": over thousands of
steps rounding differences grow, the compiler's as much as a patch's).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run import summarise  # noqa: E402  (the same judgement as run.py's, made again from the runs)

EXIT = {
    0: "ok",
    1: "internal error",
    2: "usage",
    4: "script failed",
    5: "nothing compiled",
    8: "failed after compile",
    9: "write refused",
    10: "verify refused",
    12: "no effect",
    124: "timeout",
    -9: "killed",
    -15: "terminated",
    130: "interrupted",
    143: "terminated",
}


def load(path: Path) -> list[dict]:
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            pass
    return out


def key_of(r: dict) -> tuple:
    return (r["case"], r.get("source_sha"), r.get("steps"), tuple(r.get("fix_args") or ()))


def fmt(s: dict | None, scale: float = 1.0, digits: int = 2) -> str:
    if not s:
        return "—"
    med = f"{s['median'] * scale:.{digits}f}"
    if s["n"] > 1 and s["max"] != s["min"]:
        return f"{med} [{s['min'] * scale:.{digits}f}–{s['max'] * scale:.{digits}f}]"
    return med


def arrow(b: dict | None, a: dict | None, scale: float = 1.0, digits: int = 2) -> str:
    if a is None or not a:
        return fmt(b, scale, digits)
    return f"{fmt(b, scale, digits)} → {fmt(a, scale, digits)}"


def ops(arm: dict) -> str:
    t, big = arm.get("ops_total"), arm.get("ops_largest")
    if not t:
        return "—"
    return f"{t['median']:.0f}/{big['median']:.0f}"


def wrote(fix: dict) -> str:
    """What the fix wrote (its rules and the diff's size), or refused / nothing / timed out; then the rules of
    the findings it did not fix."""
    if fix.get("timed_out"):
        text = "timed out"
    elif fix.get("changed"):
        rules = sorted({c.split()[1] for c in fix.get("changes") or [] if len(c.split()) > 1})
        plus = sum(1 for ln in fix["diff"].splitlines() if ln.startswith("+") and not ln.startswith("+++"))
        minus = sum(1 for ln in fix["diff"].splitlines() if ln.startswith("-") and not ln.startswith("---"))
        text = (", ".join(rules) if rules else "a change") + f" (+{plus}/-{minus})"
    elif fix.get("rc") == 10 or "refused" in (fix.get("verdict") or ""):
        text = "refused"
    else:
        text = "nothing"
    left = sorted({n["rule"] for n in fix.get("not_fixed") or []})
    return text + (f"; not fixed: {', '.join(left)}" if left else "")


def table(cases: list[tuple[dict, dict | None]]) -> list[str]:
    rows = [
        "| case | library | planted | fix wrote | fix exit, verdict | steady ms before → after | ratio | "
        "compile s | first step s | last step s | wall s | ops total/largest before → after | numerics | "
        "claim holds? |",
        "|" + "---|" * 14,
    ]
    for fix, case in cases:
        s = (case or {}).get("summary")
        rc = fix.get("rc")
        verdict = (fix.get("verdict") or "").replace("verdict:", "").strip() or "—"
        fixcol = f"{rc} ({EXIT.get(rc, '?')}), {verdict}"
        planted = ", ".join(fix.get("planted") or []) or "none (control)"
        if s is None:
            rows.append(
                f"| {fix['case']} | {fix.get('library')} | {planted} | {wrote(fix)} | {fixcol} | "
                "not timed yet |  |  |  |  |  |  |  | — |"
            )
            continue
        b, a = s["before"], s["after"]
        a = a if a.get("ok_runs") else {}
        ratio = "—"
        if a and b.get("steady_s") and a.get("steady_s"):
            ratio = f"{a['steady_s']['median'] / b['steady_s']['median']:.2f}"
        if "numerics_equal" in s:
            rel = s.get("numerics_max_rel")
            num = ("equal" if s["numerics_equal"] else "differ") + (f" ({rel:.1e})" if rel is not None else "")
            if s.get("aa_max_rel") is not None:
                num += f"; A/A {s['aa_max_rel']:.1e}"
            if s.get("compiler_max_rel") is not None:
                within = " (within it)" if s.get("numerics_within") == "compiler" else ""
                num += f"; compiled vs eager {s['compiler_max_rel']:.1e}{within}"
        elif s.get("aa_max_rel") is not None:
            num = f"A/A {s['aa_max_rel']:.1e}"
        else:
            num = "—"
        opcol = ops(b) + (f" → {ops(a)}" if a else "")
        rows.append(
            f"| {fix['case']} | {fix.get('library')} | {planted} | {wrote(fix)} | {fixcol} | "
            f"{arrow(b.get('steady_s'), a.get('steady_s') if a else None, 1e3)} | {ratio} | "
            f"{arrow(b.get('compile_s'), a.get('compile_s') if a else None, 1, 1)} | "
            f"{arrow(b.get('first_step_s'), a.get('first_step_s') if a else None, 1, 1)} | "
            f"{arrow(b.get('last_step_s'), a.get('last_step_s') if a else None, 1, 1)} | "
            f"{arrow(b.get('wall_s'), a.get('wall_s') if a else None, 1, 1)} | {opcol} | {num} | {s['verdict']} |"
        )
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", type=Path)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    lines = load(args.results)
    fixes: dict[tuple, dict] = {}
    cases: dict[tuple, dict] = {}
    runs: dict[tuple, list[dict]] = {}
    for r in lines:
        k = key_of(r)
        if r.get("kind") == "fix":
            fixes[k] = r
        elif r.get("kind") == "case":
            cases[k] = r
        elif r.get("kind") == "run":
            runs.setdefault(k, []).append(r)
    for k, c in cases.items():  # the summary made again from the runs: the judgement of this version of run.py
        if k in fixes:
            latest = {(r["arm"], r["rep"]): r for r in runs.get(k, []) if r["rep"] < c.get("repeat", 3)}
            c["summary"] = summarise(fixes[k], list(latest.values()))
    order = sorted(fixes, key=lambda k: k[0])
    paired = [(fixes[k], cases.get(k)) for k in order]
    done = [c for _, c in paired if c]
    devices = sorted({(c["summary"]["before"].get("device"), c["summary"]["before"].get("torch")) for c in done})
    steps = sorted({k[2] for k in order})
    fix_args = sorted({" ".join(k[3]) for k in order})
    repeats = sorted({c.get("repeat") for c in done})
    out = ["# torchmend gate: real models, planted problems, fix and an independent before/after", ""]
    # A scenario reads its length from TM_BENCH_STEPS, not --steps: its timed runs go on to their own end.
    timed = sorted({len((r.get("record") or {}).get("step_ends") or []) for rs in runs.values() for r in rs} - {0})
    out.append(
        f"From `{args.results.name}`: {len(order)} cases fixed, {len(done)} timed; steps {steps} (fix), "
        f"{timed or '—'} (the timed runs' optimizer steps), repeat "
        f"{repeats}, fix args {fix_args}; device/torch {devices}; hosts "
        f"{sorted({r.get('host') for r in lines if r.get('host')})}."
    )
    out.append("")
    verdicts = [c["summary"]["verdict"] for c in done]
    written = sum(1 for f, _ in paired if f.get("changed"))
    holds = sum(1 for v in verdicts if v.startswith("yes"))
    fails = sum(1 for v in verdicts if v == "case failed to run")
    out.append(
        f"**{written}** cases got a change written; the claim holds on **{holds}** of the "
        f"{sum(1 for f, c in paired if c and f.get('changed'))} timed ones; {fails} cases failed to run."
    )
    out.append("")
    out.extend(table(paired))
    out.append("")
    out.append(__doc__.split("\n\n", 2)[2].strip())
    missing = [f["case"] for f, c in paired if c is None]
    if missing:
        out += ["", f"**Still missing** (fixed, not timed): {', '.join(missing)}"]
    out += ["", "## What fix wrote", ""]
    for fix, case in paired:
        head = f"### {fix['case']} ({fix.get('library')}: {fix.get('model')})"
        out += [
            head,
            "",
            f"- fix: exit {fix.get('rc')} in {fix.get('wall_s')} s; {fix.get('summary') or ''}",
            f"- {'; '.join(fix.get('verdicts') or []) or 'no verdict'}; {fix.get('numerics_line') or ''}",
        ]
        if fix.get("wrote_line"):
            out.append(f"- {fix['wrote_line']}")
        for c in fix.get("changes") or []:
            out.append(f"  - `{c}`")
        for n in fix.get("not_fixed") or []:
            out.append(f"- not fixed: {n['where']} {n['rule']}: {n['why']}")
        if fix.get("diff"):
            out += ["", "```diff", fix["diff"].rstrip(), "```"]
        elif fix.get("rc") not in (0, None):
            out += ["", "```", (fix.get("log_tail") or "").rstrip(), "```"]
        s = (case or {}).get("summary")
        if s:
            for arm in ("before", "after"):
                if s[arm].get("failure"):
                    out += [
                        "",
                        f"{arm} failed (exit {s[arm].get('failure_rc')}):",
                        "```",
                        s[arm]["failure"].rstrip()[-1200:],
                        "```",
                    ]
            b = s["before"]
            counts = [
                f"{k} {fmt(b.get(k), 1, 0)}"
                + (f" → {fmt(s['after'].get(k), 1, 0)}" if s["after"].get("ok_runs") else "")
                for k in ("frames", "recompiles", "graph_breaks")
            ]
            out.append(f"- timed: {', '.join(counts)}; losses {s.get('losses_counted') or '—'}")
        out.append("")
    text = "\n".join(out) + "\n"
    dest = args.out or args.results.with_suffix(".md")
    dest.write_text(text)
    print(text if len(text) < 20000 else "\n".join(table(paired)))
    print(f"wrote {dest}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
