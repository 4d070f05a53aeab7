"""CPU side of the GPU checks (needs libcst, which the GPU machine lacks): fix every scenario and every scan
fixture with `torchmend fix --yes --unsafe --no-verify` on a scratch copy, and keep the fixed copies.

    .venv/bin/python benchmarks/gpu/prepare.py            # all (about 10 min on a 2-core CPU)
    .venv/bin/python benchmarks/gpu/prepare.py --only module_counter float_lr

Writes benchmarks/gpu/fixed/scenarios/<name>/broken.py + fix.json (the suite's torchmend variant:
`suite.py --fixed-dir benchmarks/gpu/fixed/scenarios`) and benchmarks/gpu/fixed/fixtures/<name>/ (the fixture's
files as `fix` left them) + fix.json (cudagraph_check.py). Commit them: the GPU side only reads them.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import suite  # noqa: E402  (benchmarks/suite.py: make_fix, the suite's own way of making the variant)

OUT = HERE / "fixed"
FIXTURES = ROOT / "fixtures" / "scan"


def fix_fixture(name: str, scratch: Path) -> dict[str, object]:
    """`torchmend fix train.py --yes --unsafe --no-verify` on a copy of fixtures/scan/<name>; the fixed files."""
    work = scratch / "fixtures" / name
    shutil.copytree(FIXTURES / name, work, ignore=shutil.ignore_patterns("__pycache__", "expected.json"))
    before = {p.name: p.read_text(encoding="utf-8") for p in work.glob("*.py")}
    state = scratch / "state" / name
    cmd = [
        sys.executable,
        "-m",
        "torchmend",
        "fix",
        "train.py",
        "--yes",
        "--unsafe",
        "--no-verify",
        "--backend",
        "aot_eager",
    ]
    env = suite.child_env((*suite.fresh_caches(scratch, "fix"), ("TORCHMEND_STATE_DIR", str(state))))
    wall, rc, output = suite.timed(cmd, work, env)
    after = {p.name: p.read_text(encoding="utf-8") for p in work.glob("*.py")}
    diff = "".join(
        "".join(difflib.unified_diff(before[f].splitlines(True), after[f].splitlines(True), f"a/{f}", f"b/{f}"))
        for f in sorted(before)
    )
    summary = "; ".join(
        x for x in (json.loads(r.read_text()).get("summary", "") for r in sorted(state.rglob("*.json"))) if x
    )
    dest = OUT / "fixtures" / name
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    for f, text in after.items():
        (dest / f).write_text(text, encoding="utf-8")
    return {
        "fixture": name,
        "command": "torchmend " + " ".join(cmd[3:]),
        "rc": rc,
        "wall_s": round(wall, 2),
        "changed": sorted(f for f in before if before[f] != after[f]),
        "rules": sorted(set(re.findall(r"TM\d{3}", summary))),
        "summary": summary,
        "diff": diff,
        "output_tail": output[-2000:] if rc not in (0, 6) else "",
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--only", nargs="+", default=None, help="scenario or fixture names")
    p.add_argument("--no-fixtures", action="store_true")
    p.add_argument("--no-scenarios", action="store_true")
    args = p.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="torchmend-prepare-"))
    try:
        if not args.no_scenarios:
            for name in suite.scenario_names():
                if args.only and name not in args.only:
                    continue
                fx = suite.make_fix(name, "cpu", scratch)
                dest = OUT / "scenarios" / name
                dest.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(fx.pop("script"), dest / "broken.py")
                fx["command"] = fx["command"].replace(str(scratch / "fixed" / name) + "/", "")
                (dest / "fix.json").write_text(json.dumps(fx, indent=1) + "\n", encoding="utf-8")
                print(f"scenario {name}: {', '.join(fx['rules']) or 'nothing fixed'} (exit {fx['rc']})", flush=True)
        if not args.no_fixtures:
            for d in sorted(FIXTURES.iterdir()):
                if not (d / "train.py").exists() or d.name == "clean" or (args.only and d.name not in args.only):
                    continue
                rec = fix_fixture(d.name, scratch)
                (OUT / "fixtures" / d.name / "fix.json").write_text(json.dumps(rec, indent=1) + "\n", encoding="utf-8")
                print(f"fixture {d.name}: {', '.join(rec['rules']) or 'nothing fixed'} (exit {rec['rc']})", flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("COLUMNS", "200")
    sys.exit(main())
