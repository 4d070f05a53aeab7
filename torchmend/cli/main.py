"""The `torchmend` command line. Owns all terminal I/O and exit codes; never imports torch.

Each command lives in its own module and registers itself on the shared typer app.
"""

from __future__ import annotations

import errno
import logging
import os
import sys

from torchmend.cli import config, example, fix, lint, pr, scan, tune, undo, verify  # noqa: F401  (each registers its commands)
from torchmend.cli.app import GuardedStdout, StdoutFailed, app, degrade_streams, stdout_failed
from torchmend.interrupts import Stopped, describe, exit_code, install


def run() -> None:
    level = os.environ.get("TORCHMEND_LOG", "").upper()
    if level:  # e.g. TORCHMEND_LOG=debug: internal errors of codemods with their tracebacks, on stderr
        logging.basicConfig(
            level=getattr(logging, level, logging.DEBUG),
            stream=sys.stderr,
            format="torchmend %(levelname)s: %(message)s",
        )
    degrade_streams()  # a stream that cannot encode `→` gets `->` (LC_ALL=C, PYTHONUTF8=0)
    sys.stdout = GuardedStdout(sys.stdout)  # a full or closed stdout: StdoutFailed
    install()  # SIGTERM and SIGHUP stop torchmend the way Ctrl-C does, through the code that runs
    try:
        try:
            app()  # typer turns a KeyboardInterrupt no command caught into exit 130
        finally:
            sys.stdout.flush()  # what is still buffered fails here, where it is handled, not at exit
    except KeyboardInterrupt:
        sys.exit(130)
    except StdoutFailed as e:
        sys.exit(stdout_failed(e.error))
    except OSError as e:
        if e.errno != errno.ENOSPC:
            raise
        # A full disk where torchmend itself writes (the run's folder in TMPDIR, a cache): named, not a traceback.
        where = f" ({e.filename})" if e.filename else ""
        print(
            f"torchmend: no space left on device{where}: free space there, or point TMPDIR elsewhere",
            file=sys.stderr,
        )
        sys.exit(1)
    except Stopped as e:  # one no command caught: nothing of torchmend's own was left half done (store defers them)
        try:
            print(f"torchmend: {describe(e)}", file=sys.stderr)
        except OSError:  # SIGHUP: the terminal may be gone
            pass
        sys.exit(exit_code(e))
