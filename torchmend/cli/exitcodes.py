"""Exit codes: documented in README.md (a test checks that the table there matches this one)."""

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0  # the script ran and was profiled (with or without findings)
    INTERNAL_ERROR = 1  # a bug in torchmend, or the child could not install its hooks
    USAGE = 2  # bad command line
    SCRIPT_NOT_FOUND = 3  # the script path does not exist or is not a file
    SCRIPT_FAILED = 4  # the script failed (syntax error, exception, non-zero exit, killed) before anything compiled
    NOTHING_COMPILED = 5  # the run ended without compiling any frame (no torch.compile, or a budget too small)
    FINDINGS = 6  # --fail-on-findings and there are findings to fix
    NO_TORCH = 7  # torch cannot be imported by the Python that runs the script
    SCRIPT_FAILED_AFTER_COMPILE = 8  # the script failed after compiling: the report shows what was seen


DESCRIPTIONS = {
    ExitCode.OK: "the script ran and was profiled (with or without findings)",
    ExitCode.INTERNAL_ERROR: "internal error in torchmend (please report it)",
    ExitCode.USAGE: "usage error: bad option or argument",
    ExitCode.SCRIPT_NOT_FOUND: "the script does not exist or is not a file",
    ExitCode.SCRIPT_FAILED: "the script failed before anything was compiled (syntax error, exception, non-zero exit, killed); "
    "the tail of its output is shown",
    ExitCode.NOTHING_COMPILED: "the run ended without compiling anything: the script never calls torch.compile, "
    "or --steps/--timeout ended it first",
    ExitCode.FINDINGS: "--fail-on-findings was given and there are findings to fix",
    ExitCode.NO_TORCH: "torch cannot be imported by the Python that runs the script",
    ExitCode.SCRIPT_FAILED_AFTER_COMPILE: "the script failed after compiling; the report shows what was seen up to then",
}
