"""The `torchmend` command line. Owns all terminal I/O and exit codes; never imports torch.

Each command lives in its own module and registers itself on the shared typer app. Every exit passes through
run(): the one place an ending becomes an exit code, and where a machine format gets its error document.
"""

from __future__ import annotations

import errno
import logging
import os
import sys

from torchmend.cli import config, example, failure, fix, lint, pr, scan, tune, undo, verify  # noqa: F401  (each registers its commands)
from torchmend.cli.app import GuardedStdout, StdoutFailed, app, degrade_streams, stdout_failed
from torchmend.cli.exitcodes import ExitCode
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
    _pin_state_dir()
    stdout = GuardedStdout(sys.stdout)  # a full or closed stdout: StdoutFailed
    sys.stdout = stdout
    install()  # SIGTERM and SIGHUP stop torchmend the way Ctrl-C does, through the code that runs
    try:
        code = _ended()
    except BaseException as e:  # a bug in torchmend: its traceback follows, and a machine format its document
        failure.record(int(ExitCode.INTERNAL_ERROR), f"internal error in torchmend: {type(e).__name__}: {e}")
        _document(stdout, int(ExitCode.INTERNAL_ERROR))
        raise
    sys.exit(_document(stdout, code))


def _pin_state_dir() -> None:
    """A relative $TORCHMEND_STATE_DIR (store/state.py) names a folder under the one torchmend was started in: made
    absolute once, here, so every part of this run, the script it runs (in a copy of the folder, elsewhere) and any
    torchmend that starts means the same folder. (Not through torchmend.store: 50 ms more on every start.)"""
    given = os.environ.get("TORCHMEND_STATE_DIR", "")
    if given and not os.path.isabs(given):
        os.environ["TORCHMEND_STATE_DIR"] = os.path.abspath(given)


def _ended() -> int:
    """Run the command; its exit code, after the one line each ending the command did not say itself deserves."""
    try:
        try:
            app()  # typer turns a KeyboardInterrupt no command caught into exit 130
        finally:
            sys.stdout.flush()  # what is still buffered fails here, where it is handled, not at exit
    except SystemExit as e:
        return _status(e.code)
    except KeyboardInterrupt:
        return 130
    except StdoutFailed as e:
        return stdout_failed(e.error)
    except OSError as e:
        if e.errno != errno.ENOSPC:
            raise
        # A full disk where torchmend itself writes (the run's folder in TMPDIR, a cache): named, not a traceback.
        where = f" ({e.filename})" if e.filename else ""
        said = f"no space left on device{where}: free space there, or point TMPDIR elsewhere"
        failure.record(int(ExitCode.INTERNAL_ERROR), said)
        print(f"torchmend: {said}", file=sys.stderr)
        return 1
    except Stopped as e:  # one no command caught: nothing of torchmend's own was left half done (store defers them)
        failure.record(exit_code(e), describe(e))
        try:
            print(f"torchmend: {describe(e)}", file=sys.stderr)
        except OSError:  # SIGHUP: the terminal may be gone
            pass
        return exit_code(e)
    return 0  # typer ends every command with SystemExit: not reached


def _status(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)  # sys.exit("message"), as Python itself would say it
    return 1


def _document(stdout: GuardedStdout, code: int) -> int:
    """Write the error document of the machine format asked for (cli/failure.py) when the command failed before
    its report reached stdout; the exit code, which a stdout that cannot take it changes."""
    if stdout.written:
        return code
    text = failure.document(code)
    if text is None:
        return code
    try:
        stdout.write(text)
        stdout.flush()
    except StdoutFailed as e:
        return stdout_failed(e.error)
    return code
