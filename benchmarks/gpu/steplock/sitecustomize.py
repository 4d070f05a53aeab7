# Benchmark aid for several suite processes sharing one GPU (benchmarks/gpu/run_suite.sh with JOBS > 1), put on
# the measured child's PYTHONPATH. From the end of its second optimizer step until it exits, a run holds an
# exclusive lock on the file $TM_BENCH_STEP_LOCK: the steady-state half of every run (what the steady-step
# figure is taken from) has the GPU to itself, while the start-up, imports and first compile of the other runs
# overlap it. The wait for the lock lands inside step 2, which no steady-state figure reads (the first-step
# figure is step 1). Only a torchmend profiler child takes part (TORCHMEND_CHILD is set in its environment).
import os

if os.environ.get("TM_BENCH_STEP_LOCK") and os.environ.get("TORCHMEND_CHILD"):
    import fcntl

    import torch
    from torch.optim.optimizer import register_optimizer_step_post_hook

    _LOCK_AT = 2
    _held: dict = {"steps": 0, "file": None}

    def _hold_gpu(optimizer, args, kwargs):
        _held["steps"] += 1
        if _held["steps"] == _LOCK_AT and _held["file"] is None:
            if torch.cuda.is_initialized():
                torch.cuda.synchronize()  # our own queued kernels finish before we wait
            f = open(os.environ["TM_BENCH_STEP_LOCK"], "a")  # kept open: the lock goes with the process
            fcntl.flock(f, fcntl.LOCK_EX)
            _held["file"] = f

    # Registered before the profiler's step counter, so the wait ends before step 2's end time is taken.
    # Disabled for dynamo, as the counter is, for scripts that compile optimizer.step.
    register_optimizer_step_post_hook(torch._dynamo.disable(_hold_gpu))
