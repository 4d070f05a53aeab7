"""The torch installed beside torchmend, read from its metadata (torch is not imported): what a fix or a check with no
run behind it (lint) is judged against."""

from __future__ import annotations


def installed_torch() -> str | None:
    """The installed torch's version string, or None where torch is not installed."""
    from importlib import metadata

    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return None
