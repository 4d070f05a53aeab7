"""The engine: asks the codemods for proposals, applies accepted ones in one pass per file, diffs.

Pure: no printing, no file writes. Sources come in through `Context.read`; new texts go out as strings.
The preview of a proposal is computed against what is already accepted, so what is shown is what gets
written, and overlapping proposals are refused rather than merged by text.
"""

from __future__ import annotations

import difflib
import logging
import os
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path

import libcst as cst

from torchmend import rules
from torchmend.analysis.source import Context, SourceError, SourceFile
from torchmend.codemods.base import Codemod, Delegate, NoFix, Proposal, Refuse, Result
from torchmend.codemods.registry import codemod_for, codemod_for_finding, last_resorts
from torchmend.model import Finding, Where
from torchmend.values import Root, Selection

log = logging.getLogger("torchmend")


class _Apply(cst.CSTTransformer):
    def __init__(self, proposals: Sequence[Proposal]) -> None:
        super().__init__()
        self.replace: dict[cst.CSTNode, object] = {}
        self.before: dict[cst.CSTNode, list[cst.BaseStatement]] = defaultdict(list)
        self.after: dict[cst.CSTNode, list[cst.BaseStatement]] = defaultdict(list)
        for p in proposals:
            self.replace.update(p.replace)
            for node, stmts in p.insert_before.items():
                self.before[node].extend(stmts)
            for node, stmts in p.insert_after.items():
                self.after[node].extend(stmts)

    def on_leave(self, original_node, updated_node):
        result = self.replace.get(original_node, updated_node)
        before, after = self.before.get(original_node), self.after.get(original_node)
        if not (before or after):
            return result
        middle = (
            list(result.nodes)
            if isinstance(result, cst.FlattenSentinel)
            else ([] if isinstance(result, cst.RemovalSentinel) else [result])
        )
        before = list(before or [])
        lines = list(getattr(middle[0], "leading_lines", ())) if middle else []
        blank = next((i for i, line in enumerate(lines) if line.comment is not None), len(lines))
        if before and blank and not before[0].leading_lines:
            # blank lines that set the statement apart stay above what is inserted before it (comments stay on it)
            before[0] = before[0].with_changes(leading_lines=lines[:blank])
            middle[0] = middle[0].with_changes(leading_lines=lines[blank:])
        return cst.FlattenSentinel([*before, *middle, *(after or [])])


def apply(source: SourceFile, proposals: Sequence[Proposal]) -> str:
    """The file's text with these proposals applied (in one pass), imports added once each."""
    if not proposals:
        return source.text
    tree = source.module.visit(_Apply(proposals))
    imports = {imp for p in proposals for imp in p.imports}
    if imports:
        # Imported here: libcst.codemod imports libcst.matchers, a second of every command's start (analysis/match.py)
        from libcst.codemod import CodemodContext
        from libcst.codemod.visitors import AddImportsVisitor

        context = CodemodContext()
        for module, name in sorted(imports, key=lambda i: (i[0], i[1] or "")):
            AddImportsVisitor.add_needed_import(context, module, name)
        tree = AddImportsVisitor(context).transform_module(tree)
    return source.restore(tree.code)  # a large file: libcst saw a window of it


def unified_diff(display: str, before: str, after: str) -> str:
    """A unified diff `git apply` and `patch -p1` accept (a/ and b/ prefixes, relative path)."""
    # A name with a space ends with a tab, as GNU diff writes it (before the date): patch(1) reads it whole.
    end = "\t" if any(c.isspace() for c in display) else ""
    lines = difflib.unified_diff(
        before.splitlines(keepends=True), after.splitlines(keepends=True), f"a/{display}{end}", f"b/{display}{end}"
    )
    out = []
    for line in lines:
        out.append(line)
        if not line.endswith("\n"):  # last line without a newline: say so, as diff(1) does
            out.append("\n\\ No newline at end of file\n")
    return "".join(out)


def span(source: SourceFile, proposal: Proposal) -> tuple[int, int]:
    """First and last line (in the original file) of what the proposal touches."""
    ranges = [source.positions[n] for n, _ in proposal.anchors() if n in source.positions]
    return min(r.start.line for r in ranges), max(r.end.line for r in ranges)


def ask(codemod: Codemod, finding: Finding, ctx: Context) -> Result:
    """The codemod's answer for the finding, a `Delegate` resolved: the codemod of the rule it hands the finding to
    answers instead (once: a second hand-over is a codemod bug, answered as a NoFix). A `Refuse` that leaves
    `propose` is the NoFix it carries."""
    try:
        answer = codemod.propose(finding, ctx)
        if not isinstance(answer, Delegate):
            return answer
        if answer.rule not in codemod.delegates_to:
            raise RuntimeError(f"{codemod.name} hands {answer.rule} a finding without declaring it in delegates_to")
        other = codemod_for(answer.rule)
        if other is None:
            raise RuntimeError(f"{codemod.name} hands the finding to {answer.rule}, which has no codemod")
        again = other.propose(answer.finding, ctx)
        if isinstance(again, Delegate):
            raise RuntimeError(f"{other.name} hands back to {again.rule} a finding {codemod.name} handed it")
        return again
    except Refuse as e:
        return NoFix(finding, e.reason, e.advice)


class Conflict(Exception):
    """The proposal overlaps one already accepted; accepting both would mean editing edited code."""


class Session:
    """One fixing session over a project: propose, preview, accept, and the resulting texts."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.accepted: list[Proposal] = []

    # --- proposing ----------------------------------------------------------------------------------

    def propose(self, findings: Iterable[Finding], selection: Selection = Selection()) -> list[Result]:
        """A Proposal or a NoFix for every finding; findings that one edit fixes together share a Proposal. A
        finding whose rule `selection` leaves out gets a skipped NoFix."""
        findings = list(findings)
        self.ctx.focus(findings)  # a large file is parsed around these lines
        results: list[Result] = []
        for f in findings:
            results.append(self._propose_one(f, selection))
        return self._merge(results)

    def _propose_one(self, f: Finding, selection: Selection) -> Result:
        """The finding's own codemod's answer, then the last resorts (registry.last_resorts): the first of theirs
        that applies stands in for a NoFix (whose reason becomes its alternative), and all of them become the last
        fallbacks of a source fix (tried only when verification refuses it). Where the finding's own answer is a
        global setting and a last resort is a local change (compile placement), the local change goes first and the
        setting becomes its fallback."""
        own = self._propose_own(f, selection)
        if isinstance(own, NoFix) and own.skipped:
            return own
        extra: list[Proposal] = []
        for cm in last_resorts():
            try:
                r = self._checked(f, ask(cm, f, self.ctx))
            except Exception:  # a bug or an unreadable file costs the last resort, never the finding's own answer
                log.debug("internal error in %s on %s:%s", cm.name, f.file, f.line, exc_info=True)
                continue
            if isinstance(r, Proposal):
                extra.append(r)
        if not extra:
            return own
        local = next((p for p in extra if not p.global_setting), None)
        if isinstance(own, Proposal) and own.global_setting and local is not None:
            # a local source change before a global setting: the setting is the local change's fallback
            rest = tuple(p for p in extra if p is not local)
            return replace(local, fallbacks=(replace(own, fallbacks=()), *own.fallbacks, *rest))
        if isinstance(own, Proposal):
            return replace(own, fallbacks=own.fallbacks + tuple(extra))
        why_not = own.reason + (f"; {own.advice}" if own.advice else "")
        return replace(extra[0], fallbacks=tuple(extra[1:]), alternative=f"for the break itself: {why_not}")

    def last_resorts_for(self, findings: Iterable[Finding], tried: Iterable[Proposal] = ()) -> list[Proposal]:
        """The safe last-resort proposals (registry.last_resorts) for findings a patched run showed, merged, leaving
        out what is accepted already and what makes the same edit as a change `tried` (refused on the way): the
        changes a second verification round may add (pipeline/rounds.py)."""
        found: list[Result] = []
        for f in findings:
            for cm in last_resorts():
                try:
                    r = self._checked(f, ask(cm, f, self.ctx))
                except Exception:
                    log.debug("internal error in %s on %s:%s", cm.name, f.file, f.line, exc_info=True)
                    continue
                if isinstance(r, Proposal) and r.safety == "safe":
                    found.append(r)
        accepted = {(p.path, apply(self.ctx.file(p.path), [p])) for p in (*self.accepted, *tried)}
        merged = [r for r in self._merge(found) if isinstance(r, Proposal)]
        return [p for p in merged if (p.path, apply(self.ctx.file(p.path), [p])) not in accepted]

    def _checked(self, f: Finding, result: Result) -> Result:
        """A last resort's proposal, when it edits the project and still compiles."""
        if isinstance(result, Proposal) and (not self.ctx.in_project(result.path) or self._check(result)):
            return NoFix(f, "no last-resort fix that edits the project and compiles", skipped=True)
        return result

    def _propose_own(self, f: Finding, selection: Selection) -> Result:
        rule = rules.BY_CODE.get(f.rule)
        if rule is None or rule.informational:
            return NoFix(f, "informational: nothing to change in your code", skipped=True)
        if f.expected:  # a parallel wrapper's own break (profiler/parallel.py): not the user's to fix
            return NoFix(f, f.expected, skipped=True)
        if not selection.selects(f.rule):
            return NoFix(f, "not selected (--select/--ignore)", skipped=True)
        codemod = codemod_for_finding(f.rule, f.cause, f.gb_id)
        if codemod is None:
            advice = rules.gb_advice(f.gb_id, f.function)
            if advice:
                return NoFix(f, f"no source-level fix for {f.rule} ({rule.name}, PyTorch's {f.gb_id})", advice)
            return NoFix(f, f"no source-level fix for {f.rule} ({rule.name})", rule.advice)
        try:
            result = ask(codemod, f, self.ctx)
        except SourceError as e:
            return NoFix(f, str(e))
        except Exception as e:  # a codemod bug costs this finding its fix, never the other proposals
            log.debug("internal error in %s on %s:%s", codemod.name, f.file, f.line, exc_info=True)
            return NoFix(
                f,
                f"internal error in {codemod.name}: {type(e).__name__}: {e} (please report it; "
                "the traceback is in the log with TORCHMEND_LOG=debug)",
            )
        if isinstance(result, Proposal):
            if not self.ctx.in_project(result.path):
                return NoFix(
                    f,
                    f"the fix would edit {result.path}, which is outside the project: torchmend never edits libraries",
                )
            problem = self._check(result)
            if problem:
                return NoFix(f, problem)
            good = tuple(fb for fb in result.fallbacks if not self._check(fb))
            if good != result.fallbacks:
                result = replace(result, fallbacks=good)
        elif f.where != Where.PROJECT and not result.skipped and f.user_frame is None:
            return NoFix(
                f, result.reason + " (the finding is inside a library and no frame of yours reached it)", result.advice
            )
        return result

    def _check(self, p: Proposal) -> str:
        """A codemod bug must surface as a NoFix, not as a broken file: the result must still compile."""
        text = apply(self.ctx.file(p.path), [p])
        try:
            compile(text, p.path, "exec", dont_inherit=True)
        except SyntaxError as e:
            return f"torchmend produced invalid code for this fix ({e.msg}); please report it"
        return ""

    def _merge(self, results: list[Result]) -> list[Result]:
        merged: list[Result] = []
        by_text: dict[tuple[str, str], int] = {}
        for r in results:
            if isinstance(r, Proposal):
                key = (r.path, apply(self.ctx.file(r.path), [r]))
                if key in by_text:
                    i = by_text[key]
                    old = merged[i]
                    assert isinstance(old, Proposal)
                    findings = old.findings + r.findings
                    fallbacks = tuple(replace(fb, findings=findings) for fb in old.fallbacks)
                    merged[i] = replace(old, findings=findings, fallbacks=fallbacks)
                    continue
                by_text[key] = len(merged)
            merged.append(r)
        return merged

    # --- reviewing ----------------------------------------------------------------------------------

    def conflict(self, p: Proposal) -> str:
        """Why `p` cannot be accepted on top of what is accepted, or ''."""
        source = self.ctx.file(p.path)
        for q in self.accepted:
            if q.path != p.path:
                continue
            for a, a_replaces in p.anchors():
                for b, b_replaces in q.anchors():
                    if not (a_replaces or b_replaces):
                        continue
                    if a is b or a in set(source.ancestors(b)) or b in set(source.ancestors(a)):
                        line = source.line_of(b)
                        return f"it overlaps the accepted fix for {q.rule} at line {line}"
        return ""

    def text(self, path: str) -> str:
        """The file as it will be written: the original with every accepted proposal applied."""
        source = self.ctx.file(path)
        return apply(source, [p for p in self.accepted if p.path == source.path])

    def preview(self, p: Proposal) -> tuple[str, str]:
        """(text now, text after also accepting `p`). Raises Conflict."""
        why = self.conflict(p)
        if why:
            raise Conflict(why)
        source = self.ctx.file(p.path)
        mine = [q for q in self.accepted if q.path == source.path]
        return apply(source, mine), apply(source, [*mine, p])

    def accept(self, p: Proposal) -> None:
        why = self.conflict(p)
        if why:
            raise Conflict(why)
        self.accepted.append(p)

    def withdraw(self, p: Proposal) -> None:
        """Take back an accepted proposal (verification showed it did not help): text() and changed() follow."""
        self.accepted.remove(p)

    def steps(self) -> list[tuple[Proposal, str, str]]:
        """Each accepted proposal with its file's text before and after it, the earlier accepted ones applied: the
        diff of each change as review showed it, in the order they were accepted."""
        out: list[tuple[Proposal, str, str]] = []
        for i, p in enumerate(self.accepted):
            source = self.ctx.file(p.path)
            earlier = [q for q in self.accepted[:i] if q.path == source.path]
            out.append((p, apply(source, earlier), apply(source, [*earlier, p])))
        return out

    def changed(self) -> dict[str, tuple[str, str]]:
        """path -> (original text, new text) for every file the accepted proposals change."""
        out: dict[str, tuple[str, str]] = {}
        for path in dict.fromkeys(p.path for p in self.accepted):
            source = self.ctx.file(path)
            new = self.text(path)
            if new != source.text:
                out[source.path] = (source.text, new)
        return out

    def display(self, path: str) -> str:
        """An edited file as the diff headers name it: where it really is, under the root's real folder (fix edits
        no file a link puts outside the project, project.check_editable)."""
        real = os.path.realpath(path)
        root = Root(Path(self.ctx.project_root)).real()
        return root.display(real) if root.contains(real) else os.path.relpath(real, root.path)
