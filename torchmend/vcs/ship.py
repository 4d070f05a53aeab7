"""Ship the changes of the last `fix` (already on disk) as a branch, a commit, a push and a pull request.

The order is chosen so that a failure leaves as little as possible behind, and never a half-done checkout:

1. Look, change nothing: a git repository with a commit; every file the fix wrote is inside it, still as the
   fix left it, and was committed as the fix found it (so the commit holds torchmend's changes only); no
   other tracked file differs from HEAD; the remote exists and names a GitHub repository.
2. Ask the API for an open pull request from the branch (this checks the token, the repository and that
   the API answers before anything is created).
3. Make the commit on top of HEAD with plumbing (a temporary index: the user's branch, index and working
   tree are never touched, so the user is on their branch, with their files as they were, throughout),
   then create the branch at it. An identical branch from an earlier run is reused.
4. Push the branch to the remote as configured (never forced; no token in any URL).
5. Update the open pull request (PATCH) or open one (POST).

A failure in 4 or 5 keeps the local branch (and, after 4, the pushed one); the error says so and how to
retry (`torchmend pr` again reuses both) or clean up.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from torchmend.values import Root
from torchmend.vcs import body as md
from torchmend.vcs.errors import DIRTY, NO_REMOTE, NOT_A_REPO, PUSH, USAGE, PrError
from torchmend.vcs.errors import NOTHING as NOTHING  # the CLI reads every kind as ship.<KIND>
from torchmend.vcs.forge import AUTH, INVALID, NOT_FOUND, ForgeError, GitHub, check_api_url
from torchmend.vcs.git import Git, GitError
from torchmend.vcs.remote import GITHUB_API, GITHUB_HOST, RepoRef, display_url, parse_full_name, parse_remote_url
from torchmend.vcs.tree import files_to_commit

if TYPE_CHECKING:
    from torchmend.store import UndoRecord


@dataclass(frozen=True)
class PrOptions:
    remote: str = "origin"
    base: str | None = None  # the PR's base branch; default: what the current branch tracks there, else its name
    repo: str | None = None  # OWNER/NAME instead of reading it from the remote's URL
    api_url: str | None = None  # default https://api.github.com (a github.com remote)
    token_env: str = "GITHUB_TOKEN"
    title: str | None = None
    draft: bool = False
    dry_run: bool = False


@dataclass(frozen=True)
class Plan:
    toplevel: Path
    current: str | None  # the branch the user is on (None: detached HEAD)
    head: str  # the commit the branch starts from
    base: str
    branch: str
    existing_commit: str | None  # the branch exists already with this same change: reused
    repo: RepoRef
    api_url: str
    remote: str
    remote_url: str  # for display: no credentials
    files: dict[str, bytes]  # path relative to the top -> bytes to commit (the file's own encoding, BOM kept)
    title: str
    message: str
    body: str
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class PrResult:
    plan: Plan
    dry_run: bool
    commit: str | None = None
    new_commit: bool = False
    pushed: bool = False
    number: int | None = None
    url: str | None = None
    created: bool = False  # True: opened a pull request; False: updated the open one
    log: tuple[str, ...] = field(default=())

    @property
    def branch(self) -> str:
        return self.plan.branch


def api_timeout() -> float:
    """Seconds to wait for each answer of the API: $TORCHMEND_API_TIMEOUT, else 30."""
    try:
        return max(0.1, float(os.environ.get("TORCHMEND_API_TIMEOUT", "") or 30))
    except ValueError:
        return 30.0


def redactor(token: str) -> Callable[[str], str]:
    if len(token) < 4:
        return lambda s: s
    return lambda s: s.replace(token, "***")


@dataclass(frozen=True)
class _Repo:
    git: Git
    top: Path
    head: str
    current: str | None
    repo: RepoRef
    api_url: str
    base: str
    url: str  # the remote's URL, without credentials


def _repository(root: Root, options: PrOptions, redact: Callable[[str], str]) -> _Repo:
    """The repository, HEAD, the remote and the GitHub repository it names, the base branch. Raises PrError."""
    git = Git(root.path, redact)
    top = git.toplevel()
    if top is None:
        raise PrError(
            NOT_A_REPO,
            f"{root} is not in a git repository: `torchmend pr` commits the fix on a new "
            "branch. Create one with `git init` and a first commit (or use `torchmend fix --diff`).",
        )
    git = Git(top, redact)
    head = git.rev("HEAD")
    if head is None:
        raise PrError(
            NOT_A_REPO,
            f"the repository at {top} has no commit yet: commit your code first, so the "
            "pull request can hold torchmend's change alone.",
        )
    current = git.current_branch()

    # The remote and the repository it names.
    remotes = git.remotes()
    if options.remote not in remotes:
        others = f" (remotes here: {', '.join(remotes)})" if remotes else " (this repository has no remote)"
        raise PrError(
            NO_REMOTE,
            f"no remote named {options.remote!r}{others}: add it with `git remote add "
            f"{options.remote} URL`, or name another with --remote.",
        )
    raw_url = git.config(f"remote.{options.remote}.url") or ""
    url = display_url(raw_url)
    if options.repo:
        repo = parse_full_name(options.repo)
        if repo is None:
            raise PrError(USAGE, f"--repo must be OWNER/NAME, not {options.repo!r}")
    else:
        repo = parse_remote_url(raw_url)
        if repo is None:
            raise PrError(
                NO_REMOTE,
                f"cannot tell the GitHub repository from remote {options.remote!r} ({url}): "
                "its URL is not of the form https://HOST/OWNER/NAME or git@HOST:OWNER/NAME. "
                "Name it with --repo OWNER/NAME.",
            )
    api_url = options.api_url
    if api_url is None:
        if repo.host != GITHUB_HOST:
            raise PrError(
                USAGE,
                f"remote {options.remote!r} is on {repo.host}, not {GITHUB_HOST}: for GitHub "
                f"Enterprise pass --api-url https://{repo.host}/api/v3",
            )
        api_url = GITHUB_API
    problem = check_api_url(api_url)
    if problem:
        raise PrError(USAGE, problem)

    # The base branch.
    if options.base:
        base = options.base
    elif current:
        base = git.upstream_branch(current, options.remote) or current
    else:
        raise PrError(
            USAGE,
            "HEAD is detached (no branch is checked out): name the branch the pull request is for with --base BRANCH.",
        )
    return _Repo(git, top, head, current, repo, api_url.rstrip("/"), base, url)


def _token(options: PrOptions) -> str:
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", options.token_env):
        raise PrError(USAGE, f"--token-env must name an environment variable, not {options.token_env!r}")
    return os.environ.get(options.token_env, "").strip()


def _no_token(options: PrOptions, repo: RepoRef) -> PrError:
    return PrError(
        AUTH,
        f"${options.token_env} is not set: put a GitHub token that may open pull requests on "
        f"{repo.full_name} in it (`export {options.token_env}=...`), or name another variable with "
        "--token-env.",
        "Nothing was created.",
    )


def preflight(root: Root, options: PrOptions) -> None:
    """Before a `fix --pr` runs: could its result be shipped? A git repository with a commit, the remote and
    its GitHub repository, a token (unless dry_run), and no tracked file differing from HEAD (a file the fix
    then writes must have been committed as it was). Changes nothing, asks no server. Raises PrError."""
    token = _token(options)
    redact = redactor(token)
    try:
        r = _repository(root, options, redact)
        dirty = r.git.status()
    except GitError as e:
        raise PrError(NOT_A_REPO, f"git failed: {redact(str(e))}") from None
    if dirty:
        shown = ", ".join(f"{s.path} ({s.code.strip()})" for s in dirty[:20])
        raise PrError(
            DIRTY,
            f"the working tree has uncommitted changes: {shown}. Commit or stash them first "
            "(`git stash`), so the pull request holds torchmend's changes alone.",
        )
    if not token and not options.dry_run:
        raise _no_token(options, r.repo)


def plan(
    root: Root,
    record: UndoRecord,
    options: PrOptions,
    report: str | None = None,
    redact: Callable[[str], str] = lambda s: s,
) -> Plan:
    """Everything the run will do, found out without changing anything. Raises PrError (and GitError)."""
    r = _repository(root, options, redact)
    git, top, head, current, repo, base, url = r.git, r.top, r.head, r.current, r.repo, r.base, r.url

    # The files: inside the repository, still as the fix left them, committed as the fix found them.
    files, diffs = files_to_commit(git, top, current, record)

    # The branch, the commit, the pull request.
    branch = md.branch_name(record.summary, files)
    if not git.valid_branch_name(branch):
        raise PrError(USAGE, f"cannot name a branch {branch!r}")
    existing = git.rev(f"refs/heads/{branch}")
    if existing is not None:
        same = all(git.blob_of(existing, rel) == git.hash_text(rel, text) for rel, text in files.items()) and set(
            git.changed_paths(existing)
        ) <= set(files)
        if not same:
            raise PrError(
                DIRTY,
                f"a branch {branch} already exists and holds other changes: delete it "
                f"(`git branch -D {branch}`) and run `torchmend pr` again.",
            )
    warnings = []
    ahead = git.ahead(f"refs/remotes/{options.remote}/{base}")
    if ahead:
        warnings.append(
            f"HEAD is {ahead} commit{'s' * (ahead != 1)} ahead of {options.remote}/{base}: the pull "
            f"request will show {'them' if ahead != 1 else 'it'} too (push {base} first to keep it to "
            "torchmend's change)."
        )
    rels = list(files)
    text = md.pr_body(
        report=report if report is not None else record.report,
        summary=record.summary,
        diffs=diffs,
        branch=branch,
        base=base,
        base_commit=head,
    )
    return Plan(
        toplevel=top,
        current=current,
        head=head,
        base=base,
        branch=branch,
        existing_commit=existing,
        repo=repo,
        api_url=r.api_url,
        remote=options.remote,
        remote_url=url,
        files=files,
        title=md.one_line(options.title, 200) if options.title else md.title(record.summary, rels),
        message=md.commit_message(record.summary, rels),
        body=redact(text),
        warnings=tuple(warnings),
    )


def compare_url(p: Plan) -> str:
    return f"https://{p.repo.host}/{p.repo.owner}/{p.repo.name}/compare/{p.base}...{p.branch}?expand=1"


def ship(
    root: Root,
    record: UndoRecord,
    options: PrOptions,
    report: str | None = None,
    log: Callable[[str], None] = lambda s: None,
) -> PrResult:
    """Plan, then (unless dry_run) commit, push and open or update the pull request. Raises PrError."""
    token = _token(options)
    redact = redactor(token)
    try:
        p = plan(root, record, options, report, redact)
    except GitError as e:
        raise PrError(NOT_A_REPO, f"git failed: {redact(str(e))}", "Nothing was created.") from None
    if options.dry_run:
        return PrResult(p, dry_run=True, commit=p.existing_commit)
    if not token:
        raise _no_token(options, p.repo)
    lines: list[str] = []

    def say(s: str) -> None:
        lines.append(redact(s))
        log(redact(s))

    gh = GitHub(p.api_url, token, redact, timeout=api_timeout())
    owner, name = p.repo.owner, p.repo.name
    try:
        existing_prs = gh.open_pulls(owner, name, p.branch)
    except ForgeError as e:
        raise _api_error(e, p, options, "Nothing was created or pushed.") from None

    git = Git(p.toplevel, redact)
    commit, new_commit = p.existing_commit, False
    try:
        if commit is None:
            commit = git.commit_files(p.head, p.files, p.message)
            git.create_branch(p.branch, commit, f"torchmend pr: {p.title}")
            new_commit = True
            say(
                f"Committed {len(p.files)} file{'s' * (len(p.files) != 1)} on branch {p.branch} ({commit[:12]}), "
                f"on top of {p.current or 'HEAD'} at {p.head[:12]}."
            )
        else:
            say(f"Branch {p.branch} already holds this change ({commit[:12]}): reusing it.")
    except GitError as e:
        raise PrError(NOT_A_REPO, f"could not make the commit: {e}", "Nothing was pushed or opened.") from None

    kept = (
        f"The local branch {p.branch} (commit {commit[:12]}) was kept; you are on "
        f"{p.current or 'the same detached HEAD'} and your working tree is as it was. Run `torchmend pr` again "
        f"once this is fixed (it reuses the branch), or remove it with `git branch -D {p.branch}`."
    )
    proc = git.push(p.remote, p.branch)
    if proc.returncode != 0:
        said = redact((proc.stderr + proc.stdout).decode("utf-8", "replace"))
        why = " ".join(ln.strip() for ln in said.splitlines() if ln.strip() and not ln.startswith("To "))[-800:]
        hint = ""
        if "non-fast-forward" in said or "fetch first" in said or "[rejected]" in said:
            hint = (
                f" The remote already has a {p.branch} with commits this one lacks; torchmend never "
                "force-pushes: delete that remote branch if it is stale, then retry."
            )
        raise PrError(PUSH, f"git push to {p.remote} ({p.remote_url}) was rejected or failed: {why}.{hint}", kept)
    say(f"Pushed {p.branch} to {p.remote} ({p.remote_url}).")

    by_hand = (
        f"update #{existing_prs[0].number} by hand: {existing_prs[0].url}"
        if existing_prs
        else f"open it by hand: {compare_url(p)}"
    )
    left = (
        f"The branch {p.branch} (commit {commit[:12]}) is pushed to {p.remote}; no pull request was "
        f"{'updated' if existing_prs else 'opened'}. You are on {p.current or 'the same detached HEAD'} with "
        f"your working tree as it was. Run `torchmend pr` again once this is fixed, or {by_hand}"
    )
    try:
        if existing_prs:
            pr = gh.update_pull(owner, name, existing_prs[0].number, title=p.title, body=p.body)
            created = False
            say(f"Updated pull request #{pr.number}: {pr.url}")
        else:
            pr = gh.create_pull(
                owner, name, head=p.branch, base=p.base, title=p.title, body=p.body, draft=options.draft
            )
            created = True
            say(f"Opened pull request #{pr.number}: {pr.url}")
    except ForgeError as e:
        raise _api_error(e, p, options, left) from None
    return PrResult(
        p,
        dry_run=False,
        commit=commit,
        new_commit=new_commit,
        pushed=True,
        number=pr.number,
        url=pr.url,
        created=created,
        log=tuple(lines),
    )


def _api_error(e: ForgeError, p: Plan, options: PrOptions, left: str) -> PrError:
    where = f"{p.repo.full_name} at {p.api_url}"
    if e.kind == AUTH and e.status == 401:
        what = (
            f"GitHub refused the token in ${options.token_env} (401): it is invalid, expired or revoked. "
            "Create a new one and try again."
        )
    elif e.kind == AUTH:
        what = (
            f"the token in ${options.token_env} may not do this on {where} (403): it needs Pull requests: "
            "write and Contents: write (fine-grained token) or the repo scope (classic token), and SSO "
            "authorisation where the organisation requires it."
        )
    elif e.kind == NOT_FOUND:
        what = (
            f"{where} was not found (404): check the remote URL (or --repo) and --api-url. GitHub also "
            f"answers 404 when the token in ${options.token_env} cannot see a private repository."
        )
    elif e.kind == INVALID:
        what = (
            f"GitHub refused the request as invalid ({e.status or 'bad answer'}). Common causes: the base "
            f"branch {p.base!r} does not exist on GitHub (choose it with --base), or the branch has no "
            "change against it."
        )
    elif e.status is not None and e.status < 300:
        what = (
            f"the GitHub API at {p.api_url} answered with something GitHub does not send (a proxy or a login "
            "page in the way?): check the network and --api-url."
        )
    else:
        what = f"the GitHub API at {p.api_url} could not be reached or failed: check the network and --api-url."
    return PrError(e.kind, f"{what} ({e})", left)
