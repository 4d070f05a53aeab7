"""Command-line options that scan and fix share (so their help text and limits cannot drift apart)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Optional

import typer


def finite_seconds(value: float | None) -> float | None:
    """--timeout: a number of seconds, not nan or inf (`timeout` in pyproject.toml is refused alike)."""
    if value is not None and not math.isfinite(value):
        raise typer.BadParameter(f"{value} is not a number of seconds; leave --timeout out for no time limit")
    return value


def rule_codes(values: list[str] | None) -> list[str] | None:
    """--select/--ignore: each value must be a rule code or the prefix of one (TM, TM1, TM10, TM101); a typo
    would otherwise select nothing and switch a CI check off. Usage error (exit 2) with the closest codes."""
    if not values:
        return values
    from torchmend.rules import closest_codes, is_code_prefix

    for value in values:
        if not is_code_prefix(value):
            near = closest_codes(value)
            hint = f"; did you mean {' or '.join(near)}?" if near else ""
            raise typer.BadParameter(
                f"{value!r} is not a rule code or a prefix of one{hint} (rule codes: TM1xx graph breaks, TM2xx "
                "recompiles, TM9xx notes; `torchmend rules` lists them)"
            )
    return values


Script = Annotated[
    Path, typer.Argument(help="The training script, run as `python SCRIPT ARGS` would run it.", show_default=False)
]
MaybeScript = Annotated[
    Optional[Path],
    typer.Argument(
        help="The training script, run as `python SCRIPT ARGS` would "
        "run it; or, after `--`, a torchrun command line "
        "(`-- torchrun --nproc-per-node 2 train.py ARGS`). Not "
        "with --from-trace.",
        show_default=False,
    ),
]
ScriptArgs = Annotated[
    Optional[list[str]], typer.Argument(help="Arguments for the script; put them after `--`.", show_default=False)
]
Steps = Annotated[
    Optional[int],
    typer.Option(min=1, help="Stop after N optimizer steps (counted through PyTorch's global optimizer step hook)."),
]
Timeout = Annotated[
    Optional[float],
    typer.Option(
        min=0.1, callback=finite_seconds, help="Stop after S seconds of wall time, reporting what was seen so far."
    ),
]
Backend = Annotated[
    Optional[str],
    typer.Option(
        help="Override the backend of every torch.compile call, e.g. "
        "aot_eager for fast detection on a CPU (plain `eager` misses "
        "float-to-tensor recompiles). Default: the script's own."
    ),
]
Project = Annotated[
    Optional[Path],
    typer.Option(
        help="Project root: findings under it are yours, the rest are "
        "libraries; fix never edits outside it. Default: the git work "
        "tree holding the script, else its directory."
    ),
]
ShowOutput = Annotated[
    bool,
    typer.Option(
        "--show-output",
        help="Print the script's own output after the run (it is captured; only its tail is shown on failure).",
    ),
]
KeepEvents = Annotated[
    Optional[Path], typer.Option(help="Keep the raw event stream and the script's output in this directory.")
]
Select = Annotated[
    Optional[list[str]],
    typer.Option(
        help="Only these rules, by code prefix (repeatable): --select TM1 --select TM203.",
        show_default=False,
        callback=rule_codes,
    ),
]
Ignore = Annotated[
    Optional[list[str]],
    typer.Option(help="Leave out these rules, by code prefix (repeatable).", show_default=False, callback=rule_codes),
]
NprocPerNode = Annotated[
    Optional[int],
    typer.Option(
        "--nproc-per-node",
        min=1,
        help="Launch the script with "
        "torchrun as N ranks on this machine (--standalone) and "
        "collect every rank's events; findings say on which ranks "
        "they happened and flag rank-divergent ones.",
        show_default=False,
    ),
]
FromTrace = Annotated[
    Optional[Path],
    typer.Option(
        "--from-trace",
        help="Read a TORCH_TRACE directory written by a run elsewhere (one log per rank) instead of running a script.",
        show_default=False,
    ),
]
PathMap = Annotated[
    Optional[list[str]],
    typer.Option(
        "--path-map",
        help="With --from-trace: OLD=NEW maps a source "
        "path prefix of the machine that ran the job onto this "
        "checkout (repeatable). Default: guessed from the files "
        "found under the project root.",
        show_default=False,
    ),
]
