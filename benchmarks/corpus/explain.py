"""Why each finding of a scan is left: what `fix` would do with it, asked of torchmend itself (no script is run).

    python explain.py SCAN.json PROJECT_ROOT [--allow-random-stream]  > reasons.json

Runs in the benchmark venv with the torchmend under test (run.py puts it on PYTHONPATH). For every finding of the
scan (`torchmend scan --format json`) it prints one JSON object: the finding's rule, GB id, place, count and the
scan's reason, and `fix`: `proposal` (a codemod proposes a change: it was refused by verification, withdrawn as
unhelpful, or conflicted), `not_fixable` (with torchmend's reason and advice) or `skipped` (informational, nothing
to fix). `fix` and `why` are null when this torchmend has no `pipeline.propose` (the API moved). A change of the
random stream (LayerDrop) proposed when fix ran without `--allow-random-stream` (not passed here either) says so
first: fix never applies one without the opt-in, whatever verification would say.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main() -> None:
    scan = json.loads(Path(sys.argv[1]).read_text())
    root = Path(sys.argv[2])
    allowed = "--allow-random-stream" in sys.argv[3:]
    from torchmend.model import Finding

    findings = [Finding.from_json(f) for f in scan.get("findings", [])]
    verdicts: dict[int, tuple[str, str, str]] = {}
    try:
        from torchmend import pipeline
        from torchmend.codemods.base import NoFix, Proposal

        session_results = pipeline.propose(findings, root)
        for p in session_results.proposals:
            assert isinstance(p, Proposal)
            for f in p.findings:
                why = f"{p.rule} {p.safety}: {p.why}"
                if p.safety == "random-stream" and not allowed:
                    why = f"needs --allow-random-stream (it changes the random stream, keeps the distribution): {why}"
                verdicts[id(f)] = ("proposal", why, p.note or "")
        for n in session_results.unfixed:
            assert isinstance(n, NoFix)
            verdicts[id(n.finding)] = ("not_fixable", n.reason, n.advice)
    except (ImportError, AttributeError) as e:  # an older or newer torchmend: keep the scan's own reasons
        print(f"explain: torchmend's proposals are not available here ({e})", file=sys.stderr)
        verdicts = {id(f): (None, None, None) for f in findings}  # type: ignore[misc]
    rows = []
    for raw, f in zip(scan.get("findings", []), findings):
        fix, why, advice = verdicts.get(id(f), ("skipped", "", ""))
        user = raw.get("user_frame") or {}
        rows.append(
            {
                "rule": raw.get("rule"),
                "gb_id": raw.get("gb_id"),
                "kind": raw.get("kind"),
                "severity": raw.get("severity"),
                "where": raw.get("where"),
                "file": raw.get("file"),
                "line": raw.get("line"),
                "function": raw.get("function"),
                "user_frame": f"{user['file']}:{user['line']}" if user else None,
                "count": raw.get("count"),
                "reason": raw.get("reason"),
                "code": raw.get("code"),
                "fix": fix,
                "why": why,
                "advice": advice,
            }
        )
    json.dump(rows, sys.stdout, indent=1)


if __name__ == "__main__":
    main()
