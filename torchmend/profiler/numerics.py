"""What a numerics comparison needs from a run, captured in the child; and the comparison, for the parent.

Child side (imports torch lazily, inside the functions): `seed_everything`, and `NumericsCapture` with
`install_backward_hooks`, which together record
  - losses: the value of every one-element tensor that `.backward()` (or `torch.autograd.backward`) is
    called on, in call order, the first MAX_LOSSES of them (read where both reach autograd's engine);
  - params: a fingerprint of each trained parameter (those of the optimizers that the step post-hook saw,
    in param_groups order, deduplicated), a few float64 numbers each: no tensor leaves the child.
Both go into the END event (`losses`, `params`, and `numerics` with the counts behind them).

Parent side (pure, no torch): `compare(before, after)` on two END events (or `capture_of` them).
"""

from __future__ import annotations

import math
import threading
import weakref
from dataclasses import asdict, dataclass
from typing import Any, Callable

MAX_LOSSES = 10_000
PROBE_SAMPLES = 1024  # values read per parameter for the position-weighted probe
DISABLE_ENV = "TORCHMEND_NO_NUMERICS"  # set to 1 in the child's environment: no loss/parameter capture

# Default tolerances for compare(): |a - b| <= ATOL + RTOL * max(|a|, |b|).
RTOL = 1e-4
ATOL = 1e-6


# ---------------------------------------------------------------------------------------------- child side


def seed_everything(seed: int) -> None:
    """Seed torch (CPU and every CUDA device), `random`, and numpy when it can be imported."""
    import random

    import torch

    random.seed(seed)
    torch.manual_seed(seed)
    try:
        import numpy
    except Exception:  # not installed, or broken: nothing of numpy's to seed
        return
    numpy.random.seed(seed % 2**32)


def _param_list(optimizer: Any) -> list[Any]:
    return [p for group in optimizer.param_groups for p in group["params"]]


_CHUNK = 4096


def _sum_and_abs(flat: Any) -> tuple[Any, Any]:
    """float64 sum and sum of |x| of a 1-d tensor, without a float64 copy of it: floating tensors are
    summed in chunks of _CHUNK in their own precision (float32 for half types), the chunk sums in float64
    (the error stays near float32 rounding of one chunk, far below compare()'s tolerance)."""
    import torch

    if flat.dtype == torch.float64:
        return flat.sum(), torch.linalg.vector_norm(flat, 1)
    if not flat.is_floating_point():
        x = flat.to(torch.float64)  # integers and bools: not trained, so rare and small
        return x.sum(), x.abs().sum()
    acc = torch.float32 if flat.element_size() < 4 else flat.dtype
    whole = flat.numel() // _CHUNK * _CHUNK
    rows, tail = flat[:whole].view(-1, _CHUNK), flat[whole:]
    total = rows.sum(1, dtype=acc).to(torch.float64).sum() + tail.sum(dtype=torch.float64)
    absolute = (torch.linalg.vector_norm(rows, 1, dim=1, dtype=acc).to(torch.float64).sum()
                + torch.linalg.vector_norm(tail, 1, dtype=torch.float64))
    return total, absolute


class _Seen:
    """One optimizer the step hook saw, held weakly; its parameters' fingerprints are taken at its death.

    The script's `main()` usually returns before the run ends and takes its model and optimizer with it.
    A weakref.finalize on the optimizer holds its parameter list (alive exactly as long as the optimizer,
    which holds them too) and fingerprints it when the optimizer is freed, by reference count or by the
    garbage collector (a plain weakref callback would find the parameters already cleared there).
    """

    def __init__(self, capture: "NumericsCapture", optimizer: Any) -> None:
        self.ref = weakref.ref(optimizer)
        self.capture = capture
        self.groups = -1
        self.ids: list[int] = []
        self.final: list[dict[str, Any] | None] | None = None
        self._finalizer: weakref.finalize | None = None
        self.refresh(optimizer)

    def refresh(self, optimizer: Any) -> None:
        if len(optimizer.param_groups) == self.groups:
            return
        self.groups = len(optimizer.param_groups)
        params = _param_list(optimizer)
        self.ids = [id(p) for p in params]
        if self._finalizer is not None:
            self._finalizer.detach()
        self._finalizer = weakref.finalize(optimizer, self._died, params)
        self._finalizer.atexit = False

    def live_params(self) -> list[Any] | None:
        info = self._finalizer.peek() if self._finalizer is not None else None
        return info[2][0] if info is not None else None

    def _died(self, params: list[Any]) -> None:
        try:
            self.final = self.capture.fingerprints(params)
        except Exception as e:  # never disturb the script's teardown
            self.capture.error(f"fingerprint at optimizer death: {type(e).__name__}: {e}")


class NumericsCapture:
    """Losses and final-parameter fingerprints of one run (child side)."""

    def __init__(self, limit: int = MAX_LOSSES) -> None:
        self.limit = limit
        self.losses: list[float | Any] = []  # floats; a detached copy for non-CPU tensors until the end
        self.seen_losses = 0  # one-element backward targets, including those past the limit
        self.skipped = 0  # one-element tensor subclasses (DTensor, ...): not read
        self.errors: list[str] = []
        self._optimizers: list[_Seen] = []
        self._by_id: dict[int, _Seen] = {}
        self._local = threading.local()  # backward nesting depth: a backward inside a hook is no loss
        import torch

        self._tensor = torch.Tensor
        self._plain = (torch.Tensor, torch.nn.Parameter)

    def error(self, text: str) -> None:
        if len(self.errors) < 20:  # a failure repeated every step must not grow without bound
            self.errors.append(text)

    # -- losses --

    def record(self, tensors: Any) -> None:
        items = tensors if isinstance(tensors, (tuple, list)) else (tensors,)
        for t in items:
            if not isinstance(t, self._tensor) or t.numel() != 1:
                continue
            if type(t) not in self._plain:
                self.skipped += 1
                continue
            self.seen_losses += 1
            if len(self.losses) >= self.limit:
                continue
            d = t.detach()
            # float() on a GPU tensor waits for the forward pass: keep a copy, read it at the end.
            self.losses.append(float(d) if d.device.type == "cpu" else d.clone())

    def wrap_backward(self, original: Callable[..., Any], engine_level: bool = False) -> Callable[..., Any]:
        """`original` with the outermost call's one-element targets recorded; arguments and result untouched.

        engine_level: `original` is autograd's engine entry, shared with autograd.grad (which passes
        accumulate_grad=False: not a loss, not recorded)."""
        import functools

        local = self._local
        capture = self

        @functools.wraps(original)
        def backward(*args: Any, **kwargs: Any) -> Any:
            depth = getattr(local, "depth", 0)
            if depth == 0 and (not engine_level or kwargs.get("accumulate_grad") is True):
                try:
                    target = args[0] if args else kwargs.get("t_outputs", kwargs.get("tensors", kwargs.get("self")))
                    capture.record(target)
                except Exception as e:  # a capture bug must never break the user's run
                    capture.error(f"loss: {type(e).__name__}: {e}")
            local.depth = depth + 1
            try:
                return original(*args, **kwargs)
            finally:
                local.depth = depth

        return backward

    # -- parameters --

    def see_optimizer(self, optimizer: Any) -> None:
        """Called by the step post-hook after every step: remember the optimizer (weakly)."""
        try:
            seen = self._by_id.get(id(optimizer))
            if seen is not None and seen.ref() is optimizer:
                seen.refresh(optimizer)
                return
            seen = _Seen(self, optimizer)
            self._by_id[id(optimizer)] = seen
            self._optimizers.append(seen)
        except Exception as e:
            self.error(f"optimizer: {type(e).__name__}: {e}")

    def fingerprints(self, params: list[Any], deadline: float | None = None) -> list[dict[str, Any] | None]:
        """Shape, dtype and four float64 numbers per parameter: sum, sum of |x|, and a position-weighted
        sum of the values at indices 0, s, 2s, ... (s = max(1, numel // PROBE_SAMPLES), at most
        PROBE_SAMPLES of them, the j-th weighted by j + 1) with its sum of |x| weighted the same way.

        No float64 copy of a parameter and nothing but these numbers to the host (one sync per device).
        Past `deadline` (time.monotonic()) the remaining parameters are left out (None)."""
        import time

        import torch

        rows: list[dict[str, Any] | None] = []
        pending: dict[Any, list[tuple[int, Any]]] = {}
        with torch.no_grad():
            for i, p in enumerate(params):
                if deadline is not None and time.monotonic() > deadline:
                    rows.extend([None] * (len(params) - i))
                    self.error(f"ran out of time after {i} of {len(params)} parameters")
                    break
                try:
                    t = p.detach()
                    if t.is_complex():
                        t = torch.view_as_real(t)
                    flat = t.reshape(-1)
                    step = max(1, flat.numel() // PROBE_SAMPLES)
                    sample = flat[::step][:PROBE_SAMPLES].to(torch.float64)
                    weights = torch.arange(1, sample.numel() + 1, dtype=torch.float64, device=sample.device)
                    stats = torch.stack([*_sum_and_abs(flat), (sample * weights).sum(), (sample.abs() * weights).sum()])
                    rows.append({"shape": list(p.shape), "dtype": str(p.dtype).removeprefix("torch.")})
                    pending.setdefault(stats.device, []).append((i, stats))
                except Exception as e:  # a parameter we cannot read (meta, sparse, ...): say so, go on
                    rows.append(None)
                    self.error(f"param {i}: {type(e).__name__}: {e}")
            for items in pending.values():
                values = torch.stack([s for _, s in items]).tolist()
                for (i, _), (total, absolute, probe, probe_abs) in zip(items, values):
                    rows[i].update(sum=total, abs=absolute, probe=probe, probe_abs=probe_abs)  # type: ignore[union-attr]
        return rows

    def _params(self, deadline: float | None = None) -> tuple[list[dict[str, Any] | None] | None, str]:
        if not self._optimizers:
            return None, "no optimizer step was seen"
        rows: list[dict[str, Any] | None] = []
        position: dict[int, int] = {}  # parameter id -> its row (a later optimizer's view replaces an earlier one)
        lost = 0
        for seen in self._optimizers:
            params = seen.live_params()
            fps = self.fingerprints(params, deadline) if params is not None else seen.final
            if fps is None:
                lost += 1
                continue
            for pid, fp in zip(seen.ids, fps):
                if pid in position:
                    rows[position[pid]] = fp
                else:
                    position[pid] = len(rows)
                    rows.append(fp)
        note = f"{len(self._optimizers)} optimizer(s)"
        if lost:
            note += f"; {lost} freed before their parameters could be read"
        return (rows if len(rows) or not lost else None), note

    # -- the END event --

    def end_fields(self, budget_s: float | None = None) -> dict[str, Any]:
        """`losses`, `params` and `numerics` (counts and notes) for the END event; never raises.

        budget_s: stop reading parameters after this many seconds (the timeout path has a short grace)."""
        import time

        deadline = time.monotonic() + budget_s if budget_s is not None else None
        try:
            import torch

            by_device: dict[Any, list[int]] = {}
            for i, x in enumerate(self.losses):
                if not isinstance(x, float):
                    by_device.setdefault(x.device, []).append(i)
            for device, where in by_device.items():  # non-CPU losses: one copy to the host per device
                values = torch.stack([self.losses[i].to(torch.float64) for i in where]).cpu().tolist()
                for i, v in zip(where, values):
                    self.losses[i] = v
            params, note = self._params(deadline)
        except Exception as e:
            self.error(f"end: {type(e).__name__}: {e}")
            params, note = None, "could not read the parameters"
        losses = [x for x in self.losses if isinstance(x, float)]
        info = {"losses_seen": self.seen_losses, "losses_kept": len(losses), "losses_skipped": self.skipped,
                "params": note, "errors": self.errors[:5]}
        return {"losses": losses, "params": params, "numerics": info}


def install_backward_hooks(capture: NumericsCapture) -> None:
    """Record losses at the one place every `tensor.backward()` and `torch.autograd.backward()` passes through.

    That place is `torch.autograd._engine_run_backward` (with accumulate_grad=True; autograd.grad passes
    False), which dynamo never traces: it stops at `Tensor.backward` (handled by name) or at
    `torch.autograd.backward` (a skipped function), so compiled code sees the same objects, the same
    breaks and the same break messages as without us. Replacing those two public functions instead
    would not: dynamo inlines a replaced `torch.Tensor.backward(loss)` and breaks inside the wrapper,
    and names the wrapper's file in the skipped-function message. When the wrapper's frame runs
    eagerly under a compiled function (after a graph break), dynamo is told to skip it, as it skips torch.
    A torch without `_engine_run_backward` gets the two public functions wrapped.
    """
    import torch
    import torch.autograd

    engine = getattr(torch.autograd, "_engine_run_backward", None)
    if engine is not None and getattr(torch.autograd, "graph", None) is not None:
        wrapped = capture.wrap_backward(engine, engine_level=True)
        torch.autograd._engine_run_backward = wrapped
        if getattr(torch.autograd.graph, "_engine_run_backward", None) is engine:
            torch.autograd.graph._engine_run_backward = wrapped
        codes = {wrapped.__code__}
    else:
        tensor_backward = capture.wrap_backward(torch.Tensor.backward)
        autograd_backward = capture.wrap_backward(torch.autograd.backward)
        torch.Tensor.backward = tensor_backward  # type: ignore[method-assign]
        torch.autograd.backward = autograd_backward
        codes = {tensor_backward.__code__, autograd_backward.__code__}
    try:
        from torch._dynamo.eval_frame import skip_code

        for code in codes | {NumericsCapture.record.__code__}:
            skip_code(code)
    except (ImportError, AttributeError):  # another torch: dynamo may compile the wrapper's frame
        pass


# --------------------------------------------------------------------------------------------- parent side


def capture_of(end: dict[str, Any]) -> dict[str, Any]:
    """The numerics part of an END event (RunOutcome.end): losses, params, numerics."""
    return {"losses": end.get("losses"), "params": end.get("params"), "numerics": end.get("numerics")}


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

    @property
    def equal(self) -> bool:
        """Losses equal, and parameters equal where both runs have them."""
        return self.losses_equal and self.params_equal is not False

    @property
    def compared(self) -> bool:
        """Whether anything was compared at all: a loss both runs recorded, or both runs' parameters."""
        return self.steps_compared > 0 or self.params_equal is not None

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "compared": self.compared}

    def describe(self) -> str:
        if self.equal and not self.compared:
            return ("numerics not compared: neither run recorded a loss or the parameters (no optimizer step "
                    "was seen)")
        if self.equal:
            text = f"numerics match ({self.steps_compared} losses"
            text += f", {self.params_compared} parameters" if self.params_equal else f"; parameters: {self.params_note}"
            return text + f"; largest loss difference {self.max_rel_diff:.2g} relative)"
        parts = []
        d = self.first_divergence
        if d is not None and d.before is not None and d.after is not None:
            parts.append(f"losses diverge at step {d.step}: {d.before!r} before, {d.after!r} after")
        elif d is not None:
            parts.append(f"the runs recorded {self.losses_before} and {self.losses_after} losses "
                         f"(equal over the first {self.steps_compared})")
        if self.params_equal is False and self.worst_param is not None:
            w = self.worst_param
            parts.append(f"parameter {w.index} {tuple(w.shape or ())} differs ({w.field}: {w.rel_diff:.2g} relative)"
                         if math.isfinite(w.rel_diff) else f"parameters differ: {self.params_note}")
        return "; ".join(parts) or "numerics differ"


def _close(a: float, b: float, rtol: float, atol: float) -> bool:
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    if math.isinf(a) or math.isinf(b):
        return a == b
    return abs(a - b) <= atol + rtol * max(abs(a), abs(b))


def _diffs(a: float, b: float) -> tuple[float, float]:
    """(absolute, relative) difference; 0 for NaN/NaN and equal infinities, inf for any other non-finite pair."""
    if (math.isnan(a) and math.isnan(b)) or (math.isinf(a) and a == b):
        return 0.0, 0.0
    if not (math.isfinite(a) and math.isfinite(b)):
        return math.inf, math.inf
    diff = abs(a - b)
    scale = max(abs(a), abs(b))
    return diff, (diff / scale if scale else 0.0)


def _compare_params(before: list[Any] | None, after: list[Any] | None, rtol: float,
                    atol: float) -> tuple[bool | None, int, ParamDiff | None, str]:
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
                return False, i, ParamDiff(i, (a or b or {}).get("shape"), "missing", math.inf), \
                    f"parameter {i} could not be read in one run"
            continue
        for key in ("shape", "dtype"):
            if a.get(key) != b.get(key):
                return False, i, ParamDiff(i, a.get("shape"), key, math.inf), \
                    f"parameter {i}: {key} {a.get(key)} before, {b.get(key)} after"
        scales = {"sum": max(a["abs"], b["abs"]), "abs": max(a["abs"], b["abs"]),
                  "probe": max(a["probe_abs"], b["probe_abs"])}
        for key, scale in scales.items():
            x, y = a[key], b[key]
            if math.isnan(x) or math.isnan(y) or math.isinf(x) or math.isinf(y):
                ok = _close(x, y, rtol, atol)
                rel = 0.0 if ok else math.inf
            else:
                diff = abs(x - y)
                ok = diff <= atol + rtol * scale
                rel = diff / scale if scale else (0.0 if diff == 0 else math.inf)
            equal = equal and ok
            if worst is None or rel > worst.rel_diff:
                worst = ParamDiff(i, a.get("shape"), key, rel)
    note = "equal within tolerance" if equal else f"parameter {worst.index} differs" if worst else ""
    return equal, len(before), worst, note


def compare(before: dict[str, Any], after: dict[str, Any], rtol: float = RTOL, atol: float = ATOL) -> Comparison:
    """Compare two runs' captures (END events, or `capture_of` them).

    Two values agree when |a - b| <= atol + rtol * max(|a|, |b|); a parameter's sums are compared
    against its magnitude (its sum of |x|, or the probe's weighted sum of |x|) instead of the sum itself,
    which can cancel to near zero. NaN equals NaN only at the same step; infinities equal themselves.

    Defaults: rtol = 1e-4, atol = 1e-6. Float32 arithmetic done in another order (a fused or reordered
    reduction) differs by about 1e-7 relative per step; compounded over a few hundred steps that is a
    few 1e-5, inside 1e-4 with room to spare. A genuinely different computation (a loss scaled by
    1.01, a changed learning rate, a dropped term) moves the loss by 1e-3 or more and fails. atol only
    matters for values near zero (a loss that reaches 0).

    Different lengths (a run that stopped or crashed earlier): the common prefix is compared, and the
    losses are not equal; when the prefix agrees, first_divergence is the first step the shorter run lacks.
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
        if first is None and not _close(a, b, rtol, atol):
            first = Divergence(i, a, b)
    if first is None and len(la) != len(lb):
        first = Divergence(n, la[n] if n < len(la) else None, lb[n] if n < len(lb) else None)
    p_equal, p_count, worst, note = _compare_params(before.get("params"), after.get("params"), rtol, atol)
    return Comparison(rtol, atol, first is None, len(la), len(lb), n, first, max_abs, max_rel,
                      p_equal, p_count, worst, note)
