"""Exit codes: docs/exit-codes.md is generated from this module (scripts/gen_docs.py; a test checks it is current)."""

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0  # the script ran and was profiled (with or without findings)
    INTERNAL_ERROR = 1  # a bug in torchmend, or the child could not install its hooks
    USAGE = 2  # bad command line
    SCRIPT_NOT_FOUND = 3  # the script (or a path given to lint) does not exist
    SCRIPT_FAILED = 4  # the script failed (syntax error, exception, non-zero exit, killed) before anything compiled
    NOTHING_COMPILED = 5  # the run ended without compiling any frame (no torch.compile, or a budget too small)
    FINDINGS = 6  # scan --fail-on-findings: findings to fix; fix --check: changes to make; lint: findings remain
    NO_TORCH = 7  # torch cannot be imported by the Python that runs the script
    SCRIPT_FAILED_AFTER_COMPILE = 8  # the script failed after compiling: the report shows what was seen
    WRITE_REFUSED = 9  # fix/undo: a file changed since the scan, is read-only or outside the project; nothing written
    VERIFY_FAILED = 10  # verify refused the patch (fix: nothing written): failed, numerics differ, or worse
    NOTHING_TO_UNDO = 11  # undo: no fix of this project left to undo
    NO_EFFECT = 12  # verify: the patch changed no count (breaks, recompiles, limit hits, findings)
    NOTHING_TO_SHIP = 13  # pr: no fix of this project to ship, or it is already committed
    NOT_A_REPO = 14  # pr: not a git repository, no commit yet, a file outside it, or a git command failed
    DIRTY_TREE = 15  # pr: changes torchmend did not make (other files, edits after the fix); nothing done
    NO_REMOTE = 16  # pr: no such remote, or its URL names no GitHub repository
    PUSH_REJECTED = 17  # pr: git push rejected or failed; the local branch and commit were kept
    FORGE_AUTH = 18  # pr: no token, or the API refused it (401, 403)
    FORGE_NOT_FOUND = 19  # pr: the API does not know the repository (404)
    FORGE_INVALID = 20  # pr: the API refused the request as invalid (422)
    FORGE_UNREACHABLE = 21  # pr: the API could not be reached, or failed (network, timeout, 5xx, not JSON)
    TRACE_UNREADABLE = 22  # --from-trace: no trace logs at the path, or they record no compilation
    STDOUT_FAILED = 23  # stdout could not be written (a full disk, /dev/full): what it got is incomplete
    CONFIG_INVALID = 24  # [tool.torchmend] in pyproject.toml: an unknown key or rule code, a wrong type, or not TOML
    PROJECT_BUSY = 25  # fix/undo/lint --fix: another torchmend held the project's lock too long; nothing written
    HANGUP = 129  # SIGHUP (the terminal closed), handled as Ctrl-C is
    INTERRUPTED = 130  # Ctrl-C (SIGINT): the script's process group stopped, temp folders removed
    BROKEN_PIPE = 141  # the reader of stdout went away early (`... | head`): quiet, as SIGPIPE would end it
    TERMINATED = 143  # SIGTERM (`timeout`, CI runners, `docker stop`), handled as Ctrl-C is


DESCRIPTIONS = {
    ExitCode.OK: "the script ran and was profiled (with or without findings); fix: also when it wrote nothing because "
    "no change was left that removed its findings, whichever verification round found it (its `outcome:` line says "
    "so)",
    ExitCode.INTERNAL_ERROR: "internal error in torchmend (please report it); or the disk is full where torchmend "
    "itself writes (the message names it: no space left on device)",
    ExitCode.USAGE: "usage error: bad option or argument (e.g. a `tune --report` path that cannot be written, "
    "checked before anything runs)",
    ExitCode.SCRIPT_NOT_FOUND: "the script does not exist or is not a file, or a path given to lint does not exist",
    ExitCode.SCRIPT_FAILED: "the script failed before anything was compiled (syntax error, exception, non-zero exit, killed); "
    "the tail of its output is shown",
    ExitCode.NOTHING_COMPILED: "the run ended without compiling anything: the script never calls torch.compile, "
    "or --steps/--timeout ended it first",
    ExitCode.FINDINGS: "scan --fail-on-findings found findings to fix, fix --check found changes to make, or lint "
    "found findings (after --fix, those that remain); --exit-zero turns it into 0",
    ExitCode.NO_TORCH: "torch cannot be imported by the Python that runs the script",
    ExitCode.SCRIPT_FAILED_AFTER_COMPILE: "the script failed after compiling; the report shows what was seen up to then",
    ExitCode.WRITE_REFUSED: "fix/undo wrote nothing: a file changed since it was scanned (another fix of the "
    "project wrote it first, say), is read-only, or is outside the project; or the state folder cannot hold the "
    "undo records (undo: cannot retire the record of a fix undone already)",
    ExitCode.VERIFY_FAILED: "verify refused the patch (fix wrote nothing): the patched script failed, changed the "
    "losses or final weights, or showed more graph breaks or recompiles",
    ExitCode.NOTHING_TO_UNDO: "undo: there is no fix of this project left to undo",
    ExitCode.NO_EFFECT: "verify: the patch removed no graph break, recompile or finding (numerics equal)",
    ExitCode.NOTHING_TO_SHIP: "pr: there is no fix of this project to ship (run `torchmend fix` first), or it is "
    "already committed",
    ExitCode.NOT_A_REPO: "pr did nothing: not in a git repository, no commit yet, a changed file outside the "
    "repository, or a git command failed (git's message is shown)",
    ExitCode.DIRTY_TREE: "pr did nothing: the working tree has changes torchmend did not make (they are named), a "
    "fixed file was edited after the fix, or the branch exists with other changes",
    ExitCode.NO_REMOTE: "pr did nothing: there is no such remote (--remote), or its URL names no GitHub "
    "repository (--repo)",
    ExitCode.PUSH_REJECTED: "pr: git push was rejected or failed (it never forces); the local branch and commit "
    "were kept, your branch and working tree are as they were; run pr again to retry",
    ExitCode.FORGE_AUTH: "pr: no GitHub token in $GITHUB_TOKEN (or --token-env), or the API refused it (401, 403)",
    ExitCode.FORGE_NOT_FOUND: "pr: the GitHub API does not know the repository, or the token cannot see it (404)",
    ExitCode.FORGE_INVALID: "pr: the GitHub API refused the pull request as invalid (422: e.g. the base branch "
    "does not exist there)",
    ExitCode.FORGE_UNREACHABLE: "pr: the GitHub API could not be reached or failed (network, timeout, 5xx, an "
    "answer that is not JSON); --api-url sets it, $TORCHMEND_API_TIMEOUT the seconds to wait (30)",
    ExitCode.TRACE_UNREADABLE: "--from-trace: the path holds no TORCH_TRACE logs, or they record no compilation",
    ExitCode.STDOUT_FAILED: "stdout could not be written (e.g. a full disk, or /dev/full): the output is "
    "incomplete; what the command did to files stands (`fix --diff` writes none)",
    ExitCode.CONFIG_INVALID: "the configuration cannot be used: [tool.torchmend] in pyproject.toml has an "
    "unknown key, a value of the wrong type, a rule code that does not exist in select, ignore or per-file-ignores "
    "(a code or the prefix of one: TM1, TM203), or the file is not valid TOML (the message names the file, key and "
    "line); nothing was run",
    ExitCode.PROJECT_BUSY: "fix, undo or lint --fix wrote nothing: another torchmend was writing or undoing a fix "
    "of the same project (it holds the project's lock in the state folder) for longer than "
    "$TORCHMEND_LOCK_WAIT seconds (10); run it again when that one is done",
    ExitCode.HANGUP: "stopped by SIGHUP (the terminal closed), handled as Ctrl-C is",
    ExitCode.INTERRUPTED: "interrupted (Ctrl-C, SIGINT) at any step: a running script is stopped with everything it "
    "started (its process group), torchmend's temporary folders are removed, and nothing is written; a write "
    "already under way is finished first and kept (`torchmend undo` puts it back)",
    ExitCode.BROKEN_PIPE: "the program reading stdout stopped early (e.g. `head`): torchmend stops quietly, as "
    "SIGPIPE would end it",
    ExitCode.TERMINATED: "stopped by SIGTERM (what `timeout`, CI runners and `docker stop` send), handled as Ctrl-C is",
}
