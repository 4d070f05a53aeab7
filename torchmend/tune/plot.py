"""The step-time plot of a tune report, as a hand-written SVG (no plotting library is a dependency): step index
against step time, one line per setting, time on a log axis (a first step of a minute and steady steps of a
millisecond share the plot)."""

from __future__ import annotations

import math
from xml.sax.saxutils import escape

COLOURS = ("#444444", "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf")
WIDTH, HEIGHT = 820, 440
LEFT, RIGHT, TOP, BOTTOM = 70, 200, 40, 50


def _label(seconds: float) -> str:
    if seconds >= 1:
        return f"{seconds:g} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:g} ms"
    return f"{seconds * 1e6:g} µs"


def _x_ticks(n: int) -> list[int]:
    if n <= 1:
        return [1]
    raw = n / 5
    step = 10 ** math.floor(math.log10(raw))
    step = next(s * step for s in (1, 2, 5, 10) if s * step >= raw)
    return [1, *range(int(step), n + 1, int(step))]


def svg(series: dict[str, list[float]], title: str) -> str:
    """`series`: setting name -> each step's seconds (step 1 first). Steps of zero or less are left out."""
    points = [s for values in series.values() for s in values if s > 0]
    steps = max((len(v) for v in series.values()), default=1)
    lo = 10 ** math.floor(math.log10(min(points))) if points else 1e-3
    hi = 10 ** math.ceil(math.log10(max(points))) if points else 1.0
    if hi <= lo:
        hi = lo * 10
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def x(i: int) -> float:
        return LEFT + (0 if steps <= 1 else (i - 1) / (steps - 1) * plot_w)

    def y(seconds: float) -> float:
        return TOP + plot_h * (1 - (math.log10(seconds) - math.log10(lo)) / (math.log10(hi) - math.log10(lo)))

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">',
        f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
        f'<text x="{LEFT}" y="22" font-size="14">{escape(title)}</text>',
        f'<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#999"/>',
    ]
    decade = lo
    while decade <= hi * 1.0001:
        yy = y(decade)
        out.append(f'<line x1="{LEFT}" x2="{LEFT + plot_w}" y1="{yy:.1f}" y2="{yy:.1f}" stroke="#e5e5e5"/>')
        out.append(f'<text x="{LEFT - 6}" y="{yy + 4:.1f}" text-anchor="end">{_label(decade)}</text>')
        decade *= 10
    for tick in _x_ticks(steps):
        xx = x(tick)
        out.append(f'<line x1="{xx:.1f}" x2="{xx:.1f}" y1="{TOP + plot_h}" y2="{TOP + plot_h + 5}" stroke="#999"/>')
        out.append(f'<text x="{xx:.1f}" y="{TOP + plot_h + 18}" text-anchor="middle">{tick}</text>')
    out.append(
        f'<text x="{LEFT + plot_w / 2:.0f}" y="{HEIGHT - 12}" text-anchor="middle">optimizer step</text>'
        f'<text transform="translate(16 {TOP + plot_h / 2:.0f}) rotate(-90)" text-anchor="middle">'
        "step time (log scale)</text>"
    )
    for k, (name, values) in enumerate(series.items()):
        colour = COLOURS[k % len(COLOURS)]
        coords = " ".join(f"{x(i):.1f},{y(s):.1f}" for i, s in enumerate(values, start=1) if s > 0)
        if coords:
            out.append(f'<polyline fill="none" stroke="{colour}" stroke-width="1.5" points="{coords}"/>')
        ly = TOP + 10 + 18 * k
        out.append(
            f'<line x1="{LEFT + plot_w + 14}" x2="{LEFT + plot_w + 38}" y1="{ly}" y2="{ly}" '
            f'stroke="{colour}" stroke-width="2"/>'
        )
        out.append(f'<text x="{LEFT + plot_w + 44}" y="{ly + 4}">{escape(name)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"
