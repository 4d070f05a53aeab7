"""Wall time of `torchmend scan --backend aot_eager` vs the plain `python train.py`, side by side, per fixture.

The plain run uses the script's own backend (inductor by default: a C++ compile per graph on a CPU),
which is exactly the cost a user pays without torchmend. Run: .venv/bin/python benchmarks/scan_overhead.py [names]
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def timed(cmd: list[str], cwd: Path) -> float:
    t0 = time.monotonic()
    subprocess.run(cmd, cwd=cwd, capture_output=True, check=False)
    return time.monotonic() - t0


def main() -> None:
    names = sys.argv[1:] or sorted(p.name for p in (ROOT / "fixtures/scan").iterdir() if p.is_dir())
    print(f"{'fixture':20} {'plain s':>8} {'scan s':>8} {'scan/plain':>10}")
    for name in names:
        d = ROOT / "fixtures/scan" / name
        plain = timed([sys.executable, "train.py"], d)
        scan = timed([str(BIN / "torchmend"), "scan", "train.py", "--backend", "aot_eager", "--format", "json"], d)
        print(f"{name:20} {plain:8.1f} {scan:8.1f} {scan / plain:10.2f}", flush=True)


if __name__ == "__main__":
    main()
