"""Exit codes: documented in README.md (a test checks that the table there matches this one)."""

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0  # the script ran and was profiled (with or without findings)
    INTERNAL_ERROR = 1  # a bug in torchmend, or the child could not install its hooks
    USAGE = 2  # bad command line
    SCRIPT_NOT_FOUND = 3  # the script path does not exist or is not a file
    SCRIPT_FAILED = 4  # the script failed (syntax error, exception, non-zero exit, killed) before anything compiled
    NOTHING_COMPILED = 5  # the run ended without compiling any frame (no torch.compile, or a budget too small)
    FINDINGS = 6  # scan --fail-on-findings: findings to fix; fix --check: changes to make
    NO_TORCH = 7  # torch cannot be imported by the Python that runs the script
    SCRIPT_FAILED_AFTER_COMPILE = 8  # the script failed after compiling: the report shows what was seen
    WRITE_REFUSED = 9  # fix/undo: a file changed since the scan, is read-only or outside the project; nothing written
    VERIFY_FAILED = 10  # verify refused the patch (fix: nothing written): failed, numerics differ, or worse
    NOTHING_TO_UNDO = 11  # undo: no fix of this project left to undo
    NO_EFFECT = 12  # verify: the patch changed no count (breaks, recompiles, limit hits, findings)
    INTERRUPTED = 130  # Ctrl-C: nothing was written


DESCRIPTIONS = {
    ExitCode.OK: "the script ran and was profiled (with or without findings)",
    ExitCode.INTERNAL_ERROR: "internal error in torchmend (please report it)",
    ExitCode.USAGE: "usage error: bad option or argument",
    ExitCode.SCRIPT_NOT_FOUND: "the script does not exist or is not a file",
    ExitCode.SCRIPT_FAILED: "the script failed before anything was compiled (syntax error, exception, non-zero exit, killed); "
    "the tail of its output is shown",
    ExitCode.NOTHING_COMPILED: "the run ended without compiling anything: the script never calls torch.compile, "
    "or --steps/--timeout ended it first",
    ExitCode.FINDINGS: "scan --fail-on-findings found findings to fix, or fix --check found changes to make",
    ExitCode.NO_TORCH: "torch cannot be imported by the Python that runs the script",
    ExitCode.SCRIPT_FAILED_AFTER_COMPILE: "the script failed after compiling; the report shows what was seen up to then",
    ExitCode.WRITE_REFUSED: "fix/undo wrote nothing: a file changed since it was scanned, is read-only, or is "
    "outside the project",
    ExitCode.VERIFY_FAILED: "verify refused the patch (fix wrote nothing): the patched script failed, changed the "
    "losses or final weights, or showed more graph breaks or recompiles",
    ExitCode.NOTHING_TO_UNDO: "undo: there is no fix of this project left to undo",
    ExitCode.NO_EFFECT: "verify: the patch removed no graph break, recompile or finding (numerics equal)",
    ExitCode.INTERRUPTED: "interrupted (Ctrl-C); nothing was written",
}
