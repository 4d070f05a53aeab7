"""Check the spellings of the torch APIs codemods write (torchmend/analysis/torch_api.py) against the installed torch.

    python scripts/torch_api.py --check   # every row that holds for this torch resolves on it (tests/unit/test_torch_api.py)
    python scripts/torch_api.py --facts   # the version-dependent APIs no codemod writes, as this torch has them

Imports torch (run it with the interpreter of the torch to check, e.g. /work/venvs/t215/bin/python). `--check`
exits 1 and names each row whose `torch.<dotted>` is missing.
"""

from __future__ import annotations

import argparse
import inspect
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # check this checkout's torchmend, whatever the interpreter has installed

from torchmend.analysis.torch_api import SPELLINGS  # noqa: E402
from torchmend.profiler.hotspots import parse_version  # noqa: E402


def resolve(torch: Any, dotted: str) -> bool:
    obj = torch
    for part in dotted.split("."):
        if not hasattr(obj, part):
            return False
        obj = getattr(obj, part)
    return True


def check(torch: Any) -> list[str]:
    version = parse_version(torch.__version__)
    assert version is not None
    return [
        f"torch {torch.__version__}: torch.{s.dotted} (for {s.api}, since {s.since}) does not exist"
        for s in SPELLINGS
        if s.holds(version) and not resolve(torch, s.dotted)
    ]


def facts(torch: Any) -> list[str]:
    params = inspect.signature(torch.compile).parameters
    return [
        f"torch {torch.__version__}",
        "torch.compile keywords: " + ", ".join(p for p in params if p != "model"),
        f"torch.compiler.nonstrict_trace: {resolve(torch, 'compiler.nonstrict_trace')}, "
        f"torch._dynamo.nonstrict_trace: {resolve(torch, '_dynamo.nonstrict_trace')}",
        f"torch.compiler.disable: {resolve(torch, 'compiler.disable')}",
        f"torch.compiler.maybe_mark_dynamic: {resolve(torch, 'compiler.maybe_mark_dynamic')}",
    ]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--facts", action="store_true")
    args = ap.parse_args()
    import torch

    if args.facts:
        print("\n".join(facts(torch)))
        return 0
    problems = check(torch)
    print("\n".join(problems) if problems else f"ok: torch {torch.__version__}, {len(SPELLINGS)} spellings")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
