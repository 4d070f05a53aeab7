# Measurement aid for the GPU machine only, on PYTHONPATH: run the CPU fixtures on CUDA without editing them.
#   TM_DEFAULT_DEVICE=cuda        torch.set_default_device("cuda") at start-up
#   TM_COMPILE_MODE=<mode>        every torch.compile call on inductor gets mode=<mode> (reduce-overhead: CUDA
#                                 graphs), whatever mode the script asked for; calls with options= are left alone
import os

if os.environ.get("TM_DEFAULT_DEVICE") or os.environ.get("TM_COMPILE_MODE"):
    import functools

    import torch

    if os.environ.get("TM_DEFAULT_DEVICE"):
        torch.set_default_device(os.environ["TM_DEFAULT_DEVICE"])
    if os.environ.get("TM_COMPILE_MODE"):
        _compile = torch.compile
        _mode = os.environ["TM_COMPILE_MODE"]

        @functools.wraps(_compile)
        def _with_mode(model=None, **kwargs):
            if kwargs.get("backend", "inductor") == "inductor" and "options" not in kwargs:
                kwargs["mode"] = _mode
            return _compile(model, **kwargs) if model is not None else _compile(**kwargs)

        torch.compile = _with_mode
