"""propose(), review() and accept_all(): a proposed change (or why there is none) for every finding, and the
session that accepts them."""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from torchmend import sources
from torchmend.model import Finding, Placement
from torchmend.pipeline.inputs import root_of
from torchmend.project import Project
from torchmend.values import Selection

if TYPE_CHECKING:  # heavy (libcst, the runner): imported by the stage that needs it
    from torchmend.codemods.base import NoFix, Proposal
    from torchmend.codemods.engine import Session
    from torchmend.codemods.review import Ask, Decision


UNSAFE_OPTION = "--unsafe-fixes"  # the one spelling of the opt-in, in what a refused unsafe change says


class Alone(NamedTuple):
    """One proposal's file as it is and with that proposal alone applied."""

    path: str  # real and absolute
    display: str  # relative to the project root
    before: str
    after: str

    def diff(self) -> str:
        """The unified diff of the change (applies with `git apply` from the project root)."""
        from torchmend.codemods.engine import unified_diff

        return unified_diff(self.display, self.before, self.after)


@dataclass
class Fixes:
    """The proposals for a scan's findings and the session that accepts them; what is accepted is what gets
    verified and written (`session.accepted`). Callers above the pipeline (the CLI, the pytest plugin) use the
    methods below, not the session: display(), line_of(), alone(), where()."""

    session: Session
    proposals: list[Proposal]  # in file and line order: the order review() asks in
    unfixed: list[NoFix]  # findings no codemod could fix, each with the reason (the skipped ones left out)

    @property
    def accepted(self) -> list[Proposal]:
        return list(self.session.accepted)

    def display(self, path: str) -> str:
        """A path as the project shows it: relative to its root."""
        return self.session.display(path)

    def line_of(self, p: Proposal) -> int:
        """The first line (in the file as it is) of what a proposal touches."""
        from torchmend.codemods.engine import span

        return span(self.session.ctx.file(p.path), p)[0]

    def where(self, p: Proposal) -> str:
        """`path:line` of a proposal, the path relative to the project."""
        return f"{self.display(p.path)}:{self.line_of(p)}"

    def alone(self, p: Proposal) -> Alone:
        """A proposal's file as it is and with that proposal alone applied, whatever else is accepted."""
        from torchmend.codemods.engine import apply

        source = self.session.ctx.file(p.path)
        return Alone(source.path, self.display(p.path), source.text, apply(source, [p]))

    def withdraw_unjudged(self) -> list[Proposal]:
        """Take back the accepted changes only a run can judge (`Proposal.reduces`: a last resort whose break
        stays and is recorded fewer times), for a write nobody verifies (--no-verify, findings from a trace).
        Returns them."""
        unjudged = [p for p in self.session.accepted if p.reduces]
        for p in unjudged:
            self.session.withdraw(p)
        return unjudged

    def changes(self) -> dict[str, tuple[str, str]]:
        """path -> (text now, text with the accepted changes) for every file they change."""
        return self.session.changed()

    def change_diffs(self) -> list[tuple[Proposal, str]]:
        """Each accepted proposal with its own unified diff (on top of the ones accepted before it)."""
        from torchmend.codemods.engine import unified_diff

        return [(p, unified_diff(self.session.display(p.path), a, b)) for p, a, b in self.session.steps()]

    def diff(self) -> str:
        """One unified diff of the accepted changes (applies with `git apply` from the project root)."""
        from torchmend.codemods.engine import unified_diff

        return "".join(
            unified_diff(self.session.display(path), before, after) for path, (before, after) in self.changes().items()
        )


def propose(
    findings: Iterable[Finding],
    root: Project | Path,
    selection: Selection = Selection(),
    read: Callable[[str], str] = sources.read_source,
    torch_version: str | None = None,
    placements: tuple[Placement, ...] = (),
) -> Fixes:
    """A proposal (or a NoFix with the reason) for every finding; nothing is accepted yet. `torch_version`: the
    release the code runs on (the scanned run's, or installed_torch()), whose spelling of the torch APIs the fixes
    write (analysis/torch_api.py); None: the newest read. The findings are taken as they are: a scan's are
    select()ed already; `selection` skips rules here too (for findings from elsewhere: its select and ignore)."""
    from torchmend.analysis.source import Context
    from torchmend.codemods.base import NoFix, Proposal
    from torchmend.codemods.engine import Session, span
    from torchmend.profiler.hotspots import parse_version

    session = Session(
        Context(str(root_of(root)), read, torch_version=parse_version(torch_version), placements=placements)
    )
    results = session.propose(findings, selection)
    proposals = sorted(
        (r for r in results if isinstance(r, Proposal)), key=lambda p: (p.path, span(session.ctx.file(p.path), p))
    )
    unfixed = [r for r in results if isinstance(r, NoFix) and not r.skipped]
    return Fixes(session, proposals, unfixed)


def review(fixes: Fixes) -> Generator[Ask, str, list[Decision]]:
    """The accept/reject loop (codemods/review.py): `next()` gives the first Ask (the proposal and its diff
    against what is accepted so far), `send(key)` with a git-add-p key (y n a d q) the next; StopIteration
    carries the Decisions."""
    from torchmend.codemods.review import review as loop

    return loop(fixes.session, fixes.proposals)


def accept_all(fixes: Fixes, unsafe: bool = False, random_stream: bool = False) -> list[Decision]:
    """Accept every safe proposal (the unsafe ones too with `unsafe`, the random-stream ones only with
    `random_stream`: Settings.unsafe and .random_stream), skipping those that overlap."""
    from torchmend.codemods.review import accept_all as accept

    return accept(fixes.session, fixes.proposals, unsafe, UNSAFE_OPTION, random_stream)
