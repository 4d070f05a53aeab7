"""What a numerics comparison needs from a run, captured in the child (the comparison itself, for the parent,
is torchmend/verify/numerics.py).

`seed_everything`, and `NumericsCapture` with `install_backward_hooks` (torch is imported lazily, inside the
functions), which together record
  - losses: the value of every one-element tensor that `.backward()` (or `torch.autograd.backward`) is
    called on, in call order, the first MAX_LOSSES of them (read where both reach autograd's engine);
  - params: a fingerprint of each trained parameter (those of the optimizers that the step post-hook saw,
    in param_groups order, deduplicated), a few float64 numbers each: no tensor leaves the child.
and `install_output_hooks` (profiler/outputs.py), which records
  - outputs: per call of a callable that `torch.compile` returned (a compiled module or function), the first
    MAX_OUTPUT_CALLS of them, its name and a fingerprint of each tensor it returned (the same numbers as a
    parameter's): the evidence for scripts without backward or optimizer (sampling, inference).
All go into the END event (`losses`, `params`, `outputs`, and `numerics` with the counts behind them).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import Any

MAX_LOSSES = 10_000
MAX_OUTPUT_CALLS = 2_000  # calls of compiled functions whose returned tensors are fingerprinted
MAX_OUTPUT_TENSORS = 16  # tensors fingerprinted per call (the first ones, in order)
PROBE_SAMPLES = 1024  # values read per parameter for the position-weighted probe
DISABLE_ENV = "TORCHMEND_NO_NUMERICS"  # set to 1 in the child's environment: no loss/parameter capture
# The seed torchmend gave the run, in the child's environment: a script that seeds itself can read it, so that the
# several seeds of a verification in distribution (verify/stochastic.py) reach it.
SEED_ENV = "TORCHMEND_SEED"


def seed_everything(seed: int) -> None:
    """Seed torch (CPU and every CUDA device), `random`, and numpy when it can be imported; the seed is left in
    the environment as TORCHMEND_SEED for a script that seeds itself."""
    import os
    import random

    import torch

    os.environ[SEED_ENV] = str(seed)
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
    (the error stays near float32 rounding of one chunk, far below verify.numerics.compare's tolerance)."""
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
    absolute = torch.linalg.vector_norm(rows, 1, dim=1, dtype=acc).to(torch.float64).sum() + torch.linalg.vector_norm(
        tail, 1, dtype=torch.float64
    )
    return total, absolute


def _stats(tensor: Any) -> Any:
    """A float64 tensor on the tensor's device: sum, sum of |x|, and the position-weighted probe of the values
    at indices 0, s, 2s, ... (s = max(1, numel // PROBE_SAMPLES), at most PROBE_SAMPLES of them, the j-th
    weighted by j + 1) with its sum of |x| weighted the same way. Call under torch.no_grad()."""
    import torch

    t = tensor.detach()
    if hasattr(t, "to_local") and hasattr(t, "placements"):
        # A DTensor (FSDP2's sharded parameters): this rank's shard. Reading the whole would run collectives at
        # the end of the run, which hang when the ranks end apart (and the shard is what this rank computed).
        t = t.to_local()
    if t.is_complex():
        t = torch.view_as_real(t)
    flat = t.reshape(-1)
    step = max(1, flat.numel() // PROBE_SAMPLES)
    sample = flat[::step][:PROBE_SAMPLES].to(torch.float64)
    weights = torch.arange(1, sample.numel() + 1, dtype=torch.float64, device=sample.device)
    return torch.stack([*_sum_and_abs(flat), (sample * weights).sum(), (sample.abs() * weights).sum()])


class _Seen:
    """One optimizer the step hook saw, held weakly; its parameters' fingerprints are taken at its death.

    The script's `main()` usually returns before the run ends and takes its model and optimizer with it.
    A weakref.finalize on the optimizer holds its parameter list (alive exactly as long as the optimizer,
    which holds them too) and fingerprints it when the optimizer is freed, by reference count or by the
    garbage collector (a plain weakref callback would find the parameters already cleared there).
    """

    def __init__(self, capture: NumericsCapture, optimizer: Any) -> None:
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

    def __init__(
        self, limit: int = MAX_LOSSES, output_limit: int = MAX_OUTPUT_CALLS, outputs_of: tuple[str, ...] = ()
    ) -> None:
        self.limit = limit
        self.output_limit = output_limit
        # the module classes whose calls are recorded instead of every compiled callable's (empty: every one):
        # what the original compiled, where the patched script compiles its submodules (compile placement)
        self.outputs_of = frozenset(outputs_of)
        # per call of a compiled function: {"fn", "tensors": [fingerprint rows, `stats` a tensor until the end]}
        self.outputs: list[dict[str, Any]] = []
        self.output_calls = 0  # including those past output_limit
        # install_output_hooks' watcher (callable, name) -> callable: what an eager run's torch.compile returns, so
        # an eager reference records the outputs of the same calls a compiled run does
        self.watch: Any = None
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

    # -- outputs of compiled functions --

    def record_output(self, name: str, result: Any) -> None:
        """Fingerprint the tensors a compiled function returned: a tensor, or the tensor leaves of tuples, lists
        and dicts (in order; other objects are passed over). Nothing is read back until the end.

        Once a loss has been seen, calls are only counted: a training run's losses are its evidence (verify
        compares outputs only when neither run has a loss), and its steps need not pay for fingerprints."""
        if self.outputs_of and name not in self.outputs_of:
            return
        self.output_calls += 1
        if len(self.outputs) >= self.output_limit or self.seen_losses:
            return
        try:
            import torch

            leaves: list[Any] = []
            _tensor_leaves(result, self._tensor, leaves, 0)
            rows: list[dict[str, Any]] = []
            with torch.no_grad():
                for t in leaves[:MAX_OUTPUT_TENSORS]:
                    row: dict[str, Any] = {"shape": list(t.shape), "dtype": str(t.dtype).removeprefix("torch.")}
                    if type(t) in self._plain:  # a subclass (DTensor, ...) is named but not read
                        row["stats"] = _stats(t)
                    rows.append(row)
            self.outputs.append({"fn": name, "tensors": rows, "more": max(0, len(leaves) - MAX_OUTPUT_TENSORS)})
        except Exception as e:  # a capture bug must never break the user's run
            self.error(f"output of {name}: {type(e).__name__}: {e}")

    def _output_rows(self) -> list[dict[str, Any]]:
        """The kept calls with their stats read back as numbers (one copy to the host per device)."""
        import torch

        pending: dict[Any, list[tuple[dict[str, Any], Any]]] = {}
        for call in self.outputs:
            for row in call["tensors"]:
                stats = row.pop("stats", None)
                if stats is not None:
                    pending.setdefault(stats.device, []).append((row, stats))
        for items in pending.values():
            values = torch.stack([s for _, s in items]).cpu().tolist()
            for (row, _), (total, absolute, probe, probe_abs) in zip(items, values):
                row.update(sum=total, abs=absolute, probe=probe, probe_abs=probe_abs)
        return self.outputs

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
                    stats = _stats(p)
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
            for where in by_device.values():  # non-CPU losses: one copy to the host per device
                values = torch.stack([self.losses[i].to(torch.float64) for i in where]).cpu().tolist()  # type: ignore[union-attr]  # non-float by the filter above
                for i, v in zip(where, values):
                    self.losses[i] = v
            params, note = self._params(deadline)
        except Exception as e:
            self.error(f"end: {type(e).__name__}: {e}")
            params, note = None, "could not read the parameters"
        try:
            outputs: list[dict[str, Any]] | None = self._output_rows()
        except Exception as e:
            self.error(f"outputs: {type(e).__name__}: {e}")
            outputs = None
        losses = [x for x in self.losses if isinstance(x, float)]
        info = {
            "losses_seen": self.seen_losses,
            "losses_kept": len(losses),
            "losses_skipped": self.skipped,
            "params": note,
            "output_calls_seen": self.output_calls,
            "output_calls_kept": len(outputs) if outputs is not None else 0,
            "errors": self.errors[:5],
        }
        fields: dict[str, Any] = {"losses": losses, "params": params, "outputs": outputs, "numerics": info}
        if self.outputs_of:  # the comparison keeps the other run's calls of these alone (verify/numerics.py)
            fields["outputs_of"] = sorted(self.outputs_of)
        return fields


def _tensor_leaves(value: Any, tensor_type: type, out: list[Any], depth: int) -> None:
    if isinstance(value, tensor_type):
        out.append(value)
    elif depth < 8 and isinstance(value, (tuple, list)):
        for v in value:
            _tensor_leaves(v, tensor_type, out, depth + 1)
    elif depth < 8 and isinstance(value, dict):
        for v in value.values():
            _tensor_leaves(v, tensor_type, out, depth + 1)


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
        torch.Tensor.backward = tensor_backward
        torch.autograd.backward = autograd_backward
        codes = {tensor_backward.__code__, autograd_backward.__code__}
    try:
        from torch._dynamo.eval_frame import skip_code

        for code in codes | {NumericsCapture.record.__code__}:
            skip_code(code)
    except (ImportError, AttributeError):  # another torch: dynamo may compile the wrapper's frame
        pass
