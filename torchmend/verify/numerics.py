"""Do two runs compute the same numbers? The parent's side of numerics (pure, no torch): `compare(before,
after)` on two END events (or `capture_of` them), whose losses, parameter fingerprints and fingerprints of
what the compiled functions returned the child recorded (torchmend/profiler/numerics.py), and the default
tolerances. The outputs are the evidence when neither run recorded a loss (sampling, inference): with
losses, those (and the parameters) are what is compared.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from torchmend.values import Tolerance  # the default tolerances: |a - b| <= atol + rtol * max(|a|, |b|)


def capture_of(end: dict[str, Any]) -> dict[str, Any]:
    """The numerics part of an END event (RunOutcome.end): losses, params, numerics."""
    return {
        "losses": end.get("losses"),
        "params": end.get("params"),
        "outputs": end.get("outputs"),
        "numerics": end.get("numerics"),
        "outputs_of": end.get("outputs_of"),
    }


@dataclass(frozen=True)
class Divergence:
    step: int  # index into the losses (0-based backward call)
    before: float | None  # None: that run has no loss at this step (it stopped earlier)
    after: float | None


@dataclass(frozen=True)
class ParamDiff:
    index: int
    shape: list[int] | None
    field: str  # sum | abs | probe | shape | dtype | missing
    rel_diff: float  # |difference| / the parameter's magnitude (inf for shape/dtype/missing)


@dataclass(frozen=True)
class OutputDiff:
    call: int  # index into the calls of compiled functions (0-based, both runs' calls in order)
    fn: str | None  # the compiled function or module called (None: that run made no such call)
    tensor: int | None  # which returned tensor (None: the call as a whole)
    field: str  # sum | abs | probe | shape | dtype | fn | tensors | missing
    before: Any
    after: Any
    rel_diff: float  # |difference| / the tensor's magnitude (inf for anything but sum/abs/probe)


@dataclass(frozen=True)
class Comparison:
    rtol: float
    atol: float
    losses_equal: bool  # the same number of losses, each pair within tolerance (NaN only equals NaN)
    losses_before: int
    losses_after: int
    steps_compared: int  # the common prefix
    first_divergence: Divergence | None  # the first step out of tolerance, or the first step one run lacks
    max_abs_diff: float  # over the common prefix (inf where exactly one is NaN/inf)
    max_rel_diff: float
    params_equal: bool | None  # None: one of the runs has no parameter fingerprint
    params_compared: int
    worst_param: ParamDiff | None  # the parameter that differs most (even when within tolerance)
    params_note: str
    # Outputs of compiled functions, compared when neither run recorded a loss (None: not compared)
    outputs_equal: bool | None = None
    outputs_before: int = 0  # calls recorded
    outputs_after: int = 0
    outputs_compared: int = 0  # the common prefix of calls
    output_divergence: OutputDiff | None = None  # the first call out of tolerance, or the first one run lacks
    max_output_rel_diff: float = 0.0
    outputs_note: str = ""

    @property
    def equal(self) -> bool:
        """Losses equal, and parameters and outputs equal where they were compared."""
        return self.losses_equal and self.params_equal is not False and self.outputs_equal is not False

    @property
    def compared(self) -> bool:
        """Whether anything was compared at all: a loss both runs recorded, both runs' parameters, or what
        both runs' compiled functions returned."""
        return self.steps_compared > 0 or self.params_equal is not None or self.outputs_compared > 0

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "compared": self.compared}

    def agreed(self) -> str:
        """What two runs that match agree on, in words: how many losses (or outputs) and parameters, and the
        largest difference (what describe() says in parentheses, for a caller that says it in its own words)."""
        if self.steps_compared == 0 and self.outputs_compared:
            text = f"{self.outputs_compared} outputs of compiled functions"
            text += f", {self.params_compared} parameters" if self.params_equal else ""
            return text + f"; largest output difference {self.max_output_rel_diff:.2g} relative"
        text = f"{self.steps_compared} losses"
        text += f", {self.params_compared} parameters" if self.params_equal else f"; parameters: {self.params_note}"
        return text + f"; largest loss difference {self.max_rel_diff:.2g} relative"

    def describe(self) -> str:
        if self.equal and not self.compared:
            return (
                "numerics not compared: neither run recorded a loss, the parameters (no optimizer step "
                "was seen) or an output of a compiled function"
            )
        if self.equal:
            return f"numerics match ({self.agreed()})"
        parts = []
        d = self.first_divergence
        if d is not None and d.before is not None and d.after is not None:
            parts.append(f"losses diverge at step {d.step}: {d.before!r} before, {d.after!r} after")
        elif d is not None:
            parts.append(
                f"the runs recorded {self.losses_before} and {self.losses_after} losses "
                f"(equal over the first {self.steps_compared})"
            )
        if self.params_equal is False and self.worst_param is not None:
            w = self.worst_param
            parts.append(
                f"parameter {w.index} {tuple(w.shape or ())} differs ({w.field}: {w.rel_diff:.2g} relative)"
                if math.isfinite(w.rel_diff)
                else f"parameters differ: {self.params_note}"
            )
        if self.outputs_equal is False:
            parts.append(self.outputs_note)
        return "; ".join(parts) or "numerics differ"


def _close(a: float, b: float, tol: Tolerance) -> bool:
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    if math.isinf(a) or math.isinf(b):
        return a == b
    return abs(a - b) <= tol.atol + tol.rtol * max(abs(a), abs(b))


def _diffs(a: float, b: float) -> tuple[float, float]:
    """(absolute, relative) difference; 0 for NaN/NaN and equal infinities, inf for any other non-finite pair."""
    if (math.isnan(a) and math.isnan(b)) or (math.isinf(a) and a == b):
        return 0.0, 0.0
    if not (math.isfinite(a) and math.isfinite(b)):
        return math.inf, math.inf
    diff = abs(a - b)
    scale = max(abs(a), abs(b))
    return diff, (diff / scale if scale else 0.0)


def _fingerprint_diff(a: dict[str, Any], b: dict[str, Any], tol: Tolerance) -> tuple[bool, str, float]:
    """Two fingerprints with the same shape and dtype: (within tolerance, the field that differs most, by how
    much relative to the tensor's magnitude). Sums are measured against the sum of |x|, not the sum itself."""
    equal, worst, worst_rel = True, "sum", -1.0
    scales = {
        "sum": max(a["abs"], b["abs"]),
        "abs": max(a["abs"], b["abs"]),
        "probe": max(a["probe_abs"], b["probe_abs"]),
    }
    for key, scale in scales.items():
        x, y = a[key], b[key]
        if math.isnan(x) or math.isnan(y) or math.isinf(x) or math.isinf(y):
            ok = _close(x, y, tol)
            rel = 0.0 if ok else math.inf
        else:
            diff = abs(x - y)
            ok = diff <= tol.atol + tol.rtol * scale
            rel = diff / scale if scale else (0.0 if diff == 0 else math.inf)
        equal = equal and ok
        if rel > worst_rel:
            worst, worst_rel = key, rel
    return equal, worst, worst_rel


def _compare_params(
    before: list[Any] | None, after: list[Any] | None, tol: Tolerance
) -> tuple[bool | None, int, ParamDiff | None, str]:
    if before is None or after is None:
        which = " and ".join(n for n, p in (("before", before), ("after", after)) if p is None)
        return None, 0, None, f"no parameter fingerprint {which}"
    if len(before) != len(after):
        return False, 0, None, f"{len(before)} parameters before, {len(after)} after"
    worst: ParamDiff | None = None
    equal = True
    for i, (a, b) in enumerate(zip(before, after)):
        if a is None or b is None:
            if a is not b:
                return (
                    False,
                    i,
                    ParamDiff(i, (a or b or {}).get("shape"), "missing", math.inf),
                    f"parameter {i} could not be read in one run",
                )
            continue
        for key in ("shape", "dtype"):
            if a.get(key) != b.get(key):
                return (
                    False,
                    i,
                    ParamDiff(i, a.get("shape"), key, math.inf),
                    f"parameter {i}: {key} {a.get(key)} before, {b.get(key)} after",
                )
        ok, key, rel = _fingerprint_diff(a, b, tol)
        equal = equal and ok
        if worst is None or rel > worst.rel_diff:
            worst = ParamDiff(i, a.get("shape"), key, rel)
    note = "equal within tolerance" if equal else f"parameter {worst.index} differs" if worst else ""
    return equal, len(before), worst, note


def _call_diff(k: int, a: dict[str, Any], b: dict[str, Any], tol: Tolerance) -> tuple[OutputDiff | None, float]:
    """The first difference between two runs' k-th call of a compiled function (None: within tolerance),
    and the largest relative difference of its tensors' numbers."""
    fn = a.get("fn")
    if fn != b.get("fn"):
        return OutputDiff(k, fn, None, "fn", fn, b.get("fn"), math.inf), math.inf
    ta, tb = a.get("tensors") or [], b.get("tensors") or []
    if len(ta) != len(tb) or a.get("more", 0) != b.get("more", 0):
        counts = (len(ta) + a.get("more", 0), len(tb) + b.get("more", 0))
        return OutputDiff(k, fn, None, "tensors", counts[0], counts[1], math.inf), math.inf
    first: OutputDiff | None = None
    largest = 0.0
    for i, (x, y) in enumerate(zip(ta, tb)):
        mismatch = next((key for key in ("shape", "dtype") if x.get(key) != y.get(key)), None)
        if mismatch is not None:
            first = first or OutputDiff(k, fn, i, mismatch, x.get(mismatch), y.get(mismatch), math.inf)
            continue
        if "sum" not in x or "sum" not in y:  # a tensor subclass, not read (in both runs when shapes agree)
            continue
        ok, field, rel = _fingerprint_diff(x, y, tol)
        largest = max(largest, rel)
        if not ok and first is None:
            first = OutputDiff(k, fn, i, field, x[field], y[field], rel)
    return first, largest


def _describe_output_diff(d: OutputDiff, before: int, after: int, prefix: int) -> str:
    if d.field == "missing":
        return (
            f"the runs made {before} and {after} calls to compiled functions (their outputs equal over the "
            f"first {prefix})"
        )
    where = f"outputs of compiled functions diverge at call {d.call} ({d.fn})"
    if d.field == "fn":
        return f"{where}: {d.before} was called before, {d.after} after"
    if d.field == "tensors":
        return f"{where}: it returned {d.before} tensors before, {d.after} after"
    return f"{where}: returned tensor {d.tensor} {d.field} {d.before!r} before, {d.after!r} after"


def _compare_outputs(
    before: list[Any] | None, after: list[Any] | None, tol: Tolerance
) -> tuple[bool | None, int, OutputDiff | None, float, str]:
    if before is None or after is None:
        which = " and ".join(n for n, o in (("before", before), ("after", after)) if o is None)
        return None, 0, None, 0.0, f"no outputs of compiled functions recorded {which}"
    if not before and not after:
        return None, 0, None, 0.0, "no compiled function was called"
    n = min(len(before), len(after))
    first: OutputDiff | None = None
    largest = 0.0
    for k in range(n):
        diff, rel = _call_diff(k, before[k], after[k], tol)
        largest = max(largest, rel)
        if first is None and diff is not None:
            first = diff
    if first is None and len(before) != len(after):
        longer = before if len(before) > n else after
        first = OutputDiff(n, longer[n].get("fn"), None, "missing", len(before), len(after), math.inf)
    if first is None:
        return True, n, None, largest, "equal within tolerance"
    return False, n, first, largest, _describe_output_diff(first, len(before), len(after), n)


def compare(before: dict[str, Any], after: dict[str, Any], tol: Tolerance = Tolerance()) -> Comparison:
    """Compare two runs' captures (END events, or `capture_of` them).

    Two values agree when |a - b| <= tol.atol + tol.rtol * max(|a|, |b|); a parameter's sums are compared
    against its magnitude (its sum of |x|, or the probe's weighted sum of |x|) instead of the sum itself,
    which can cancel to near zero. NaN equals NaN only at the same step; infinities equal themselves.

    Defaults (Tolerance()): rtol = 1e-4, atol = 1e-6. Float32 arithmetic done in another order (a fused or reordered
    reduction) differs by about 1e-7 relative per step; compounded over a few hundred steps that is a
    few 1e-5, inside 1e-4 with room to spare. A genuinely different computation (a loss scaled by
    1.01, a changed learning rate, a dropped term) moves the loss by 1e-3 or more and fails. atol only
    matters for values near zero (a loss that reaches 0).

    Different lengths (a run that stopped or crashed earlier): the common prefix is compared, and the
    losses are not equal; when the prefix agrees, first_divergence is the first step the shorter run lacks.

    Outputs of compiled functions (where a run names the modules it recorded, `outputs_of`, the calls of those
    alone in both runs; call by call: the function called, the number of tensors, each one's
    shape, dtype and fingerprint, like a parameter's) are compared when neither run recorded a loss; the
    same rules for different lengths hold.
    """
    la = [float(x) for x in (before.get("losses") or [])]
    lb = [float(x) for x in (after.get("losses") or [])]
    n = min(len(la), len(lb))
    first: Divergence | None = None
    max_abs = max_rel = 0.0
    for i in range(n):
        a, b = la[i], lb[i]
        d_abs, d_rel = _diffs(a, b)
        max_abs, max_rel = max(max_abs, d_abs), max(max_rel, d_rel)
        if first is None and not _close(a, b, tol):
            first = Divergence(i, a, b)
    if first is None and len(la) != len(lb):
        first = Divergence(n, la[n] if n < len(la) else None, lb[n] if n < len(lb) else None)
    p_equal, p_count, worst, note = _compare_params(before.get("params"), after.get("params"), tol)
    oa, ob = before.get("outputs"), after.get("outputs")
    of = {*(before.get("outputs_of") or ()), *(after.get("outputs_of") or ())}
    if of:  # a run that recorded the calls of these modules alone: the other run's calls of them are compared
        oa, ob = (None if o is None else [c for c in o if c.get("fn") in of] for o in (oa, ob))
    if la or lb:
        o_equal, o_count, o_first, o_rel, o_note = None, 0, None, 0.0, "losses compared instead"
    else:
        o_equal, o_count, o_first, o_rel, o_note = _compare_outputs(oa, ob, tol)
    return Comparison(
        tol.rtol,
        tol.atol,
        first is None,
        len(la),
        len(lb),
        n,
        first,
        max_abs,
        max_rel,
        p_equal,
        p_count,
        worst,
        note,
        o_equal,
        len(oa or []),
        len(ob or []),
        o_count,
        o_first,
        o_rel,
        o_note,
    )
