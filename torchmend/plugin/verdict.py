"""What the pytest plugin decides about one recorded test, and how it says so. No torch, no pytest here: the events
come from profiler/inprocess.py, and they are read as scan reads a child's (findings.analyse, then the suppression
comments and [tool.torchmend] select/ignore/per-file-ignores through pipeline.select, the stage scan applies).

    Limits.from_marker(kwargs)   the marker's or the fixture's arguments, checked
    judge(events, root, ...)     the Verdict: findings kept, counts, which limits were exceeded
    explain(verdict)             the failure message: each finding with its rule, file:line, count, reason, fix, docs
    fix_diffs(verdict)           the codemod diff of each finding (--torchmend-fix-diff; nothing is written)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from torchmend import rules
from torchmend.config import Config
from torchmend.model import Finding, Kind, Location, Severity, Summary

# The rule pages (the same address SARIF's helpUri gives: torchmend/cli/formats/sarif.py RULE_DOCS).
RULE_DOCS = "https://github.com/torchmend/torchmend/blob/main/docs/rules/{code}.md"
_KEYS = ("graph_breaks", "recompiles", "max_graphs", "ignore")


class LimitsError(ValueError):
    """The marker or fixture was given something it does not take."""


def _shown(value: Any) -> str:
    """A wrong value with its type, as the usage message names it: `None`, `5 (int)`, `'no' (str)`."""
    return "None" if value is None else f"{value!r} ({type(value).__name__})"


@dataclass(frozen=True)
class Limits:
    """What a test allows. None: not checked. graph_breaks and recompiles count the findings left after
    suppressions (informational ones, PyTorch's own deliberate breaks, never count); max_graphs counts every graph
    compiled."""

    graph_breaks: int | None = 0
    recompiles: int | None = 0
    max_graphs: int | None = None
    ignore: tuple[str, ...] = ()

    @classmethod
    def from_marker(cls, kwargs: Mapping[str, Any], args: tuple[Any, ...] = ()) -> Limits:
        if args:
            raise LimitsError(f"takes keyword arguments only ({', '.join(_KEYS)}), not {args!r}")
        unknown = [k for k in kwargs if k not in _KEYS]
        if unknown:
            raise LimitsError(f"unknown argument {', '.join(unknown)}: it takes {', '.join(_KEYS)}")
        values: dict[str, Any] = {}
        for key in ("graph_breaks", "recompiles", "max_graphs"):
            if key in kwargs:
                v = kwargs[key]
                if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
                    raise LimitsError(f"{key} must be a whole number >= 0 or None (not checked), not {_shown(v)}")
                values[key] = v
        ignore = kwargs.get("ignore", ())
        # A list, tuple or set only: a string, None, a number or a generator is not a list of codes, and an empty
        # code would be a prefix of every rule.
        if not isinstance(ignore, (list, tuple, set, frozenset)) or not all(isinstance(c, str) and c for c in ignore):
            raise LimitsError(
                f"ignore must be a list of rule codes or prefixes (['TM104', 'TM2']), not {_shown(ignore)}"
            )
        unknown_codes = [c for c in ignore if not any(r.startswith(c) for r in rules.BY_CODE)]
        if unknown_codes:
            raise LimitsError(f"ignore: {', '.join(unknown_codes)} is no rule code (`torchmend rules` lists them)")
        return cls(**values, ignore=tuple(ignore))

    @staticmethod
    def flag(name: str, value: Any) -> bool:
        """A True/False argument (the fixture's reset), strictly: "no" or 0 is not taken for a bool."""
        if not isinstance(value, bool):
            raise LimitsError(f"{name} must be True or False, not {_shown(value)}")
        return value

    def words(self) -> str:
        parts = [f"{k}={getattr(self, k)}" for k in ("graph_breaks", "recompiles", "max_graphs")]
        return ", ".join(parts) + (f", ignore={list(self.ignore)}" if self.ignore else "")


@dataclass
class Verdict:
    test: str
    limits: Limits
    summary: Summary
    findings: list[Finding]  # kept after suppressions and select/ignore, informational ones included
    suppressed: list[Finding]
    root: Path
    exceeded: list[str] = field(default_factory=list)  # one line per limit the test went over
    error: str | None = None  # the block raised (its own failure is pytest's to report)
    # Recorded from a dynamo reset: then compiling nothing means nothing was checked. Without a reset (after a
    # warm-up, the fixture's reset=False) compiling nothing is the steady state the block is there to check.
    fresh: bool = True

    @property
    def graph_breaks(self) -> int:
        return sum(f.count for f in self.counted if f.kind == Kind.GRAPH_BREAK)

    @property
    def recompiles(self) -> int:
        return sum(f.count for f in self.counted if f.kind in (Kind.RECOMPILE, Kind.RECOMPILE_LIMIT))

    @property
    def counted(self) -> list[Finding]:
        return [f for f in self.findings if f.severity != Severity.INFO]

    @property
    def compiled_nothing(self) -> bool:
        return self.summary.compiles == 0 and self.summary.recompile_limit_hits == 0

    @property
    def failed(self) -> bool:
        return bool(self.exceeded) or (self.compiled_nothing and self.fresh)

    def to_json(self) -> dict[str, Any]:
        return {
            "test": self.test,
            "passed": not self.failed and self.error is None,
            "compiled_nothing": self.compiled_nothing,
            "fresh": self.fresh,
            "limits": {k: getattr(self.limits, k) for k in _KEYS[:3]} | {"ignore": list(self.limits.ignore)},
            "graphs": self.summary.graphs,
            "graph_breaks": self.graph_breaks,
            "recompiles": self.recompiles,
            "compiles": self.summary.compiles,
            "compile_seconds": self.summary.compile_seconds,
            "exceeded": self.exceeded,
            "suppressed": len(self.suppressed),
            "error": self.error,
            "findings": [f.to_json() for f in self.findings],
        }


def judge(
    events: list[dict[str, Any]],
    root: Path,
    config: Config,
    limits: Limits,
    test: str,
    wall_seconds: float = 0.0,
    fresh: bool = True,
) -> Verdict:
    """Read the recorded events as scan does and hold them against `limits`."""
    from dataclasses import replace

    from torchmend import pipeline
    from torchmend.profiler.findings import analyse
    from torchmend.project import Project

    end: dict[str, Any] = next((e for e in reversed(events) if e.get("ev") == "end"), {})
    ended_by = "error" if end.get("reason") == "error" else "finished"
    findings, summary = analyse(events, root, ended_by, wall_seconds)
    settings = config.resolve()  # the marker's ignore adds to the configuration's
    settings = replace(settings, selection=settings.selection.ignoring(*limits.ignore))
    # Unused suppressions (TM903) are left out: a test runs a small part of the code, so most would be noise.
    kept, suppressed, _ = pipeline.select(findings, Project(root, config), settings)
    error = end.get("error") if ended_by == "error" else None
    v = Verdict(test, limits, summary, kept, suppressed, root, error=error, fresh=fresh)
    for name, count, limit in (
        ("graph break", v.graph_breaks, limits.graph_breaks),
        ("recompile", v.recompiles, limits.recompiles),
        ("graph", summary.graphs, limits.max_graphs),
    ):
        if limit is not None and count > limit:
            v.exceeded.append(f"{count} {name}{'s' * (count != 1)} (allowed: {limit})")
    return v


def _fix_words(f: Finding) -> str:
    rule = rules.BY_CODE.get(f.rule)
    if rule is None or rule.informational:
        return "informational: nothing to change in your code"
    codemod = rules.FIXES.get(f.rule) or rules.FIXES.get(f.cause or "")
    if codemod:
        return f"`torchmend fix` rewrites it (codemod {codemod}); --torchmend-fix-diff prints the change"
    return rules.GB_ADVICE.get(f.gb_id or "") or rule.advice or "see the rule's page"


def finding_text(f: Finding) -> str:
    """One finding as the plugin prints it: the rule, the user's file:line, the count, the line, the reason (the
    words every torchmend format shares: cli/formats/annotation.py), the fix or advice, and the rule's page."""
    from torchmend.cli.formats.annotation import Lines, message, place

    where = place(f, Lines())
    at = f"{where.file}:{where.line}"
    head = f"{f.rule} {f.title} at {at}" + (f" in {f.function}" if f.function else "") + f" ({f.count}×)"
    lines = [head]
    if f.code:
        lines.append(f"    {f.code}")
    lines += [f"  {line}" for line in message(f, where).splitlines()]
    lines.append(f"  fix: {_fix_words(f)}")
    lines.append(f"  rule: {RULE_DOCS.format(code=f.rule)}")
    return "\n".join(lines)


def summary_words(v: Verdict) -> str:
    s = v.summary
    return (
        f"{s.frames_compiled} frame{'s' * (s.frames_compiled != 1)} compiled, {s.graphs} graph{'s' * (s.graphs != 1)}, "
        f"{v.graph_breaks} graph break{'s' * (v.graph_breaks != 1)}, {v.recompiles} recompile{'s' * (v.recompiles != 1)}"
        f", {s.compile_seconds:.2f} s compiling"
        + (f"; {len(v.suppressed)} finding{'s' * (len(v.suppressed) != 1)} suppressed" if v.suppressed else "")
    )


def explain(v: Verdict) -> str:
    """The failure message (empty when the test passed)."""
    if v.compiled_nothing and v.fresh:
        return (
            "torchmend: this test compiled nothing: no function under torch.compile ran while it was recorded, so "
            "there is no graph, break or recompile to check. Call the compiled model or function inside the test "
            "(or inside the `with torchmend_compile(...)` block); a model compiled with backend='eager' still "
            "compiles, torch.compiler.disable or torch._dynamo.config.disable=True does not."
        )
    if not v.exceeded:
        return ""
    out = [f"torchmend: {'; '.join(v.exceeded)} [{v.limits.words()}]", summary_words(v), ""]
    counted = [f for f in v.counted if f.kind in (Kind.GRAPH_BREAK, Kind.RECOMPILE, Kind.RECOMPILE_LIMIT)]
    out += [finding_text(f) + "\n" for f in counted]
    if not counted:
        out.append("(no finding to show: every graph break and recompile was suppressed; max_graphs counts them all)")
    return "\n".join(out).rstrip() + "\n"


def fix_diffs(v: Verdict, torch_version: str | None, entry: Location | None = None) -> str:
    """The codemod diff of each counted finding, each alone on the file as it is (nothing is written), or why
    there is none. `entry`: the test function, where the recorded code was entered from when the run did not say
    (a graph break): a setting placed before the compile call goes before the test's own compile."""
    from dataclasses import replace

    from torchmend import pipeline

    findings = [f for f in v.counted if f.kind in (Kind.GRAPH_BREAK, Kind.RECOMPILE, Kind.RECOMPILE_LIMIT)]
    if entry is not None:
        findings = [f if f.entry is not None else replace(f, entry=entry) for f in findings]
    fixes = pipeline.propose(findings, v.root, torch_version=torch_version)
    out = []
    for p in fixes.proposals:  # nothing is accepted, so no proposal overlaps another
        what = ", ".join(sorted({f"{f.rule} at {f.file}:{f.line}" for f in p.findings}))
        out.append(f"{what}: {p.why} ({p.safety})\n{fixes.alone(p).diff()}")
    for n in fixes.unfixed:
        out.append(
            f"{n.finding.rule} at {n.finding.file}:{n.finding.line}: no diff: {n.reason}"
            + (f"; {n.advice}" if n.advice else "")
        )
    return "\n".join(out)
