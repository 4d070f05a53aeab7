"""The rounds of one verification stage (pipeline/stages.py runs the stages): a refusal costs only the changes it is
due to (found by the failing line, else by bisection), their fallbacks tried in their place; a change that did not
help is withdrawn and the rest verified once more; a follow-up round may add a safe last resort."""

from __future__ import annotations

import os
from collections.abc import Callable, Generator, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from torchmend.pipeline.comparison import RunStarted, verify
from torchmend.pipeline.events import (
    MAX_PROBES,
    MAX_ROUNDS,
    NONE_HELPED,
    REFUSED,
    STILL_UNHELPFUL,
    VERIFIED,
    Dropped,
    Event,
    FollowUp,
    FoundBy,
    Probe,
    Refusal,
    Retry,
    Round,
    Verified,
)
from torchmend.values import Root, Tolerance
from torchmend.verify.reasons import Reason, ReasonKind

if TYPE_CHECKING:  # heavy (libcst, the runner) or annotations only: imported by the stage that needs it
    from torchmend.codemods.base import Proposal
    from torchmend.codemods.engine import Session
    from torchmend.model import Finding
    from torchmend.profiler.runner import RunSpec
    from torchmend.verify.compare import Verification
    from torchmend.verify.failure import RunFailure
    from torchmend.verify.runs import ArmRun


class Judge:
    """The runs of one verify_rounds(): the original's compiled runs (reused), its eager run (made once, when a
    difference in numbers first needs the eager reference), and a verdict for any set of the changes."""

    def __init__(
        self,
        before: RunSpec,
        root: Root,
        repeat: int,
        tolerance: Tolerance,
        on_run: Callable[[RunStarted], None] | None,
        reuse: tuple[ArmRun, ...],
        timed: bool = True,
    ) -> None:
        self.before, self.root, self.repeat, self.tolerance = before, root, repeat, tolerance
        self.on_run, self.reuse, self.timed = on_run, reuse, timed
        self.eager: dict[str, ArmRun] = {}  # the original's eager run, made once

    def verify(
        self, session: Session, proposals: Sequence[Proposal], versions: dict[str, str]
    ) -> tuple[Verification, list[ArmRun], list[ArmRun]]:
        """These changes applied, against the original: the verdict (with the eager reference and the noise band
        when the numbers differ, and the known PyTorch hazard of a change's shape when the compiler is to blame),
        the before-runs and the after-runs."""
        from torchmend.codemods.base import RANDOM_STREAM
        from torchmend.profiler.hazards import hazards_for
        from torchmend.verify.compare import REFUSED as REFUSED_VERDICT
        from torchmend.verify.failure import caused_by
        from torchmend.verify.reasons import ReasonKind
        from torchmend.verify.reference import COMPILER, KNOWN_DIVERGENCES, RESTORED

        outputs_of = tuple(sorted({name for p in proposals for name in p.outputs_of}))
        after = replace(self.before, overlay=_overlay(session, proposals), outputs_of=outputs_of)
        if any(p.safety == RANDOM_STREAM for p in proposals):
            strict = [p for p in proposals if p.safety != RANDOM_STREAM]
            restored: list[str] = []
            if strict:  # the strict changes keep the strict gate: verified alone first, number for number
                v, b_runs, a_runs = self.verify(session, strict, versions)
                if v.verdict == REFUSED_VERDICT:
                    # its failing line is one of the strict-only text, not of every change's: the culprit search
                    # bisects instead of reading it
                    failure = v.failure and replace(v.failure, line=0)
                    return replace(v, failure=failure), b_runs, a_runs
                if v.reference is not None and v.reference.whose == RESTORED:  # checked against the eager run
                    restored = [f"the other changes, verified alone first: {v.reference.describe()}"]
            dv, b_runs, a_runs = self._in_distribution(after, kept_coverage(proposals))
            return dv.noted(*restored, first=True), b_runs, a_runs
        v, b_runs, a_runs = verify(
            self.before, after, self.root, self.repeat, self.tolerance, self.reuse, self.on_run, True, self.eager,
            self.timed, kept_coverage(proposals),
        )  # fmt: skip
        self.reuse = tuple(b_runs)

        def explained(kind: ReasonKind, cause: str) -> Verification:
            return replace(v, reasons=tuple(r.with_cause(cause) if r.kind == kind else r for r in v.reasons))

        why = caused_by(v.failure, {p.shape for p in proposals}) if v.failure is not None else ""
        if why:
            v = explained(ReasonKind.CRASH, why)
        if v.reference is not None and v.reference.whose == COMPILER:
            known = {h.name: h for p in proposals for h in hazards_for(p.shape, versions)}
            v = explained(
                ReasonKind.MISCOMPILE, "; ".join(f"a known PyTorch hazard: {h.describe()}" for h in known.values())
            )
        causes = dict.fromkeys(KNOWN_DIVERGENCES[p.shape] for p in proposals if p.shape in KNOWN_DIVERGENCES)
        return v.with_cause("; ".join(causes)), b_runs, a_runs

    def _in_distribution(
        self, after: RunSpec, kept: tuple[str, ...] | None = None
    ) -> tuple[Verification, list[ArmRun], list[ArmRun]]:
        """A change of the random stream among these: each arm once per seed, the counts judged on the first
        seed's runs, the numbers as distributions (verify/stochastic.py) instead of bit for bit."""
        from torchmend.verify.compare import COVERAGE, judge
        from torchmend.verify.reasons import Reason, ReasonKind
        from torchmend.verify.stochastic import compare_distributions, failed_seeds, seeded_runs, seeds_for

        seeds = seeds_for(self.before)
        total = len(seeds) * 2 - (1 if self.reuse and self.before.seed is not None else 0)
        count = iter(range(1, total + 1))

        def started(arm: str, i: int) -> None:
            if self.on_run is not None:
                self.on_run(RunStarted(f"{arm} (seed {seeds[i]})", i, next(count), total))

        reuse = self.reuse[0] if self.reuse and self.before.seed is not None else None
        b, a = seeded_runs(self.before, after, self.root, seeds, reuse, started)
        self.reuse = (b[0],)
        # counts and failures of the first seed, the times of every seed; the numbers are judged below. A huge finite
        # tolerance, not inf: inf * 0 is nan, which would refuse a parameter whose magnitude is 0 (SeamlessM4TModel).
        v = judge(
            b[:1],
            a[:1],
            Tolerance(1e300, 1e300),
            self.root,
            timing=(b, a),
            timed=self.timed,
            backend=self.before.backend or "",
            kept=COVERAGE if kept is None else kept,
        )
        dist = compare_distributions(seeds, [r.end for r in b], [r.end for r in a])
        failed = failed_seeds(seeds, b, a, self.root)
        if failed:  # a run without losses is its failure, named with its seed (a LayerDrop path that crashes)
            dist = replace(dist, problem=failed)
        v = replace(v, numerics=None, distribution=dist)
        if not dist.equivalent and v.failure is None:
            v = v.refused(Reason(ReasonKind.DISTRIBUTION, dist.describe()))
        return v, b[:1], a[:1]


def _overlay(session: Session, proposals: Sequence[Proposal]) -> tuple[tuple[str, str], ...]:
    """(path, text) for every file these proposals change, as the child serves them."""
    from torchmend.codemods.engine import apply

    out = []
    for path in dict.fromkeys(p.path for p in proposals):
        source = session.ctx.file(path)
        text = apply(source, [p for p in proposals if p.path == path])
        if text != source.text:
            out.append((source.path, text))
    return tuple(out)


def _by_line(session: Session, proposals: Sequence[Proposal], failure: RunFailure | None) -> list[Proposal]:
    """The changes whose edited lines hold the line the patched run failed at (mapped back to the original)."""
    from torchmend.codemods.engine import span
    from torchmend.verify.attribution import new_to_old

    if failure is None or not failure.line:
        return []
    changes = session.changed()
    path = next((p for p in changes if os.path.abspath(p) == failure.path), None)
    if path is None:
        return []
    old = new_to_old(*changes[path]).get(failure.line, failure.line)
    mine = [p for p in proposals if p.path == path]
    spans = {id(p): span(session.ctx.file(path), p) for p in mine}
    exact = [p for p in mine if spans[id(p)][0] <= old <= spans[id(p)][1]]
    return exact or [p for p in mine if spans[id(p)][0] <= old <= spans[id(p)][1] + 1]


def _culprits(
    judge: Judge, session: Session, v: Verification, versions: dict[str, str], probes: list[Probe]
) -> tuple[list[Proposal], FoundBy, Verification]:
    """The accepted changes a refusal is due to, how they were found, and the verdict that refused them: the
    change whose lines the failure names; the only change; else a bisection over the changes, each half verified
    alone (MAX_PROBES runs at most); a refusal no half shows alone is the whole set's."""
    from torchmend.verify.compare import REFUSED as REFUSED_VERDICT

    accepted = list(session.accepted)
    named = _by_line(session, accepted, v.failure)
    if named:
        return named, FoundBy.FAILING_LINE, v
    if len(accepted) == 1:
        return accepted, FoundBy.ONLY_CHANGE, v
    suspects, verdict = accepted, v
    while len(suspects) > 1 and len(probes) < MAX_PROBES:
        half = len(suspects) // 2
        found: tuple[list[Proposal], Verification] | None = None
        for part in (suspects[:half], suspects[half:]):
            if len(probes) >= MAX_PROBES:
                break
            pv, _, _ = judge.verify(session, part, versions)
            probes.append(Probe(tuple(part), pv))
            if pv.verdict == REFUSED_VERDICT:
                found = (part, pv)
                break
        if found is None:
            break  # neither half is refused alone (or the probes are spent): the changes fail together
        suspects, verdict = found
    return suspects, (FoundBy.BISECTION if len(suspects) < len(accepted) else FoundBy.TOGETHER), verdict


def rounds(
    judge: Judge, session: Session, versions: dict[str, str], tried: list[Refusal], follow_up: bool
) -> Generator[Event, None, Verified]:
    """One stage's rounds on `judge`'s runs: yields Round, Probe, Dropped, Retry, FollowUp; returns the Verified."""
    from torchmend.verify.attribution import attribute
    from torchmend.verify.compare import NO_CHANGE
    from torchmend.verify.compare import REFUSED as REFUSED_VERDICT

    retried = False
    followed: tuple[Proposal, ...] = ()  # the follow-up changes under verification
    good: Verification | None = None  # the verdict of the round before them
    for number in range(1, MAX_ROUNDS + 1):
        changes = session.changed()
        v, _, a_runs = judge.verify(session, list(session.accepted), versions)
        if followed and good is not None:  # the follow-up round: kept only if it verifies and helps
            return (
                yield from _follow_up_verdict(number, v, a_runs[0].findings, session, changes, followed, good, tried)
            )
        if v.verdict == REFUSED_VERDICT:
            yield Round(number, v, ())
            ended = yield from _after_refusal(judge, session, v, versions, tried)
            if ended is not None:
                return ended
            continue
        effects = attribute(list(session.accepted), a_runs[0].findings, changes)
        yield Round(number, v, tuple(effects))
        useless = tuple(e.proposal for e in effects if not e.helped)
        if v.verdict == NO_CHANGE and not useless:
            # Each targeted finding went, but as many came elsewhere (a layer's code compiled again for the next
            # layer): together they fixed nothing, so none of them is kept.
            useless = tuple(session.accepted)
        if not useless:
            added = (
                _follow_ups(session, a_runs[0].findings, changes, [r.proposal for r in tried])
                if follow_up and number < MAX_ROUNDS
                else []
            )
            if added:
                followed, good = tuple(added), v
                yield FollowUp(followed)
                continue
            return Verified(VERIFIED, tuple(session.accepted), v, tuple(tried))
        for p in useless:
            session.withdraw(p)
        if not session.accepted or retried:
            break
        retried = True
        yield Retry(useless)
    else:
        return Verified(REFUSED, tuple(session.accepted), v, tuple(tried))
    return Verified(STILL_UNHELPFUL if session.accepted else NONE_HELPED, tuple(session.accepted), v, tuple(tried))


def _follow_up_verdict(
    number: int,
    v: Verification,
    after: Sequence[Finding],
    session: Session,
    changes: dict[str, tuple[str, str]],
    followed: tuple[Proposal, ...],
    good: Verification,
    tried: list[Refusal],
) -> Generator[Event, None, Verified]:
    """The follow-up round's Round, and the Verified that ends the rounds (returned): with the follow-up changes
    when they verify and help, else without them (Dropped), on the verdict of the round before them."""
    from torchmend.verify.attribution import attribute
    from torchmend.verify.compare import REFUSED as REFUSED_VERDICT

    effects = attribute(list(session.accepted), list(after), changes)
    yield Round(number, v, () if v.verdict == REFUSED_VERDICT else tuple(effects))
    # Helping is judged against the round they follow: its findings gone, and none of the counts more than before.
    helped = all(e.helped for e in effects if e.proposal in followed) and _fewer(v, good)
    if v.verdict != REFUSED_VERDICT and helped:
        return Verified(VERIFIED, tuple(session.accepted), v, tuple(tried))
    reasons = (
        tuple(v.reasons)
        if v.verdict == REFUSED_VERDICT
        else (Reason(ReasonKind.NOT_HELPING, "it did not make its findings fewer"),)
    )
    for p in followed:
        session.withdraw(p)
    tried += [Refusal(p, FoundBy.FOLLOW_UP, reasons) for p in followed]
    yield Dropped(tuple(tried[-len(followed) :]))
    return Verified(VERIFIED, tuple(session.accepted), good, tuple(tried), kept_earlier=True)


def _after_refusal(
    judge: Judge, session: Session, v: Verification, versions: dict[str, str], tried: list[Refusal]
) -> Generator[Event, None, Verified | None]:
    """A refused round: find the culprits (Probes), swap them for their next candidates or withdraw them
    (Dropped). Returns the Verified when the rounds end here (nothing is left to verify), else None."""
    from torchmend.codemods.engine import Conflict

    probes: list[Probe] = []
    culprits, found_by, why = _culprits(judge, session, v, versions, probes)
    yield from probes
    # Culprits with a next candidate are swapped for it first and the others kept: changes refused only
    # together may verify once one of them takes another form. Without candidates, the culprits go.
    swappable = [p for p in culprits if any(no_less_safe(fb, p) for fb in p.fallbacks)]
    if swappable:
        culprits = swappable
    elif len(culprits) == len(session.accepted):
        tried += [Refusal(p, found_by, tuple(why.reasons)) for p in culprits]
        return Verified(REFUSED, tuple(session.accepted), v, tuple(tried))
    refused = []
    for p in culprits:
        session.withdraw(p)
        fallback = next((fb for fb in p.fallbacks if no_less_safe(fb, p)), None)
        if fallback is not None:
            rest = tuple(fb for fb in p.fallbacks if fb is not fallback)
            fallback = replace(fallback, findings=p.findings, fallbacks=rest)
            try:
                session.accept(fallback)
            except Conflict:
                fallback = None
        refused.append(Refusal(p, found_by, tuple(why.reasons), fallback))
    tried += refused
    yield Dropped(tuple(refused), again=bool(session.accepted))
    if not session.accepted:
        return Verified(REFUSED, (), v, tuple(tried))
    return None


def _follow_ups(
    session: Session, after: Sequence[Finding], changes: dict[str, tuple[str, str]], tried: Sequence[Proposal]
) -> list[Proposal]:
    """The safe last resorts the patched run's findings ask for, each finding at its line in the original file (the
    session proposes against the original sources), accepted into the session; none on a conflict, none that makes
    the edit of a change refused on the way (`tried`)."""
    from torchmend.codemods.engine import Conflict
    from torchmend.verify.attribution import new_to_old

    maps = {path: new_to_old(old, new) for path, (old, new) in changes.items()}
    back = [replace(f, line=maps[f.path].get(f.line, f.line)) if f.path in maps else f for f in after]
    added = []
    for p in session.last_resorts_for(back, tried):
        try:
            session.accept(p)
        except Conflict:
            continue
        added.append(p)
    return added


def kept_coverage(proposals: Sequence[Proposal]) -> tuple[str, ...] | None:
    """The coverage counts a patch must keep: all (None), or fewer where a change says so (compile placement: none,
    its coverage is the share of the parameters it compiles; the fragments between the whole model's breaks go
    eager by design)."""
    from torchmend.verify.compare import COVERAGE

    kept = [set(p.kept_coverage) for p in proposals if p.kept_coverage is not None]
    return tuple(n for n in COVERAGE if all(n in k for k in kept)) if kept else None


def _fewer(v: Verification, good: Verification) -> bool:
    """Whether the patched runs of `v` show fewer problems than those of `good` (the round before) and no more of any."""
    now, then = v.problems_after(), good.problems_after()
    return all(now[k] <= then.get(k, now[k]) for k in now) and any(now[k] < then.get(k, now[k]) for k in now)


def no_less_safe(fallback: Proposal, p: Proposal) -> bool:
    """A fallback takes a refused change's place only when it is no less safe (what the user accepted covers it)."""
    from torchmend.codemods.base import SAFE

    return fallback.safety == SAFE or p.safety != SAFE
