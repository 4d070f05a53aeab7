"""Command-line options the commands share (so their help text and limits cannot drift apart): the run (scan, fix,
verify, tune), the selection, applying changes (fix, lint), verifying (fix, verify) and shipping (fix --pr, pr)."""

from __future__ import annotations

import math
from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer

from torchmend.values import Tolerance


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
    typer.Option(
        min=1,
        help="Stop after N optimizer steps, counted through PyTorch's global optimizer step hook: each step() of each "
        "optimizer is one, so a script with two optimizers (a GAN) runs N/2 iterations; the summary says so.",
    ),
]
Timeout = Annotated[
    Optional[float],
    typer.Option(
        min=0.1,
        metavar="S",
        callback=finite_seconds,
        help="Stop after S seconds of wall time, reporting what was seen so far.",
    ),
]
_BACKEND_HELP = (
    "Override the backend of every torch.compile call, e.g. aot_eager for fast detection on a CPU (plain `eager` "
    "misses float-to-tensor recompiles). Default: the script's own."
)
Backend = Annotated[Optional[str], typer.Option(help=_BACKEND_HELP)]
FixBackend = Annotated[
    Optional[str],
    typer.Option(
        help=_BACKEND_HELP + " It also screens the changes (one run per arm) before the script's own backend judges "
        "them (see --verify-backend)."
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
        "torchrun as N ranks on this machine (torchrun's --standalone) and "
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
FixFromTrace = Annotated[
    Optional[Path],
    typer.Option(
        "--from-trace",
        help="Propose changes from a TORCH_TRACE directory written by a run elsewhere, without running anything (the "
        "changes are not verified).",
        show_default=False,
    ),
]

# ------------------------------------------------------------------------------------- applying the changes

# The one spelling of the opt-in for unsafe changes (fix, lint, `unsafe-fixes` in pyproject.toml, as in Ruff);
# fix's older --unsafe stays as a hidden alias. Each command's help names the options it has (issue 41).
_UNSAFE_HELP = (
    ": include the unsafe changes (they can change output or numerics; each says how). Default: `unsafe-fixes` in "
    "pyproject.toml, else no."
)
Unsafe = Annotated[
    Optional[bool],
    typer.Option("--unsafe-fixes/--no-unsafe-fixes", help="With --yes or --diff" + _UNSAFE_HELP, show_default=False),
]
LintUnsafe = Annotated[
    Optional[bool],
    typer.Option("--unsafe-fixes/--no-unsafe-fixes", help="With --fix or --diff" + _UNSAFE_HELP, show_default=False),
]
UnsafeAlias = Annotated[
    Optional[bool], typer.Option("--unsafe/--no-unsafe", hidden=True, help="--unsafe-fixes", show_default=False)
]
RandomStream = Annotated[
    Optional[bool],
    typer.Option(
        "--allow-random-stream/--no-allow-random-stream",
        help="With --yes or --diff: include the changes that alter the random stream but keep the "
        "distribution (a LayerDrop skip picked with torch.where); --unsafe-fixes alone never applies them, and "
        "verification compares several seeds per arm as distributions. Default: `allow-random-stream` in "
        "pyproject.toml, else no.",
        show_default=False,
    ),
]
Yes = Annotated[bool, typer.Option("--yes", "-y", help="Apply every safe change without asking.")]
Diff = Annotated[
    bool,
    typer.Option(
        "--diff",
        help="Print one unified diff of the changes (safe ones; --unsafe-fixes for all) to stdout and write nothing. "
        "It applies with `git apply` or `patch -p1` from the project root.",
    ),
]
Check = Annotated[
    bool, typer.Option("--check", help="Write nothing; list the changes and exit 6 when there are any (for CI).")
]
Quiet = Annotated[
    bool, typer.Option("--quiet", "-q", help="With --yes: one line per written change instead of its diff.")
]
VerdictJson = Annotated[
    Optional[Path],
    typer.Option(
        "--verdict-json",
        help="Also write the verification's outcome as JSON to this file: the verdict, its typed reasons, counts, "
        "ops compiled, times with their spread and band, the backend that judged, and each change written or "
        "refused (and why). Written when the runs end, refused or not.",
        show_default=False,
    ),
]
NoVerify = Annotated[
    bool,
    typer.Option(
        "--no-verify",
        help="Write without verifying the changes first (a change only a run can judge, such as nested_graph_breaks, is left out).",
    ),
]
VerifyBackend = Annotated[
    Optional[str],
    typer.Option(
        help="Backend that judges the changes (timed runs whose verdict decides what is written). Default: the "
        "script's own (inductor unless its compile call says otherwise). With --backend too, the changes are "
        "screened on --backend first (one run per arm) and judged here. Naming a backend other than the script's "
        "own (aot_eager to keep it quick on a CPU) says so in the verdict, and no global compiler setting is "
        "written on its word."
    ),
]


class CheckFormat(str, Enum):
    """How `fix --check` lists what it would change (docs/formats.md). No json: scan --format json has the findings."""

    table = "table"
    sarif = "sarif"
    github = "github"


CheckFormatOption = Annotated[
    CheckFormat,
    typer.Option(
        "--format",
        "-f",
        help="With --check: how to list the changes: table, sarif (SARIF 2.1.0: every finding, each change as its "
        "fix) or github (workflow annotations); see docs/formats.md.",
    ),
]

# ------------------------------------------------------------------------------------------------ verifying

JudgeRepeat = Annotated[
    Optional[int],
    typer.Option(
        "--repeat",
        min=1,
        max=50,
        help="Runs per arm in the judging stage, interleaved (A B A B ...): medians with min–max, and the noise band "
        "speed is judged against. Default: 3 on the script's own backend, 1 on a --verify-backend you name (then "
        "speed is not measured). Screening always runs once per arm.",
        show_default=False,
    ),
]
Repeat = Annotated[
    int,
    typer.Option(
        min=1,
        max=50,
        help="Run each arm N times, interleaved (A B A B ...), and "
        "report medians with min–max, so noise is visible. Speed is judged only "
        "with N >= 2.",
    ),
]
Seed = Annotated[
    int,
    typer.Option(
        help="Seed torch, random and numpy identically in both arms before the "
        "script runs (a script that seeds itself keeps its own seed)."
    ),
]
Rtol = Annotated[
    Optional[float],
    typer.Option(
        min=0,
        help=f"Relative tolerance for losses and final parameters. Default: {Tolerance.rtol}.",
        show_default=False,
    ),
]
Atol = Annotated[
    Optional[float],
    typer.Option(
        min=0,
        help=f"Absolute tolerance for losses and final parameters. Default: {Tolerance.atol}.",
        show_default=False,
    ),
]

# ------------------------------------------------------------------------------------- shipping (pr, fix --pr)

Pr = Annotated[
    bool,
    typer.Option(
        "--pr",
        help="After writing, ship the changes as a branch, one commit and a GitHub pull request with the findings and "
        "the verification (as `torchmend pr`; checked before anything runs).",
    ),
]
Remote = Annotated[
    Optional[str], typer.Option(help="With --pr: the git remote to push to. Default: origin.", show_default=False)
]
Base = Annotated[
    Optional[str], typer.Option(help="With --pr: the branch the pull request goes into.", show_default=False)
]
Repo = Annotated[
    Optional[str],
    typer.Option(
        help="With --pr: OWNER/NAME of the GitHub repository, when the remote URL does not say.", show_default=False
    ),
]
ApiUrl = Annotated[
    Optional[str],
    typer.Option(help="With --pr: the GitHub REST API (GitHub Enterprise: https://HOST/api/v3).", show_default=False),
]
TokenEnv = Annotated[str, typer.Option(help="With --pr: the environment variable holding the GitHub token.")]
