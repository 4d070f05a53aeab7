"""`torchmend config`: the effective settings and where each came from. The configuration is read as every command
reads it, through torchmend.project.Project (a bad one exits with CONFIG_INVALID before anything runs)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer
from rich.text import Text

from torchmend.cli import options as o
from torchmend.cli.app import Format, app, out

if TYPE_CHECKING:
    from torchmend.config import Config


def config_for(start: Path | None) -> Config:
    """The configuration that applies to `start` (a script or a folder; None: the current directory); a bad one
    ends the command with CONFIG_INVALID and the file, key and line."""
    from torchmend.cli.context import project_errors
    from torchmend.project import Project

    start = Path(os.path.abspath(start if start is not None else Path.cwd()))
    with project_errors():
        return Project.at(start if start.is_dir() else start.parent).config


def _shown(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list):
        return ", ".join(value) if value else "[]"
    if isinstance(value, dict):
        return "; ".join(f"{k} = {', '.join(v)}" for k, v in value.items()) if value else "{}"
    return str(value)


@app.command(
    "config", short_help="Show the effective settings (tool.torchmend in pyproject.toml) and where each came from."
)
def show_config(
    path: Annotated[
        Optional[Path],
        typer.Argument(
            help="A script or folder: the pyproject.toml is looked for from its folder upwards. Default: the "
            "current directory.",
            show_default=False,
        ),
    ] = None,
    select: o.Select = None,
    ignore: o.Ignore = None,
    steps: o.Steps = None,
    timeout: o.Timeout = None,
    backend: o.Backend = None,
    project: o.Project = None,
    format: Annotated[Format, typer.Option("--format", "-f", help="table or json.")] = Format.table,
) -> None:
    """Print every setting torchmend reads from the `tool.torchmend` table of pyproject.toml, its effective value and
    where it came from: default, pyproject.toml:LINE, or the command line (the options given here stand for a
    command's own). The file is found from PATH's folder upwards, up to the top of the git work tree. An unknown
    key, a wrong type or a file that is not TOML exits with code 24.

    Example: torchmend config train.py --steps 20 --format json
    """
    from torchmend.cli.tables import fitted, laid_out
    from torchmend.config import KEYS, Overrides

    cfg = config_for(path)
    given = Overrides(
        select=select,
        ignore=ignore,
        steps=steps,
        timeout=timeout,
        backend=backend,
        project_root=project.resolve() if project is not None else None,
    )
    settings = cfg.settings(given)
    if format is Format.json:
        data = {
            "schema": "torchmend.config/1",
            "pyproject": str(cfg.path) if cfg.path else None,
            "settings": {
                s.key: {"value": str(s.value) if isinstance(s.value, Path) else s.value, "source": s.source}
                for s in settings
            },
        }
        print(json.dumps(data, indent=2))
        return
    where = str(cfg.path) if cfg.path else "none (no pyproject.toml with [tool.torchmend] up to the work tree's top)"
    out.print(Text(f"configuration: {where}"))
    rows: list[list[Any]] = [[s.key, _shown(s.value), s.source, KEYS[s.key].option] for s in settings]
    with laid_out(out) as width:
        out.print(fitted(["key", "value", "from", "option"], rows, text_column=1, width=width, optional=(3,)))
