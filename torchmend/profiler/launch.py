"""torchrun command lines: `torchmend scan --nproc-per-node 2 train.py` or `torchmend scan -- torchrun
--nproc-per-node 2 train.py ARGS` become a script, its arguments and the torchrun options to run it with
(the profiler then asks torchrun to start its child once per rank). Pure string work: no torch here.
"""

from __future__ import annotations

from dataclasses import dataclass

# torchrun's options that take no value (torch 2.11-2.14); every other option takes one.
_FLAGS = {
    "--standalone",
    "-m",
    "--module",
    "--no-python",
    "--no_python",
    "--run-path",
    "--run_path",
    "--virtual-local-rank",
    "--virtual_local_rank",
}
_REFUSED = {
    "-m": "a module",
    "--module": "a module",
    "--no-python": "a non-Python program",
    "--no_python": "a non-Python program",
}
_RENDEZVOUS = {
    "--standalone",
    "--rdzv-endpoint",
    "--rdzv_endpoint",
    "--rdzv-backend",
    "--rdzv_backend",
    "--master-port",
    "--master_port",
    "--master-addr",
    "--master_addr",
}
_NNODES = ("--nnodes",)


class LaunchError(ValueError):
    pass


@dataclass(frozen=True)
class Launch:
    script: str
    args: tuple[str, ...]
    launcher: tuple[str, ...]  # torchrun options; () for a plain single-process run


def is_torchrun(program: str, args: list[str]) -> bool:
    """`torchrun ...` or `python -m torch.distributed.run ...`."""
    name = program.rsplit("/", 1)[-1]
    if name == "torchrun":
        return True
    return name.startswith("python") and args[:2] == ["-m", "torch.distributed.run"]


def split_torchrun(program: str, args: list[str]) -> Launch:
    """Split a torchrun command line into its options, the training script and the script's arguments."""
    if program.rsplit("/", 1)[-1] != "torchrun":
        args = args[2:]  # python -m torch.distributed.run
    options: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            i += 1
            break
        if not arg.startswith("-"):
            break
        name = arg.split("=", 1)[0]
        if name in _REFUSED:
            raise LaunchError(
                f"torchrun {name} runs {_REFUSED[name]}; torchmend profiles a training script: give the script's path"
            )
        options.append(arg)
        if name not in _FLAGS and "=" not in arg:
            if i + 1 >= len(args):
                raise LaunchError(f"torchrun option {arg} needs a value")
            options.append(args[i + 1])
            i += 1
        i += 1
    if i >= len(args):
        raise LaunchError("the torchrun command names no training script")
    return Launch(args[i], tuple(args[i + 1 :]), with_rendezvous(tuple(options)))


def option_value(options: tuple[str, ...], names: tuple[str, ...]) -> str | None:
    for i, arg in enumerate(options):
        name, eq, value = arg.partition("=")
        if name in names:
            return value if eq else (options[i + 1] if i + 1 < len(options) else None)
    return None


def with_rendezvous(options: tuple[str, ...]) -> tuple[str, ...]:
    """Add --standalone (a free port on this machine) unless the options say where the ranks meet, and
    refuse several nodes: torchmend runs the ranks of one node."""
    nnodes = option_value(options, _NNODES)
    if nnodes not in (None, "1", "1:1"):
        raise LaunchError(
            f"--nnodes {nnodes}: torchmend launches the ranks of one node. For a multi-node job, "
            "run it with TORCH_TRACE=DIR and read the logs with --from-trace DIR"
        )
    if any(arg.split("=", 1)[0] in _RENDEZVOUS for arg in options):
        return options
    return (*options, "--standalone")


def resolve(script: str, args: list[str], nproc_per_node: int | None) -> Launch:
    """The run the command line asks for: plain, --nproc-per-node N, or a torchrun command after `--`."""
    if is_torchrun(script, args):
        launch = split_torchrun(script, args)
        if nproc_per_node is not None:
            raise LaunchError("--nproc-per-node goes in the torchrun command, not before it")
        return launch
    if nproc_per_node is None:
        return Launch(script, tuple(args), ())
    return Launch(script, tuple(args), with_rendezvous(("--nproc-per-node", str(nproc_per_node))))
