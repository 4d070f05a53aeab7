"""What every stage takes: the project (or a path standing for the project there) and the settings (None: the
project's configuration alone)."""

from __future__ import annotations

from pathlib import Path

from torchmend.project import Project
from torchmend.settings import Settings


def root_of(project: Project | Path) -> Path:
    return project.root if isinstance(project, Project) else Path(project)


def settings_for(project: Project, settings: Settings | None) -> Settings:
    return settings if settings is not None else project.config.resolve()
