"""A verification as Markdown (for pull-request bodies) and as rows any renderer can lay out."""

from __future__ import annotations

from torchmend.verify.compare import Metric, Verification
from torchmend.verify.ranks import rank_lines


def fmt(v: float | None) -> str:
    if v is None:
        return "—"
    if float(v).is_integer():
        return str(int(v))
    return f"{v:.4f}" if abs(v) < 0.1 else f"{v:.2f}"


def cell(m: Metric, side: str, repeat: int) -> str:
    s = getattr(m, side)
    if repeat > 1 and s.low != s.high:
        return f"{fmt(s.median)} ({fmt(s.low)}–{fmt(s.high)})"
    return fmt(s.median)


def rows(v: Verification) -> list[tuple[str, str, str, str]]:
    """(label, before, after, after/before) for every count and time."""
    out = []
    for m in (*v.counts, *v.times):
        ratio = f"{m.ratio:.2f}" if m.ratio is not None else "—"
        out.append((m.label, cell(m, "before", v.repeat), cell(m, "after", v.repeat), ratio))
    return out


def markdown(v: Verification, command: str = "") -> str:
    runs = "1 run per arm" if v.repeat == 1 else f"{v.repeat} runs per arm, interleaved; medians, min–max in brackets"
    lines = [
        f"**Verification: {v.word}** ({runs})",
        "",
        "| | before | after | after/before |",
        "|---|---|---|---|",
    ]
    lines += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows(v)]
    lines.append("")
    if v.numerics is not None:
        lines.append(f"Numerics (rtol {v.numerics.rtol:g}, atol {v.numerics.atol:g}): {v.numerics_text()}.")
    elif v.distribution is not None:
        lines.append(f"Numerics, in distribution (the random stream changed): {v.distribution.describe()}.")
    lines.append(f"Speed: {v.speed_text()}.")
    if v.ranks:  # a multi-rank run: each rank judged alone
        lines += ["", "Per rank:", ""] + [f"- {line}" for line in rank_lines(v)] + [""]
    lines += [f"- {r}" for r in v.reasons] + [f"- note: {n}" for n in v.notes]
    if command:
        lines += ["", "Reproduce:", "", "```", command, "```"]
    return "\n".join(lines) + "\n"
