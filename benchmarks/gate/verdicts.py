"""The table of fix's own verdicts in a gate results file: one row per case (its latest fix record), from what
`fix --verdict-json` wrote (the judging stage's interleaved runs): outcome, what was written and refused (with the
reasons' kinds), speed ratios with their band and pace, counts and ops compiled before → after.

    python benchmarks/gate/verdicts.py RESULTS.jsonl > table.md

report.py reads the independent timing phase instead; this is for runs made with `--phases fix`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def speed(v: dict, name: str) -> str:
    for s in v["verification"].get("speed") or []:
        if s["name"] == name and s.get("ratio") is not None:
            band = f" (±{s['band'] * 100:.0f}%)" if s.get("band") else ""
            return f"{s['ratio']:.2f}×{band} {s.get('pace', '')}".strip()
    return "—"


def row(case: str, r: dict) -> str:
    v = r.get("verdict_json")
    if v is None:
        why = "stopped at its time limit" if r.get("timed_out") else (r.get("verdict") or r.get("summary") or "")
        return f"| {case} | {r['rc']}, {r['wall_s']:.0f} s | {why} |" + " — |" * 8
    counts = {s["name"]: s for s in v["verification"]["counts"]}

    def before_after(name: str) -> str:
        s = counts.get(name)
        return f"{s['before']['median']} → {s['after']['median']}" if s else "—"

    written = ", ".join(w["rule"] + (" (global)" if w["global"] else "") for w in v["written"]) or "—"
    refused = "; ".join(
        f"{x['rule']}{' (global)' if x.get('global') else ''}: {', '.join(x.get('kinds') or [])}" for x in v["refused"]
    )
    cells = [
        case,
        f"{r['rc']}, {r['wall_s']:.0f} s",
        f"{v['outcome']}, {v['verification']['verdict']}",
        written,
        refused or "—",
        speed(v, "steady_step_s"),
        speed(v, "last_step_s"),
        speed(v, "compile_seconds"),
        before_after("graph_breaks"),
        before_after("recompiles"),
        before_after("ops_compiled"),
    ]
    return "| " + " | ".join(cells) + " |"


def main(path: Path) -> str:
    latest: dict[str, dict] = {}
    for line in path.read_text().splitlines():
        if line.strip():
            r = json.loads(line)
            if r.get("kind") == "fix":
                latest[r["case"]] = r
    head = (
        "| case | fix exit, wall | outcome | written | refused (why) | steady step after/before (band) | "
        "to last step | compile | breaks | recompiles | ops compiled |\n" + "|---" * 11 + "|"
    )
    return "\n".join([head, *(row(c, r) for c, r in sorted(latest.items()))])


if __name__ == "__main__":
    print(main(Path(sys.argv[1])))
