"""No codemod raises, whatever the source and the finding: every codemod's `propose` is called directly (not
through the engine, whose safety net would hide the bug) on every fixture source and on a file of awkward but
valid shapes (codemod pairs that change nothing included: there a crash the engine turned into a NoFix
would pass unseen), with a synthetic finding of each of its rules at every line that holds code, inside the project
and as a library finding reached from that line."""

from __future__ import annotations

import functools
import re
from dataclasses import replace
from pathlib import Path

import libcst as cst
import pytest

from torchmend import rules
from torchmend.analysis.source import Context, SourceError
from torchmend.codemods.base import NoFix, Proposal
from torchmend.codemods.engine import ask
from torchmend.codemods.registry import codemods
from torchmend.model import Finding, Location, Pattern, Severity, Where

ROOT = Path(__file__).resolve().parents[2]
SOURCES = sorted(
    [
        *ROOT.glob("fixtures/scan/*/*.py"),
        *ROOT.glob("fixtures/awkward/*.py"),
        *ROOT.glob("fixtures/codemods/*/noop*.in.py"),
    ]
)
LIBRARY_FILE = "/usr/lib/python3/site-packages/torch/optim/optimizer.py"
_NAME = re.compile(r"\b([A-Za-z_]\w*)\b")
_ATTR = re.compile(r"\bself\.(\w+)")
_DEF = re.compile(r"^\s*(?:async\s+)?def\s+(\w+)")
_STAR = re.compile(r"(?<![*\w])\*{1,2}([A-Za-z_]\w*)")


def _variables(rule: str, code: str) -> list[str | None]:
    """Plausible guarded variables for a rule on a line: what torch names for that kind of guard."""
    names = [n for n in _NAME.findall(code) if n not in ("def", "return", "if", "for", "in", "self")]
    attrs = [f"self.{a}" for a in _ATTR.findall(code)[:1]]
    if rule.startswith("TM1"):
        return [None]
    if rule == "TM203":
        return ["self.param_groups[0]['lr']", "___as_tensor(self.param_groups[0]['lr']).item()"]
    if rule == "TM205":
        return ["___stack0"]
    if rule == "TM206":
        return [f"G['{n}']" for n in names[:1]] or [None]
    # A wrapper's packed `*args` / `**kwargs` as a whole (`len(args) == 2`: called with another number of arguments)
    stars = [f"{s}" for s in _STAR.findall(code)[:2]]
    return [None, *names[:1], *attrs, *stars]


def _findings(path: Path, text: str) -> list[Finding]:
    lines = text.splitlines()
    rel = path.name
    found = []
    fn_name, fn_line = "<module>", 1
    for i, line in enumerate(lines, 1):
        mdef = _DEF.match(line)
        if mdef:
            fn_name, fn_line = mdef.group(1), i
        code = line.split("#")[0].strip()
        if not code:
            continue
        here = Location(file=rel, line=i, function=fn_name, path=str(path), code=code)
        compiled = Location(file=rel, line=fn_line, function=fn_name, path=str(path))
        for rule in rules.RULES:
            if rule.informational:
                continue
            for variable in _variables(rule.code, code):
                base = dict(
                    rule=rule.code,
                    kind=rule.kind,
                    title=rule.title,
                    reason="(synthetic)",
                    count=3,
                    severity=Severity.FIX,
                    pattern=None if rule.kind == rules.GRAPH_BREAK else Pattern.STORM,
                    variable=variable,
                    guard=f"{variable} == 1.0" if variable else None,
                    code=code,
                    call_site=here,
                    compiled_function=compiled,
                    cause="TM203" if rule.code == "TM250" and variable and "param_groups" in variable else None,
                )
                found.append(Finding(file=rel, line=i, function=fn_name, path=str(path), where=Where.PROJECT, **base))
                if variable is None or rule.code == "TM203":
                    found.append(
                        Finding(
                            file=LIBRARY_FILE,
                            line=1,
                            function="step",
                            path=LIBRARY_FILE,
                            where=Where.LIBRARY,
                            user_frame=here,
                            **base,
                        )
                    )
    return found


@functools.cache
def _context(folder: Path) -> Context:
    """One Context per fixture folder, as one fix run has one: the folder's other scripts are parsed once (a
    codemod that places a config line looks for the project's compile call in each), not once per fixture."""
    return Context(str(folder), lambda p: Path(p).read_text())


@pytest.mark.parametrize("path", SOURCES, ids=[str(p.relative_to(ROOT)) for p in SOURCES])
def test_no_codemod_raises(path: Path) -> None:
    text = path.read_text()
    ctx = _context(path.parent)
    by_rule = {code: cm for cm in codemods() for code in cm.rules}
    by_gb = {gb: cm for cm in codemods() for gb in cm.gb_ids}
    found = _findings(path, text)
    # A catch-all graph break with an id a codemod of its own takes, as in a comprehension's frame
    found += [replace(f, gb_id=gb, function="<dictcomp>") for f in found if f.rule == "TM199" for gb in by_gb]
    failures = []
    for finding in found:
        codemod = (
            by_rule.get(finding.cause or finding.rule) or by_rule.get(finding.rule) or by_gb.get(finding.gb_id or "")
        )
        if codemod is None:
            continue
        try:
            result = ask(codemod, finding, ctx)  # as the engine asks: a Delegate resolved
        except SourceError:
            continue  # a file the codemod reports it cannot read: a clean refusal
        except Exception as e:  # noqa: BLE001 - the point of the test
            failures.append(
                f"{codemod.name} on {finding.rule} at line {finding.line} "
                f"(variable={finding.variable!r}, where={finding.where}): {type(e).__name__}: {e}"
            )
            continue
        assert isinstance(result, (Proposal, NoFix))
        if isinstance(result, Proposal):
            for node in result.replace.values():  # the replacement renders
                if isinstance(node, cst.CSTNode):
                    cst.Module([]).code_for_node(node)
    failures = (
        sorted(set(f.split(" (variable")[0].split(" on ")[0] + ": " + f.split("): ", 1)[1] for f in failures))
        if failures
        else failures
    )
    assert not failures, "\n".join(failures[:20]) + (f"\n... {len(failures)} in all" if len(failures) > 20 else "")


def test_an_exception_in_one_codemod_costs_only_its_finding(monkeypatch: pytest.MonkeyPatch) -> None:
    from torchmend.codemods.examples import fix_text
    from torchmend.codemods.fixes.gate_output import GatePrint

    def boom(self, finding, ctx):  # type: ignore[no-untyped-def]
        raise ZeroDivisionError("planted")

    monkeypatch.setattr(GatePrint, "propose", boom)
    source = (
        "import logging\nimport torch\nlog = logging.getLogger(__name__)\n\n"
        "def f(x):\n    print(x)  # tm: TM101\n    log.info('x')  # tm: TM102\n    return x\n"
    )
    text, results = fix_text(source)
    broken = [r for r in results if isinstance(r, NoFix) and r.finding.rule == "TM101"]
    assert broken and broken[0].reason.startswith("internal error in gate-print: ZeroDivisionError: planted")
    assert any(isinstance(r, Proposal) and r.rule == "TM102" for r in results)
    assert "if not torch.compiler.is_compiling():\n        log.info('x')" in text
