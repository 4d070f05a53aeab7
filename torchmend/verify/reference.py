"""The eager reference: when the patched compiled run's numbers differ from the original's, the same two scripts
run without compiling (the child replaces torch.compile with identity, as tune's eager arm) tell whose
difference it is, and how far the original's own compiled run is from its eager run.

- The **noise band** is the original's compiled-vs-eager spread: the largest relative difference of its losses
  and parameters between the two modes (reassociation, fusion, AdamW turning float noise on a zero gradient into
  whole learning-rate steps). A patch is equal when the patched compiled run is within max(rtol, band) of the
  original compiled run: no looser than what compiling the original itself costs.
- **Whose change**: the patched script run eagerly against the original run eagerly. Different: the rewrite
  changed the math. The same, while the patched compiled run differs from the patched eager run beyond the band:
  the compiler mis-compiled the rewritten code (profiler/hazards.py may know the release and the upstream fix).
- **The eager program restored**: the patched compiled run equals the original *eager* run (fixed tolerance), the
  two scripts compute the same eagerly, and the original compiled run is what differs from them. The patch made
  the compiled program compute what the program computes without compile (a helper drawing NumPy random numbers,
  which dynamo had traced on torch's generator, runs eagerly again): accepted, and the verdict says so.
- **A random stream is not noise**: when the original's compiled run drew host random numbers through dynamo
  (TM110 findings in it), its compiled-vs-eager spread is a different random stream, so no band is measured; and
  when the patched compiled run still draws them, its difference from its eager run is no miscompile either.
- **A script that does not compute the same twice** (CUDA's atomic adds in a scatter, an index or a CTC backward;
  an unseeded generator): the original's own runs against each other, its repeated compiled runs and, before the
  rewrite is blamed, a second eager run, give its **run-to-run noise**. The band is at least that; a rewrite is
  said to change the math, or the compiler to mis-compile, only far beyond it (BLAME_FACTOR), else the reference
  says it cannot tell, and why.

Pure: comparisons of END events (verify/numerics.py); the runs are made by the caller.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from torchmend.model import StrEnum
from torchmend.values import Tolerance
from torchmend.verify.numerics import Comparison, compare
from torchmend.verify.reasons import ReasonKind
from torchmend.verify.runs import ArmRun

# The rewrite or the compiler is blamed for a difference only beyond this many times the original's own run-to-run
# noise: with one sample each way, a difference a few times the noise is chance (the ratio of two such samples has a
# heavy tail). It words a refusal; what is accepted is still judged within the measured band itself.
BLAME_FACTOR = 10.0
EAGER_COMPILE = (("eager", True),)  # RunSpec.compile for a run without torch.compile (collector.override_compile)


class Whose(StrEnum):
    """Whose the numerics difference is, as the eager runs tell it (a member is its word)."""

    REWRITE = "rewrite"
    COMPILER = "compiler"
    NEITHER = "neither"  # the eager runs did not settle it
    RESTORED = "restored"  # the patched compiled run equals the original eager run


REWRITE, COMPILER, NEITHER, RESTORED = Whose.REWRITE, Whose.COMPILER, Whose.NEITHER, Whose.RESTORED
# Known reasons an original compiled run differs from its eager run, by the `Proposal.shape` of the change that
# undoes them (said when the eager program is restored).
KNOWN_DIVERGENCES = {
    "disable-host-random-helper": "dynamo's NumPy random stream (under compile `np.random` draws from torch's "
    "generator; the patched helper draws from NumPy's again, as eagerly)",
}


def spread(c: Comparison) -> float:
    """The largest relative difference a comparison saw: losses, parameters, outputs of compiled functions."""
    worst = c.worst_param.rel_diff if c.worst_param is not None else 0.0
    return max(c.max_rel_diff, worst, c.max_output_rel_diff)


def host_random(run: ArmRun) -> bool:
    """Whether the run drew NumPy's or Python's random numbers in compiled code (TM110): then its compiled run
    used another random stream than its eager run, and their spread is not noise."""
    return any(f.rule == "TM110" for f in run.findings)


def band_of(compiled: ArmRun, eager: ArmRun) -> float | None:
    """The original's own compiled-vs-eager spread, or None when it cannot be measured (a run failed, the two
    recorded different numbers of losses or parameters, or the compiled run drew host random numbers through
    dynamo: then it is not noise)."""
    return None if host_random(compiled) else _spread_between(compiled, eager)


def _spread_between(one: ArmRun, other: ArmRun) -> float | None:
    """How far two runs of the original are apart, or None when that is no noise: a run failed, or they recorded
    different numbers of losses (they went different ways)."""
    if one.failed or other.failed:
        return None
    c = compare(one.end, other.end)
    if c.losses_before != c.losses_after:
        return None
    value = spread(c)
    return value if math.isfinite(value) else None


def noise_of(runs: Sequence[ArmRun]) -> float | None:
    """The original's run-to-run noise: the largest spread of its first run against each other one (same mode,
    same script), or None when fewer than two ran through or they went different ways (not noise)."""
    ran = [r for r in runs if not r.failed]
    values = [_spread_between(ran[0], other) for other in ran[1:]]
    return None if not values or None in values else max(v for v in values if v is not None)


def banded(fixed: Tolerance, band: float | None) -> Tolerance:
    """The tolerance the gate applies: the fixed relative one, or the band when that is larger (atol as fixed)."""
    return Tolerance(max(fixed.rtol, band or 0.0) * (1 + 1e-9), fixed.atol)  # the band is within it, rounded


@dataclass(frozen=True)
class Reference:
    band: float | None  # the original's compiled-vs-eager spread (None: not measured)
    rtol: float  # the fixed tolerance
    whose: Whose
    rewrite: Comparison | None  # original eager vs patched eager
    compiled: Comparison | None  # patched eager vs patched compiled
    eager_failed: str = ""  # which eager run failed, if one did
    restored: Comparison | None = None  # original eager vs patched compiled (fixed tolerance)
    original: Comparison | None = None  # original eager vs original compiled (fixed tolerance)
    stream: bool = False  # the original's compiled run drew host random numbers through dynamo (no band then)
    # the original's own runs against each other (None: one run each; 0: it computes the same twice); the band is at
    # least this, and blame needs BLAME_FACTOR times it
    noise: float | None = None
    patched_stream: bool = False  # the patched compiled run still draws host random numbers through dynamo
    # why the original compiled run differed from its eager run, where the change that restored it is known
    # (KNOWN_DIVERGENCES, by the change's shape: the rounds know the changes, this module does not)
    cause: str = ""

    @property
    def tolerance(self) -> float:
        return banded(Tolerance(self.rtol), self.band).rtol

    @property
    def noisy(self) -> bool:
        """Whether the original was measured not to compute the same twice."""
        return bool(self.noise)

    def noise_text(self) -> str:
        return (
            f"the original does not compute the same twice: its own runs differ from each other by {self.noise:.2g} "
            "relative (a nondeterministic kernel such as an atomic add, or an unseeded generator)"
        )

    def band_text(self) -> str:
        if self.noisy:
            assert self.band is not None and self.noise is not None
            spread = (
                f"the original's own compiled run differs from its eager run by {self.band:.2g} relative, and "
                if self.band > self.noise
                else ""
            )
            return (
                f"noise band: {spread}{self.noise_text()}; the gate allows max(rtol {self.rtol:g}, band) = "
                f"{self.tolerance:.2g}"
            )
        if self.band is None and self.stream:
            return (
                "no noise band: the original's compiled run drew NumPy or Python random numbers through dynamo "
                f"(TM110), so its compiled-vs-eager spread is another random stream, not noise; fixed tolerance {self.rtol:g}"
            )
        if self.band is None:
            return f"the original's compiled-vs-eager spread could not be measured; fixed tolerance {self.rtol:g}"
        return (
            f"noise band: the original's own compiled run differs from its eager run by {self.band:.2g} relative; "
            f"the gate allows max(rtol {self.rtol:g}, band) = {max(self.rtol, self.band):.2g}"
        )

    @property
    def kind(self) -> ReasonKind:
        """The kind of reason this reference gives a refusal: measured math change, measured miscompile, or none."""
        return {REWRITE: ReasonKind.MATH_CHANGED, COMPILER: ReasonKind.MISCOMPILE}.get(
            self.whose, ReasonKind.UNEXPLAINED
        )

    def describe(self) -> str:
        """Whose difference it is, in words (with the known cause of the original's divergence, when restored)."""
        if self.whose == RESTORED:
            assert self.restored is not None and self.original is not None
            return (
                f"the patched compiled run equals the original eager run ({self.restored.agreed()}); the original "
                f"compiled run differed from it ({_divergence(self.original)})"
                + (f": {self.cause}" if self.cause else "")
            )
        if self.whose == REWRITE:
            assert self.rewrite is not None
            return f"the rewrite changed the math: run eagerly, the patched script differs from the original ({self.rewrite.describe()})"
        if self.whose == COMPILER:
            assert self.compiled is not None
            return (
                "the compiler mis-compiled the rewritten code: run eagerly, the patched script computes what the "
                "original does; compiled, it does not"
            )
        if self.eager_failed:
            return (
                f"the eager reference could not tell whose difference it is: the {self.eager_failed} eager run failed"
            )
        if not (self.rewrite and self.rewrite.compared and self.compiled and self.compiled.compared):
            return (
                "the eager reference could not tell whose difference it is: the eager runs recorded nothing to compare"
            )
        if self.patched_stream and self.compiled is not None and not self.compiled.equal:
            return (
                "the eager reference could not tell whose difference it is: both scripts compute the same eagerly, "
                "and the patched compiled run still draws NumPy or Python random numbers through dynamo (TM110), so "
                "its eager run is another random stream, not a check of the compiler"
            )
        if self.noisy:
            return (
                f"the eager reference could not tell whose difference it is: {self.noise_text()}, and run eagerly "
                "the patched script is not far beyond that from the original; to verify changes to such a script, "
                "make its run deterministic (torch.use_deterministic_algorithms(True), seeded generators)"
            )
        return (
            "the eager reference could not tell whose difference it is: both scripts compute the same eagerly and "
            "the patched one compiles to what it computes eagerly, within the band"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "band": self.band,
            "rtol": self.rtol,
            "tolerance": self.tolerance,
            "whose": self.whose,
            "eager_failed": self.eager_failed,
            "host_random": self.stream,
            "noise": self.noise,
        }


def _divergence(eager_vs_compiled: Comparison) -> str:
    """How the original's compiled run differs from its eager run, short: the first loss apart, else the parameter
    that differs most, else the comparison's own words."""
    d, w = eager_vs_compiled.first_divergence, eager_vs_compiled.worst_param
    if d is not None and d.before is not None and d.after is not None:
        return f"loss at step {d.step}: {d.after!r} compiled, {d.before!r} eagerly"
    if eager_vs_compiled.params_equal is False and w is not None:
        return f"parameter {w.index} differs by {w.rel_diff:.2g} relative"
    return eager_vs_compiled.describe()


def reference(
    before_compiled: ArmRun,
    before_eager: ArmRun,
    after_compiled: ArmRun,
    after_eager: ArmRun,
    fixed: Tolerance = Tolerance(),
    *,
    compiled_again: Sequence[ArmRun] = (),
    eager_again: ArmRun | None = None,
) -> Reference:
    """Whose difference it is, from the four runs (the band from the original's two). `compiled_again`: the
    original's other compiled runs (the judging stage's repeats); `eager_again`: a second eager run of the original.
    Either measures its run-to-run noise."""
    noises = [
        n
        for n in (
            noise_of([before_compiled, *compiled_again]),
            noise_of([before_eager, eager_again]) if eager_again is not None else None,
        )
        if n is not None
    ]
    noise = max(noises) if noises else None
    measured = band_of(before_compiled, before_eager)
    band = max(measured or 0.0, noise) if noise else measured
    stream = host_random(before_compiled)
    patched_stream = host_random(after_compiled)

    def said(whose: Whose, rewrite: Comparison | None, compiled: Comparison | None, **more: Any) -> Reference:
        return Reference(
            band, fixed.rtol, whose, rewrite, compiled, stream=stream, noise=noise, patched_stream=patched_stream,
            **more,
        )  # fmt: skip

    failed = " and ".join(n for n, r in (("original", before_eager), ("patched", after_eager)) if r.failed)
    if failed:
        return said(NEITHER, None, None, eager_failed=failed)
    # Eager against eager: the same program runs the same ops, so only the fixed tolerance applies (a float
    # buffer's float32 arithmetic in place of Python's doubles stays far inside it), widened only by what the
    # original's own runs differ by.
    blame = noise * BLAME_FACTOR if noise else None
    rewrite = compare(before_eager.end, after_eager.end, banded(fixed, blame))
    compiled = compare(after_eager.end, after_compiled.end, banded(fixed, max(band or 0.0, blame or 0.0) or None))
    if not (rewrite.compared and compiled.compared):  # nothing recorded eagerly: no evidence either way
        return said(NEITHER, rewrite, compiled)
    # The patched compiled run against the original eager run, with the fixed tolerance: the program as it means
    # to compute, restored under compile where the original compiled run was what differed.
    restored = compare(before_eager.end, after_compiled.end, fixed)
    original = compare(before_eager.end, before_compiled.end, fixed)
    if rewrite.equal and restored.compared and restored.equal and not original.equal and not after_compiled.failed:
        return said(RESTORED, rewrite, compiled, restored=restored, original=original)
    # a patched compiled run that draws host random numbers through dynamo is another random stream than its
    # eager run: their difference says nothing about the compiler
    miscompiled = not compiled.equal and not patched_stream
    whose = REWRITE if not rewrite.equal else COMPILER if miscompiled else NEITHER
    return said(whose, rewrite, compiled)
