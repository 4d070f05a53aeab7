"""git, run without a shell: every command is a list of arguments, the output is captured.

Only what shipping a fix needs. The branch and its commit are made with plumbing (a temporary index,
hash-object, write-tree, commit-tree, update-ref), so the user's branch, index and working tree are never
touched: the user stays on their branch from start to end, and a failure cannot leave a checkout half-way.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

ZERO = "0" * 40


class GitError(Exception):
    """A git command failed; the message has its arguments, exit status and stderr (redacted)."""

    def __init__(self, args: Sequence[str], returncode: int, stderr: str) -> None:
        self.args_ = tuple(args)
        self.returncode = returncode
        self.stderr = stderr.strip()
        super().__init__(f"git {' '.join(args)} failed (exit {returncode}): {self.stderr}")


@dataclass(frozen=True)
class Status:
    """One entry of `git status --porcelain`: the two status letters and the path (relative to the top)."""

    code: str
    path: str


class Git:
    def __init__(self, cwd: Path, redact: Callable[[str], str] = lambda s: s) -> None:
        self.cwd = cwd
        self.redact = redact

    def run(
        self,
        *args: str,
        input: bytes | None = None,
        env: Mapping[str, str] | None = None,
        check: bool = True,
        timeout: float = 120,
    ) -> subprocess.CompletedProcess[bytes]:
        full_env = dict(os.environ)
        full_env["GIT_OPTIONAL_LOCKS"] = "0"  # status must not rewrite the index (dry runs touch nothing)
        if not sys.stdin.isatty():
            full_env["GIT_TERMINAL_PROMPT"] = "0"  # fail instead of waiting for a password nobody can type
        full_env.update(env or {})
        try:
            proc = subprocess.run(
                ["git", *args],
                cwd=self.cwd,
                env=full_env,
                input=input,
                capture_output=True,
                timeout=timeout,
                stdin=None if input is not None else subprocess.DEVNULL,
            )
        except FileNotFoundError as e:
            raise GitError(args, 127, "git is not installed (or not on PATH)") from e
        except subprocess.TimeoutExpired as e:
            raise GitError(args, 124, f"no answer after {timeout:.0f} s") from e
        if check and proc.returncode != 0:
            raise GitError(args, proc.returncode, self.redact(proc.stderr.decode("utf-8", "replace")))
        return proc

    def out(self, *args: str, **kw: object) -> str:
        return self.run(*args, **kw).stdout.decode("utf-8", "replace").strip()  # type: ignore[arg-type]

    def ok(self, *args: str) -> bool:
        return self.run(*args, check=False).returncode == 0

    # -- questions -------------------------------------------------------------------------------------------

    def toplevel(self) -> Path | None:
        proc = self.run("rev-parse", "--show-toplevel", check=False)
        if proc.returncode != 0 or not proc.stdout.strip():
            return None
        return Path(proc.stdout.decode().strip())

    def rev(self, name: str) -> str | None:
        proc = self.run("rev-parse", "--verify", "-q", f"{name}^{{commit}}", check=False)
        return (proc.stdout.decode().strip() or None) if proc.returncode == 0 else None

    def current_branch(self) -> str | None:
        proc = self.run("symbolic-ref", "-q", "--short", "HEAD", check=False)
        return (proc.stdout.decode().strip() or None) if proc.returncode == 0 else None

    def config(self, key: str) -> str | None:
        proc = self.run("config", "--get", key, check=False)
        return proc.stdout.decode("utf-8", "replace").strip() if proc.returncode == 0 else None

    def remotes(self) -> list[str]:
        return self.out("remote").split()

    def upstream_branch(self, branch: str, remote: str) -> str | None:
        """The branch on `remote` that `branch` tracks (branch.<b>.merge), if it tracks one there."""
        if self.config(f"branch.{branch}.remote") != remote:
            return None
        merge = self.config(f"branch.{branch}.merge") or ""
        return merge.removeprefix("refs/heads/") or None

    def ahead(self, base_ref: str, head: str = "HEAD") -> int | None:
        """Commits in `head` and not in `base_ref`; None when base_ref does not exist."""
        if self.rev(base_ref) is None:
            return None
        return int(self.out("rev-list", "--count", f"{base_ref}..{head}"))

    def status(self) -> list[Status]:
        """Tracked files that differ from HEAD, in the index or the working tree (untracked files are left out:
        shipping never touches them)."""
        raw = self.run("status", "--porcelain=v1", "-z", "--untracked-files=no", "--ignore-submodules=none").stdout
        entries = raw.decode("utf-8", "surrogateescape").split("\0")
        out, i = [], 0
        while i < len(entries):
            entry = entries[i]
            i += 1
            if len(entry) < 4:
                continue
            code, path = entry[:2], entry[3:]
            if "R" in code or "C" in code:
                i += 1  # the original path follows
            out.append(Status(code, path))
        return out

    def blob_of(self, rev: str, path: str) -> str | None:
        """The blob id of `path` at `rev`, or None when it is not there."""
        proc = self.run("rev-parse", "--verify", "-q", f"{rev}:{path}", check=False)
        return (proc.stdout.decode().strip() or None) if proc.returncode == 0 else None

    def mode_of(self, rev: str, path: str) -> str | None:
        line = self.out("ls-tree", rev, "--", path)
        return line.split()[0] if line else None

    def hash_text(self, path: str, text: str | bytes, write: bool = False) -> str:
        """The blob id `text` (bytes as they are, a str as UTF-8) would have as `path` (the path's clean filters
        applied, e.g. autocrlf)."""
        args = ["hash-object", "--stdin", f"--path={path}"] + (["-w"] if write else [])
        return self.out(*args, input=text if isinstance(text, bytes) else text.encode("utf-8"))

    def commit_message(self, rev: str) -> str:
        return self.out("log", "-1", "--format=%B", rev)

    def changed_paths(self, rev: str) -> list[str]:
        return (
            self.out("diff-tree", "--no-commit-id", "--name-only", "-r", "-z", f"{rev}^", rev).strip("\0").split("\0")
        )

    # -- the commit ------------------------------------------------------------------------------------------

    def commit_files(self, parent: str, files: Mapping[str, str | bytes], message: str) -> str:
        """A commit on top of `parent` whose tree is parent's with `files` (path -> bytes, or text as UTF-8)
        replaced.

        Uses a temporary index, so the user's index and working tree stay as they are. Returns the commit id.
        """
        with tempfile.TemporaryDirectory(prefix="torchmend-index-") as tmp:
            env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
            self.run("read-tree", parent, env=env)
            for path, text in files.items():
                mode = self.mode_of(parent, path) or "100644"
                blob = self.hash_text(path, text, write=True)
                self.run("update-index", "--cacheinfo", f"{mode},{blob},{path}", env=env)
            tree = self.out("write-tree", env=env)
        return self.out("commit-tree", tree, "-p", parent, "-F", "-", input=message.encode("utf-8"))

    def create_branch(self, branch: str, commit: str, reason: str) -> None:
        """Create refs/heads/<branch> at `commit`; fails (never moves it) when the branch exists."""
        self.run("update-ref", "-m", reason, f"refs/heads/{branch}", commit, ZERO)

    def push(self, remote: str, branch: str, timeout: float = 300) -> subprocess.CompletedProcess[bytes]:
        """Push the branch to the same name on `remote`, as the remote is configured; never forced."""
        return self.run(
            "push", "--porcelain", remote, f"refs/heads/{branch}:refs/heads/{branch}", check=False, timeout=timeout
        )

    def valid_branch_name(self, name: str) -> bool:
        return self.ok("check-ref-format", "--branch", name)
