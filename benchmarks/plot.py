"""Plot a benchmark-suite JSON: per-step wall time, compiled as written against torchmend-fixed and hand-fixed.

    .venv/bin/python benchmarks/plot.py benchmarks/results/suite-cpu-torch2.13.json [--out DIR]

One PNG per regime/mode (<stem>-<regime>-<mode>.png, next to the JSON unless --out says otherwise), one
subplot per scenario, the first repeat of each variant. Step 1 counts from the script's start (imports and
the first compile); recompiles show as spikes later on. Needs matplotlib (the `dev` extra); the suite
itself does not, so results from a machine without it can be plotted here.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

STYLE = {  # variant: (colour, line style, line width, label)
    "eager": ("0.6", ":", 1.0, "eager (no compile)"),
    "compiled": ("tab:red", "-", 1.4, "compiled, as written"),
    "torchmend": ("tab:blue", "-", 1.4, "torchmend-fixed"),
    "hand": ("tab:green", "--", 1.2, "hand-fixed"),
}


def plot(data: dict[str, Any], out: Path) -> list[Path]:
    """Write the PNGs for `data` (the suite's JSON, loaded) into `out`; return their paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    meta = data["meta"]
    written = []
    for key, block in data["cells"].items():
        regime, mode = key.split("/")
        names = list(block)
        cols = min(4, len(names))
        rows = math.ceil(len(names) / cols)
        fig, axes = plt.subplots(
            rows, cols, figsize=(4.2 * cols, 3.0 * rows + 0.9), squeeze=False, layout="constrained"
        )
        for ax, name in zip(axes.flat, names):
            s = block[name]["summary"]
            for variant, (colour, ls, lw, label) in STYLE.items():
                run = next(
                    (
                        r
                        for r in data["runs"]
                        if (r["regime"], r["mode"], r["scenario"], r["variant"], r["repeat"])
                        == (regime, mode, name, variant, 0)
                    ),
                    None,
                )
                if not run or not run["step_s"]:
                    continue
                ms = [t * 1e3 for t in run["step_s"]]
                ax.plot(range(1, len(ms) + 1), ms, color=colour, ls=ls, lw=lw, label=label)
            ax.set_yscale("log")
            t_h = s.get("torchmend_over_hand")
            c_t = s.get("compiled_over_torchmend")
            failed = s.get("failed") or [v for v in STYLE if block[name][v]["runs"] and not block[name][v]["ok"]]
            if failed:
                sub = f"{', '.join(failed)} failed"
            else:
                sub = (
                    "torchmend/hand "
                    + (f"{t_h:.2f}" if t_h else "—")
                    + ", compiled/torchmend "
                    + (f"{c_t:.2f}" if c_t else "—")
                )
            ax.set_title(f"{name}\n{sub}", fontsize=9)
            ax.set_xlabel("optimizer step", fontsize=8)
            ax.set_ylabel("step time, ms (log)", fontsize=8)
            ax.tick_params(labelsize=7)
            ax.grid(True, which="major", alpha=0.3)
        for ax in list(axes.flat)[len(names) :]:
            ax.axis("off")
        handles, labels = axes.flat[0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="outside lower center", ncol=len(labels), fontsize=8, frameon=False)
        backend = data["config"]["backend"] or "inductor"
        fig.suptitle(
            f"{regime} regime, mode {mode}, backend {backend}: {meta['device_name']}, torch {meta['torch']}\n"
            "per-step wall time of the first repeat (step 1 counts from the script's start)",
            fontsize=9,
        )
        path = out / f"{data['stem']}-{regime}-{mode}.png"
        fig.savefig(path, dpi=90)
        plt.close(fig)
        written.append(path)
    return written


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("json", type=Path)
    p.add_argument("--out", type=Path, default=None, help="default: the JSON's directory")
    args = p.parse_args()
    data = json.loads(args.json.read_text(encoding="utf-8"))
    out = args.out or args.json.parent
    out.mkdir(parents=True, exist_ok=True)
    for path in plot(data, out):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
