"""`torchmend verify`: run the original and the patched script side by side and say whether the patch helped
and changed nothing else. The same machinery runs inside `fix` before anything is written."""

from __future__ import annotations

import json
import shlex
import sys
import time
from dataclasses import replace
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich.text import Text

from torchmend.cli import options as o
from torchmend.cli.app import app, err, fail, out
from torchmend.cli.exitcodes import ExitCode

if TYPE_CHECKING:  # heavy (libcst, network, ...): imported where used, so --help stays fast
    from torchmend.pipeline import RunStarted
    from torchmend.values import Root
    from torchmend.verify.compare import Verification


class VerifyFormat(str, Enum):
    table = "table"
    json = "json"
    markdown = "markdown"
    github = "github"  # one workflow command with the verdict (docs/formats.md)


_STARTED: list[float] = []  # when this process's first verification run started


def show_run(run: RunStarted) -> None:
    """The progress line of one verification run, with the time since the first run started: on a terminal and in
    a log alike, so that a long fix says where its minutes go."""
    now = time.monotonic()
    if not _STARTED:
        _STARTED.append(now)
    spent = round(now - _STARTED[0])
    clock = f"{spent // 60} min {spent % 60:02d} s" if spent >= 60 else f"{spent} s"
    err.print(
        Text(f"verify: run {run.number}/{run.total} ({run.arm}, repeat {run.repeat + 1}), {clock} in", style="dim")
    )


def exit_code(v: Verification) -> int:
    from torchmend.verify.compare import IMPROVED, NEUTRAL, NO_CHANGE

    return {IMPROVED: 0, NEUTRAL: 0, NO_CHANGE: int(ExitCode.NO_EFFECT)}.get(v.verdict, int(ExitCode.VERIFY_FAILED))


@app.command(short_help="Run the original and a patched script side by side: counts, times, numerics.")
def verify(
    script: o.Script,
    args: o.ScriptArgs = None,
    patch: Annotated[
        Optional[Path],
        typer.Option(
            help="A unified diff (e.g. from `fix --diff`), applied in memory: no file is changed.", show_default=False
        ),
    ] = None,
    patched_dir: Annotated[
        Optional[Path],
        typer.Option(
            help="A directory with changed copies of the project's .py files (same relative paths).", show_default=False
        ),
    ] = None,
    repeat: o.Repeat = 3,
    steps: o.Steps = None,
    timeout: o.Timeout = None,
    backend: Annotated[
        Optional[str],
        typer.Option(
            help="Override the backend of every torch.compile call in "
            "both arms. Default: the script's own (inductor unless it "
            "says otherwise), which is what timings should use."
        ),
    ] = None,
    seed: o.Seed = 0,
    rtol: o.Rtol = None,
    atol: o.Atol = None,
    nproc_per_node: o.NprocPerNode = None,
    project: o.Project = None,
    format: Annotated[
        VerifyFormat,
        typer.Option(
            "--format",
            "-f",
            help="table, json, markdown (the block a pull request shows), or github (the verdict as a workflow "
            "annotation).",
        ),
    ] = VerifyFormat.table,
) -> None:
    """Run SCRIPT as it is and with a patch, with the same seed, budget and backend, each run in its own
    process with its own inductor cache, and compare: compiled frames, graphs, graph breaks, recompiles,
    limit hits, compile seconds, first-step and steady step time, wall time; per-step losses and the final
    parameters within tolerance. The script's stdin is /dev/null in every run.

    Exit 0: improved (a measured gain) or no measured speed change (breaks or recompiles gone, nothing slower).
    12: it changed nothing measurable. 10: refused (numerics differ, the patched script failed, it compiles less,
    or it is slower beyond the measured band).

    Example: torchmend verify train.py --patch fix.patch --repeat 3 --steps 50
    """
    from torchmend import pipeline
    from torchmend.cli.context import script_project
    from torchmend.cli.running import run_spec, stop_on_signals
    from torchmend.config import Overrides
    from torchmend.verify.speed import PROXY_BACKENDS

    if (patch is None) == (patched_dir is None):
        fail(ExitCode.USAGE, "give exactly one of --patch FILE and --patched-dir DIR")
    project_, _ = script_project(script, args, nproc_per_node, project)  # a bad configuration stops here
    # verify's --backend is the verification runs' backend: `verify-backend` in pyproject.toml
    given = Overrides(steps=steps, timeout=timeout, verify_backend=backend, rtol=rtol, atol=atol)
    settings = project_.config.resolve(given)
    budget = {"steps": settings.steps, "timeout": settings.timeout, "backend": settings.verify_backend, "seed": seed}
    before = run_spec(script, args, nproc_per_node, None, **budget)
    texts = _patched(patch, patched_dir, project_.folder)
    after = replace(before, overlay=tuple(texts.items()))
    with stop_on_signals("the runs were stopped"):
        v, b, _ = pipeline.verify(
            before, after, project_, repeat, on_run=show_run, reference=True, timed=before.backend not in PROXY_BACKENDS,
            tolerance=settings.tolerance,
        )  # fmt: skip
    if all(r.summary.compiles == 0 for r in b):
        fail(ExitCode.NOTHING_COMPILED, "the original script compiled nothing: there is nothing to compare")
    _render(format, v, before.script, texts)
    raise typer.Exit(exit_code(v))


def _patched(patch: Path | None, patched_dir: Path | None, root: Root) -> dict[str, str]:
    """The patched texts by path (from a unified diff, or a folder of changed copies), each one Python accepts."""
    from torchmend.sources import read_source
    from torchmend.verify.patch import PatchError, apply_patch, from_directory

    try:
        if patch is not None:
            texts = apply_patch(read_source(str(patch)), root, read_source)
        else:
            texts = from_directory(patched_dir.resolve(), root, read_source)  # type: ignore[union-attr]
    except (PatchError, OSError) as e:
        fail(ExitCode.USAGE, f"cannot use the patch: {e}")
    for path, text in texts.items():
        try:
            compile(text, path, "exec", dont_inherit=True)
        except SyntaxError as e:
            fail(ExitCode.USAGE, f"the patched {path} has a syntax error at line {e.lineno}: {e.msg}")
    return texts


def _render(format: VerifyFormat, v: Verification, script: Path, texts: dict[str, str]) -> None:
    from torchmend.cli.fixview import verification_view

    command = "torchmend " + " ".join(shlex.quote(x) for x in sys.argv[1:])
    if format is VerifyFormat.json:
        report = {"schema": "torchmend.verify/1", "script": str(script), "patched_files": sorted(texts), **v.to_json()}
        print(json.dumps(report, indent=2))
    elif format is VerifyFormat.markdown:
        from torchmend.verify.report import markdown as render_markdown

        print(render_markdown(v, command))
    elif format is VerifyFormat.github:
        from torchmend.cli.formats.github import verification

        print(verification(v), end="")
    else:
        out.print(verification_view(v))
