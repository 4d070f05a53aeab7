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

Pure: comparisons of END events (verify/numerics.py); the runs are made by the caller.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from torchmend.verify.numerics import ATOL, RTOL, Comparison, compare
from torchmend.verify.runs import ArmRun

EAGER_COMPILE = (("eager", True),)  # RunSpec.compile for a run without torch.compile (collector.override_compile)
REWRITE, COMPILER, NEITHER = "rewrite", "compiler", "neither"


def spread(c: Comparison) -> float:
    """The largest relative difference a comparison saw: losses, parameters, outputs of compiled functions."""
    worst = c.worst_param.rel_diff if c.worst_param is not None else 0.0
    return max(c.max_rel_diff, worst, c.max_output_rel_diff)


def band_of(compiled: ArmRun, eager: ArmRun) -> float | None:
    """The original's own compiled-vs-eager spread, or None when it cannot be measured (a run failed, or the
    two recorded different numbers of losses or parameters: then it is not noise)."""
    if compiled.failed or eager.failed:
        return None
    c = compare(compiled.end, eager.end, RTOL, ATOL)
    if c.losses_before != c.losses_after:
        return None
    value = spread(c)
    return value if math.isfinite(value) else None


def tolerance(rtol: float, band: float | None) -> float:
    """The relative tolerance the gate applies: the fixed one, or the band when that is larger."""
    return max(rtol, band or 0.0) * (1 + 1e-9)  # the band itself is within it, whatever the rounding


@dataclass(frozen=True)
class Reference:
    band: float | None  # the original's compiled-vs-eager spread (None: not measured)
    rtol: float  # the fixed tolerance
    whose: str  # rewrite | compiler | neither (the eager runs did not settle it)
    rewrite: Comparison | None  # original eager vs patched eager
    compiled: Comparison | None  # patched eager vs patched compiled
    eager_failed: str = ""  # which eager run failed, if one did

    @property
    def tolerance(self) -> float:
        return tolerance(self.rtol, self.band)

    def band_text(self) -> str:
        if self.band is None:
            return f"the original's compiled-vs-eager spread could not be measured; fixed tolerance {self.rtol:g}"
        return (
            f"noise band: the original's own compiled run differs from its eager run by {self.band:.2g} relative; "
            f"the gate allows max(rtol {self.rtol:g}, band) = {max(self.rtol, self.band):.2g}"
        )

    def describe(self) -> str:
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
        }


def reference(
    before_compiled: ArmRun,
    before_eager: ArmRun,
    after_compiled: ArmRun,
    after_eager: ArmRun,
    rtol: float = RTOL,
    atol: float = ATOL,
) -> Reference:
    """Whose difference it is, from the four runs (the band from the original's two)."""
    band = band_of(before_compiled, before_eager)
    failed = " and ".join(n for n, r in (("original", before_eager), ("patched", after_eager)) if r.failed)
    if failed:
        return Reference(band, rtol, NEITHER, None, None, eager_failed=failed)
    tol = tolerance(rtol, band)
    # Eager against eager: the same program runs the same ops, so only the fixed tolerance applies (a float
    # buffer's float32 arithmetic in place of Python's doubles stays far inside it).
    rewrite = compare(before_eager.end, after_eager.end, rtol, atol)
    compiled = compare(after_eager.end, after_compiled.end, tol, atol)
    if not (rewrite.compared and compiled.compared):  # nothing recorded eagerly: no evidence either way
        return Reference(band, rtol, NEITHER, rewrite, compiled)
    whose = REWRITE if not rewrite.equal else COMPILER if not compiled.equal else NEITHER
    return Reference(band, rtol, whose, rewrite, compiled)
