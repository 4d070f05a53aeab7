"""The `torchmend` command line. Owns all terminal I/O and exit codes; never imports torch.

Each command lives in its own module and registers itself on the shared typer app.
"""

from __future__ import annotations

import logging
import os
import sys

from torchmend.cli import fix, pr, scan, undo, verify  # noqa: F401  (each registers its commands)
from torchmend.cli.app import app


def run() -> None:
    level = os.environ.get("TORCHMEND_LOG", "").upper()
    if level:  # e.g. TORCHMEND_LOG=debug: internal errors of codemods with their tracebacks, on stderr
        logging.basicConfig(
            level=getattr(logging, level, logging.DEBUG),
            stream=sys.stderr,
            format="torchmend %(levelname)s: %(message)s",
        )
    try:
        app()
    except KeyboardInterrupt:
        sys.exit(130)
