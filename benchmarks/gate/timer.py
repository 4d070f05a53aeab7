"""The gate's in-process timer: runs a training script as `__main__` (runpy) and writes one JSON record of it.

    python timer.py OUT.json SCRIPT [SCRIPT ARGS ...]

Nothing of torchmend's: torch's own hooks only, so the measurement is independent of the tool it judges.

- every optimizer step ends at PyTorch's global step post-hook (torch.cuda.synchronize() first, once CUDA is in
  use): `step_ends` holds the seconds from $TM_GATE_T0 (the parent's clock just before it started this process;
  our own start when unset) to the end of each step;
- `losses`: the value of every one-element tensor that autograd's engine is asked to backpropagate from with
  accumulate_grad (`loss.backward()`, `torch.autograd.backward`), kept as detached copies on their device and read
  once at the end (no sync per step);
- `compile`: from torch._dynamo's compilation metrics (the records TORCH_TRACE writes as compilation_metrics, kept
  in process by torch._dynamo.utils; the limit raised from 64): frames, compiles, recompiles, the summed compile
  seconds (every compile's start to end, forward and lazily compiled backward), dynamo's own frame seconds, the
  graph breaks dynamo counted, and the ops compiled: per frame the largest `graph_op_count` any of its compiles
  had, summed over the frames (`ops_total`), and the largest single graph (`ops_largest`);
- $TM_GATE_BACKEND (a local CPU check only): every torch.compile call gets that backend (mode/options dropped).

The hooks are kept out of dynamo's traces (torch._dynamo.disable and skip_code), as torch's own functions are.
"""

from __future__ import annotations

import json
import os
import re
import runpy
import sys
import time
import traceback

T_START = time.time()
T0 = float(os.environ.get("TM_GATE_T0") or T_START)


def main() -> int:
    out_path, script, *args = sys.argv[1:]
    record: dict = {"script": script, "args": args, "python_start_s": round(T_START - T0, 4)}
    import torch

    record["import_torch_s"] = round(time.time() - T0, 4)
    import torch._dynamo.utils as dutils
    from torch.optim.optimizer import register_optimizer_step_post_hook

    try:
        dutils.set_compilation_metrics_limit(1_000_000)
    except Exception as e:  # another torch: the default limit (64 compiles) then
        record["metrics_limit_error"] = repr(e)

    step_ends: list[float] = []
    losses: list = []
    synced = [False]

    def on_step(optimizer, a, k):
        if synced[0] or torch.cuda.is_initialized():
            synced[0] = True
            torch.cuda.synchronize()
        step_ends.append(time.time() - T0)

    try:
        hook = torch._dynamo.disable(on_step, reason="benchmark timer")
    except TypeError:
        hook = torch._dynamo.disable(on_step)
    register_optimizer_step_post_hook(hook)

    codes = {on_step.__code__}
    engine = getattr(torch.autograd, "_engine_run_backward", None)
    if engine is not None:

        def run_backward(*a, **k):
            if k.get("accumulate_grad") is True and len(losses) < 100_000:
                try:
                    t = a[0] if a else k.get("t_outputs")
                    t = t[0] if isinstance(t, (tuple, list)) and len(t) == 1 else t
                    if isinstance(t, torch.Tensor) and t.numel() == 1:
                        losses.append(t.detach().reshape(()).clone())
                except Exception as e:  # never disturb the run
                    record["loss_error"] = repr(e)
            return engine(*a, **k)

        torch.autograd._engine_run_backward = run_backward
        graph = getattr(torch.autograd, "graph", None)
        if graph is not None and getattr(graph, "_engine_run_backward", None) is engine:
            graph._engine_run_backward = run_backward
        codes.add(run_backward.__code__)
    try:
        from torch._dynamo.eval_frame import skip_code

        for code in codes:
            skip_code(code)
    except (ImportError, AttributeError):
        pass

    backend = os.environ.get("TM_GATE_BACKEND")
    if backend:
        original = torch.compile

        def compile(model=None, **kwargs):
            kwargs["backend"] = backend
            kwargs.pop("mode", None)
            kwargs.pop("options", None)
            return original(model, **kwargs) if model is not None else original(**kwargs)

        torch.compile = compile
        record["backend_override"] = backend

    sys.argv = [script, *args]
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    status, rc = "ok", 0
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as e:
        code = e.code
        rc = code if isinstance(code, int) else (0 if code is None else 1)
        status = "ok" if rc == 0 else "exit"
    except BaseException as e:
        status, rc = "error", 1
        record["error"] = f"{type(e).__name__}: {e}"[:2000]
        record["traceback_tail"] = "".join(traceback.format_exception(type(e), e, e.__traceback__))[-4000:]
    record["end_s"] = round(time.time() - T0, 4)
    record["status"] = status
    record["rc"] = rc
    record["step_ends"] = [round(t, 6) for t in step_ends]
    try:
        record["losses"] = torch.stack(losses).double().cpu().tolist() if losses else []
    except Exception as e:
        record["losses"] = []
        record["loss_error"] = repr(e)
    record["compile"] = compile_summary(dutils)
    record["device"] = torch.cuda.get_device_name() if torch.cuda.is_initialized() else "cpu"
    record["torch"] = torch.__version__
    tmp = out_path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(record, f)
    os.replace(tmp, out_path)
    return rc


def compile_summary(dutils) -> dict:
    try:
        metrics = list(dutils.get_compilation_metrics())
    except Exception as e:
        return {"error": repr(e)}
    frames: dict[str, int] = {}
    fwd = recompiles = failed = 0
    total_s = dynamo_s = 0.0
    for m in metrics:
        if getattr(m, "is_runtime", False):
            continue
        start, end = getattr(m, "start_time_us", None), getattr(m, "end_time_us", None)
        if start is not None and end is not None:
            total_s += (end - start) / 1e6
        elif getattr(m, "duration_us", None) is not None:
            total_s += m.duration_us / 1e6
        else:
            total_s += getattr(m, "entire_frame_compile_time_s", None) or 0.0
        if getattr(m, "is_forward", True) is False:
            continue
        fwd += 1
        cid = str(getattr(m, "compile_id", "") or "")
        match = re.search(r"(\d+)/(\d+)", cid)
        frame = match.group(1) if match else cid
        if match and int(match.group(2)) > 0:
            recompiles += 1
        if getattr(m, "fail_type", None):
            failed += 1
        dynamo_s += getattr(m, "entire_frame_compile_time_s", None) or 0.0
        frames[frame] = max(frames.get(frame, 0), getattr(m, "graph_op_count", None) or 0)
    breaks = None
    try:
        breaks = sum(dutils.counters["graph_break"].values())
    except Exception:
        pass
    return {
        "frames": len(frames),
        "compiles": fwd,
        "recompiles": recompiles,
        "failed_compiles": failed,
        "graph_breaks": breaks,
        "compile_s": round(total_s, 4),
        "dynamo_frame_s": round(dynamo_s, 4),
        "ops_total": sum(frames.values()),
        "ops_largest": max(frames.values(), default=0),
    }


if __name__ == "__main__":
    sys.exit(main())
