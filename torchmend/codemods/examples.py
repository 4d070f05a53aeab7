"""Findings written into example sources as comments, so a codemod's examples are plain Python files.

    y = x / temperature  # tm: TM202 variable=temperature
    loss = step(x, temperature)  # tm-call-site
    def forward(self, x):  # tm-compiled

`# tm: RULE key=value ...` marks the line a finding names (keys: any Finding field, e.g. `variable`,
`guard`, `pattern`; `where=library` puts the finding inside a library, reached from this line).
`# tm-call-site` and `# tm-compiled` give every finding in the file its call site and compiled function;
`# tm-call-site traced` marks a call site that itself runs inside compiled code (the live stack's view).
`# tm-placement a,b.c model=Cls` on a compile call: the run found its compile of a `Cls` broke inside and the
submodules `a`, `b.c` compiled cleanly (a Placement, profiler/placement.py).
Used by the inline VALID/INVALID examples of each codemod and the fixtures/codemods pairs; comments
survive rewrites, so a rewritten file carries its findings too (that is how idempotency is tested).
"""

from __future__ import annotations

import os
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

from torchmend import rules
from torchmend.analysis.source import Context
from torchmend.codemods.base import NoFix, Proposal, Result
from torchmend.codemods.engine import Conflict, Session
from torchmend.model import Finding, Location, Pattern, Placement, Severity, Where
from torchmend.values import Root

_MARK = re.compile(r"#\s*tm:\s*(?P<rule>TM\d{3})(?P<rest>[^#]*)")
_CALL_SITE = re.compile(r"#\s*tm-call-site\b")
_TRACED = re.compile(r"#\s*tm-call-site\s+traced\b")
_COMPILED = re.compile(r"#\s*tm-compiled\b")
_PLACEMENT = re.compile(r"#\s*tm-placement\s+(?P<modules>\S+)(?:\s+model=(?P<model>\w+))?")
_DEF = re.compile(r"^\s*(?:async\s+)?def\s+(\w+)")
_LIBRARY_FILE = "/usr/lib/python3/site-packages/torch/optim/optimizer.py"
EXAMPLE_ROOT = Root(Path("/tm-example"))  # the folder an example's file is in (it need not exist)


def _function_at(lines: list[str], line: int) -> str:
    indent = len(lines[line - 1]) - len(lines[line - 1].lstrip())
    for i in range(line - 1, -1, -1):
        mdef = _DEF.match(lines[i])
        if mdef and (i == line - 1 or len(lines[i]) - len(lines[i].lstrip()) < indent):
            return mdef.group(1)
    return "<module>"


def _code(text: str) -> str:
    return text.split("#")[0].strip()


def findings_from_markers(path: str, text: str, root: Root) -> list[Finding]:
    lines = text.splitlines()
    rel = os.path.relpath(path, root.path)

    def loc(i: int) -> Location:
        return Location(file=rel, line=i, function=_function_at(lines, i), path=path, code=_code(lines[i - 1]))

    call_site = next((loc(i) for i, t in enumerate(lines, 1) if _CALL_SITE.search(t)), None)
    if call_site is not None and _TRACED.search(lines[call_site.line - 1]):
        call_site = replace(call_site, traced=True)
    compiled = next((loc(i) for i, t in enumerate(lines, 1) if _COMPILED.search(t)), None)
    found = []
    for i, t in enumerate(lines, 1):
        mark = _MARK.search(t)
        if not mark:
            continue
        rule = rules.BY_CODE[mark.group("rule")]
        fields: dict[str, Any] = dict(kv.split("=", 1) for kv in mark.group("rest").split())
        where = fields.pop("where", Where.PROJECT)
        recompile = rule.kind != rules.GRAPH_BREAK
        base: dict[str, Any]
        base = dict(
            rule=rule.code,
            kind=rule.kind,
            title=rule.title,
            reason="(example)",
            count=2,
            severity=Severity.FIX,
            pattern=Pattern.STORM if recompile else None,
            call_site=call_site,
            compiled_function=compiled,
            code=_code(t),
        )
        if where == Where.LIBRARY:
            base.update(
                file=_LIBRARY_FILE, line=1, function="step", path=_LIBRARY_FILE, where=Where.LIBRARY, user_frame=loc(i)
            )
        else:
            base.update(file=rel, line=i, function=_function_at(lines, i), path=path, where=Where.PROJECT)
        for number in ("count", "nested"):
            if number in fields:
                fields[number] = int(fields[number])
        base.update(fields)
        if "where" in fields:
            fields["where"] = Where(fields["where"])
        found.append(Finding(**base))
    return found


def placements_from_markers(path: str, text: str) -> tuple[Placement, ...]:
    out = []
    for i, t in enumerate(text.splitlines(), 1):
        mark = _PLACEMENT.search(t)
        if mark:
            modules = tuple(mark.group("modules").split(","))
            model = mark.group("model") or "Model"
            out.append(Placement(path=path, line=i, model=model, modules=modules, broken=("head",), share=0.9))
    return tuple(out)


def fix_text(
    text: str,
    name: str = "example.py",
    root: Root = EXAMPLE_ROOT,
    unsafe: bool = True,
    torch_version: tuple[int, ...] | None = None,
    random_stream: bool = True,
) -> tuple[str, list[Result]]:
    """Propose fixes for the marked findings and accept every one (unsafe too, unless told not to), in
        order, skipping conflicts, as `fix --yes --unsafe-fixes` would, spelling torch as `torch_version` does (None: the
        newest release read), and the changes of the random stream unless `random_stream` is False (fix's
    --allow-random-stream). Returns the new text and the results."""
    path = str(root.path / name)
    ctx = Context(
        str(root),
        lambda p: text if p == path else Path(p).read_text(),
        torch_version=torch_version,
        placements=placements_from_markers(path, text),
    )
    session = Session(ctx)
    results = session.propose(findings_from_markers(path, text, root))
    for r in results:
        if isinstance(r, Proposal) and (random_stream if r.safety == "random-stream" else unsafe or r.safety == "safe"):
            try:
                session.accept(r)
            except Conflict:
                pass
    return session.text(path), results


def proposals(results: list[Result]) -> list[Proposal]:
    return [r for r in results if isinstance(r, Proposal)]


def unfixed(results: list[Result]) -> list[NoFix]:
    return [r for r in results if isinstance(r, NoFix)]
