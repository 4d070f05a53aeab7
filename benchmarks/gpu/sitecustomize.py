# Measurement aid for the GPU machine only: run the CPU fixtures on CUDA without editing them.
import os

if os.environ.get("TM_DEFAULT_DEVICE"):
    import torch

    torch.set_default_device(os.environ["TM_DEFAULT_DEVICE"])
