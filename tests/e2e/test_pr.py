"""`torchmend pr`: a fix shipped as a branch, a commit, a push and a pull request.

No forge can be reached from where these tests run, so each test starts a local HTTP server (http.server in a
thread) that speaks the GitHub REST endpoints `pr` uses (list, create and update pull requests, under the
GitHub Enterprise prefix /api/v3) and checks what it receives: the Authorization header, head and base, the
body, and that the head branch really is on the remote. git is real: a work tree whose `origin` is
https://github.com/acme/trainer.git (or the ssh form), rewritten by `url.<path>.insteadOf` to a real bare
repository on disk, so owner/repo are parsed from a GitHub URL and the push lands where the test can read
it (`git --git-dir bare ...`). Undo records are prepared directly (save_undo) except in one test that runs a
real `torchmend fix`. A distinctive fake token must appear in no output, git config, commit or body.
"""

from __future__ import annotations

import codecs
import json
import re
import socket
import subprocess
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import CliResult, torchmend

from torchmend.model import Finding
from torchmend.store import save_undo, write_fix
from torchmend.values import Root
from torchmend.vcs import ship
from torchmend.vcs.body import fix_report, md_code, md_fence, md_link, md_text
from torchmend.vcs.forge import ForgeError, GitHub
from torchmend.vcs.remote import RepoRef, display_url, parse_remote_url
from torchmend.verify.compare import Metric, Stat, Verification

TOKEN = "ghp_TORCHMENDtestTOKEN0123456789abcdefXYZ"
OWNER, NAME = "acme", "trainer"
HTTPS_URL = f"https://github.com/{OWNER}/{NAME}.git"

BEFORE = """import torch


def forward(x):
    print("mean", x.mean())
    return x * 2
"""
AFTER = """import torch


def forward(x):
    if not torch.compiler.is_compiling():
        print("mean", x.mean())
    return x * 2
"""
SUMMARY = "TM101 train.py:5"


# -- a local server speaking GitHub's pull request endpoints ------------------------------------------------------


class FakeGitHub:
    """Pull requests of acme/trainer, kept in memory; head branches must exist in the bare remote."""

    def __init__(self, bare: Path) -> None:
        self.bare = bare
        self.requests: list[dict] = []
        self.pulls: dict[int, dict] = {}
        self.fail: dict[str, tuple[int, str]] = {}  # method -> (status, message): answer that instead
        self.redirect_to: str | None = None  # answer every request with a 301 to this URL
        self.slow: dict[str, float] = {}  # method -> seconds: do the work, then wait that long before answering
        self.garbage: dict[str, bytes] = {}  # method -> a 200 answer that is not JSON (a proxy's login page)
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep the test output clean
                pass

            def _answer(self, status: int, data) -> None:
                raw = json.dumps(data).encode()
                self.send_response(status)
                if fake.redirect_to:
                    self.send_header("Location", fake.redirect_to)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def _handle(self) -> None:
                url = urllib.parse.urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                req = {
                    "method": self.command,
                    "path": url.path,
                    "query": urllib.parse.parse_qs(url.query),
                    "auth": self.headers.get("Authorization"),
                    "accept": self.headers.get("Accept"),
                    "json": json.loads(raw) if raw else None,
                    "raw": raw.decode(),
                }
                fake.requests.append(req)
                if self.command in fake.garbage:
                    self.send_response(200)
                    self.send_header("Content-Type", "text/html")
                    self.end_headers()
                    self.wfile.write(fake.garbage[self.command])
                    return
                answer = fake.answer(req)
                time.sleep(fake.slow.get(self.command, 0))
                try:
                    self._answer(*answer)
                except OSError:  # the client gave up waiting
                    pass

            do_GET = do_POST = do_PATCH = _handle

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.api_url = f"http://127.0.0.1:{self.server.server_address[1]}/api/v3"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def _branch_exists(self, name: str) -> bool:
        return (
            subprocess.run(
                ["git", "--git-dir", str(self.bare), "rev-parse", "--verify", "-q", f"refs/heads/{name}"],
                capture_output=True,
            ).returncode
            == 0
        )

    def answer(self, req: dict) -> tuple[int, object]:
        if self.redirect_to:
            return 301, {"message": "Moved Permanently"}
        if req["auth"] != f"Bearer {TOKEN}":
            return 401, {"message": "Bad credentials"}
        if req["accept"] != "application/vnd.github+json":
            return 415, {"message": "Unsupported Accept"}
        if req["method"] in self.fail:
            status, message = self.fail[req["method"]]
            return status, {"message": message}
        m = re.fullmatch(r"/api/v3/repos/([^/]+)/([^/]+)/pulls(?:/(\d+))?", req["path"])
        if not m or (m[1], m[2]) != (OWNER, NAME):
            return 404, {"message": "Not Found"}
        number = int(m[3]) if m[3] else None
        if req["method"] == "GET" and number is None:
            head = req["query"].get("head", [""])[0]
            state = req["query"].get("state", ["open"])[0]
            return 200, [p for p in self.pulls.values() if p["head"]["label"] == head and p["state"] == state]
        if req["method"] == "POST" and number is None:
            data = req["json"]
            if not all(isinstance(data.get(k), str) and data[k] for k in ("title", "head", "base", "body")):
                return 422, {"message": "Validation Failed", "errors": [{"code": "missing_field"}]}
            if not self._branch_exists(data["head"]):
                return 422, {
                    "message": "Validation Failed",
                    "errors": [{"resource": "PullRequest", "field": "head", "code": "invalid"}],
                }
            if not self._branch_exists(data["base"]):
                return 422, {
                    "message": "Validation Failed",
                    "errors": [{"resource": "PullRequest", "field": "base", "code": "invalid"}],
                }
            label = f"{OWNER}:{data['head']}"
            if any(p["head"]["label"] == label and p["state"] == "open" for p in self.pulls.values()):
                return 422, {
                    "message": "Validation Failed",
                    "errors": [{"message": f"A pull request already exists for {label}."}],
                }
            n = len(self.pulls) + 1
            self.pulls[n] = {
                "number": n,
                "state": "open",
                "title": data["title"],
                "body": data["body"],
                "html_url": f"https://github.com/{OWNER}/{NAME}/pull/{n}",
                "head": {"ref": data["head"], "label": label},
                "base": {"ref": data["base"]},
            }
            return 201, self.pulls[n]
        if req["method"] == "PATCH" and number in self.pulls:
            self.pulls[number].update({k: v for k, v in req["json"].items() if k in ("title", "body")})
            return 200, self.pulls[number]
        return 404, {"message": "Not Found"}

    def calls(self) -> list[str]:
        return [f"{r['method']} {r['path']}" for r in self.requests]


# -- a project in git with a bare remote ------------------------------------------------------------------------


def git(cwd: Path, *args: str, check: bool = True) -> str:
    proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
    if check and proc.returncode:
        raise AssertionError(f"git {' '.join(args)}: {proc.stderr}")
    return proc.stdout.strip()


class World(SimpleNamespace):
    proj: Path
    bare: Path
    gh: FakeGitHub
    results: list[CliResult]

    def pr(self, *args: str, cwd: Path | None = None, api: bool = True) -> CliResult:
        extra = ("--api-url", self.gh.api_url) if api else ()
        result = torchmend("pr", *extra, *args, cwd=cwd or self.proj, timeout=120)
        self.results.append(result)
        return result

    def record(
        self,
        files: dict[str, tuple[str, str]] | None = None,
        summary: str = SUMMARY,
        report: str | None = None,
        project: Path | None = None,
    ) -> None:
        """What `fix` leaves: the new texts on disk and an undo record."""
        project = project or self.proj
        files = files or {"train.py": (BEFORE, AFTER)}
        changes = {str(project / rel): texts for rel, texts in files.items()}
        for path, (_, after) in changes.items():
            Path(path).write_text(after)
        save_undo(changes, project, "(patch)", summary, report)

    def branches(self) -> list[str]:
        return git(self.proj, "for-each-ref", "--format=%(refname:short)", "refs/heads/torchmend/").split()

    def remote_branches(self) -> list[str]:
        return git(self.bare, "for-each-ref", "--format=%(refname:short)", "refs/heads/torchmend/").split()


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    gitconfig = tmp_path / "gitconfig"
    gitconfig.write_text("[user]\n\tname = Test User\n\temail = test@example.com\n[init]\n\tdefaultBranch = main\n")
    for key, value in {
        "GIT_CONFIG_GLOBAL": str(gitconfig),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CEILING_DIRECTORIES": str(tmp_path),
        "TORCHMEND_STATE_DIR": str(tmp_path / "state"),
        "GITHUB_TOKEN": TOKEN,
        "NO_PROXY": "127.0.0.1,localhost",
    }.items():
        monkeypatch.setenv(key, value)
    bare = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(bare))
    proj = tmp_path / "proj"
    proj.mkdir()
    git(proj, "init", "-q")
    (proj / "train.py").write_text(BEFORE)
    (proj / "data.py").write_text("BATCH = 8\n")
    git(proj, "add", ".")
    git(proj, "commit", "-q", "-m", "first")
    git(proj, "remote", "add", "origin", HTTPS_URL)
    git(proj, "config", f"url.{bare}.insteadOf", HTTPS_URL)  # the https URL names the repo; the push lands here
    git(proj, "push", "-q", "-u", "origin", "main")
    gh = FakeGitHub(bare)
    w = World(proj=proj, bare=bare, gh=gh, results=[])
    yield w
    gh.close()
    # The token is nowhere: not in any output, git config, commit, reflog, or what the server was sent.
    for r in w.results:
        assert TOKEN not in r.stdout and TOKEN not in r.stderr
    for place in (proj / ".git" / "config", bare / "config"):
        assert TOKEN not in place.read_text()
    for repo_args in (("-C", str(proj)), ("--git-dir", str(bare))):
        history = subprocess.run(
            ["git", *repo_args, "log", "--all", "-p", "--format=%H %B"], capture_output=True
        ).stdout.decode("utf-8", "replace")  # a latin-1 file's diff is not UTF-8
        assert TOKEN not in history
    assert TOKEN not in git(proj, "reflog", "--all", check=False)
    for req in gh.requests:
        assert TOKEN not in req["raw"] and TOKEN not in req["path"]


def _untouched(w: World, status: str) -> None:
    """The user is on main, with the working tree as it was (train.py as the fix left it)."""
    assert git(w.proj, "symbolic-ref", "--short", "HEAD") == "main"
    assert git(w.proj, "status", "--porcelain") == status
    assert (w.proj / "train.py").read_text() == AFTER


def _report() -> str:
    f = Finding(
        rule="TM101",
        kind="graph_break",
        title="print() inside compiled code",
        file="train.py",
        line=5,
        function="forward",
        path="/x/train.py",
        where="project",
        reason="GB0170 Unsupported builtin print: <script>alert(1)</script> | @octocat `x`",
        count=6,
        severity="fix",
        gb_id="GB0170",
        docs_url="https://meta-pytorch.github.io/compile-graph-break-site/gb/gb0170.html",
    )
    p = SimpleNamespace(
        findings=(f,),
        finding=f,
        rule="TM101",
        safety="unsafe",
        why="gate the print behind torch.compiler.is_compiling()",
        note="the message is no longer printed under compile",
    )
    v = Verification(
        repeat=1,
        counts=[Metric("graph_breaks", Stat(1, 1, 1), Stat(0, 0, 0))],
        times=[Metric("compile_seconds", Stat(2.0, 2.0, 2.0), Stat(1.5, 1.5, 1.5))],
        numerics=None,
        verdict="improved",
    )
    return fix_report([p], v, "torchmend verify train.py --patch fix.patch --backend aot_eager")


# -- unit: remote URLs and Markdown ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url, expected",
    [
        ("https://github.com/acme/trainer.git", ("github.com", "acme", "trainer")),
        ("https://github.com/acme/trainer", ("github.com", "acme", "trainer")),
        ("https://github.com/acme/trainer/", ("github.com", "acme", "trainer")),
        ("https://x-access:secret@GitHub.com:443/acme/my.repo.git", ("github.com", "acme", "my.repo")),
        ("git@github.com:acme/trainer.git", ("github.com", "acme", "trainer")),
        ("git@github.com:acme/trainer", ("github.com", "acme", "trainer")),
        ("github.com:acme/trainer", ("github.com", "acme", "trainer")),
        ("ssh://git@github.com/acme/trainer.git", ("github.com", "acme", "trainer")),
        ("ssh://git@ghe.example.com:2222/acme/trainer", ("ghe.example.com", "acme", "trainer")),
        ("git://github.com/acme/trainer.git", ("github.com", "acme", "trainer")),
        ("/srv/git/trainer.git", None),
        ("file:///srv/git/acme/trainer.git", None),
        ("../trainer", None),
        ("https://github.com/acme", None),
        ("https://github.com/acme/trainer/extra", None),
    ],
)
def test_remote_url_forms(url: str, expected: tuple[str, str, str] | None) -> None:
    assert parse_remote_url(url) == (RepoRef(*expected) if expected else None)


def test_display_url_drops_credentials() -> None:
    assert display_url("https://user:s3cret@github.com/a/b.git") == "https://github.com/a/b.git"
    assert display_url("git@github.com:a/b.git") == "git@github.com:a/b.git"


def test_markdown_escapes_text_from_the_users_code() -> None:
    assert md_text("<img src=x> *bold* [l](u) @octocat") == "&lt;img src=x&gt; \\*bold\\* \\[l\\]\\(u\\) @\u200boctocat"
    assert md_code("a | b", table=True) == "`a \\| b`"
    assert md_code("x `y` z") == "``x `y` z``"
    assert md_fence("```\ninside\n").startswith("````\n")
    assert md_link("docs", "javascript:alert(1)") == "docs"
    report = _report()
    row = next(line for line in report.splitlines() if line.startswith("| **TM101**"))
    # PyTorch's reason stays verbatim inside a code span (no HTML, no mention there); its | cannot split the cell
    assert "| `` GB0170 Unsupported builtin print: <script>alert(1)</script> \\| @octocat `x` `` |" in row
    assert len(re.findall(r"(?<!\\)\|", row)) == 6
    assert "<script>" not in re.sub(r"``.*?``", "", report) and "@octocat" not in re.sub(r"``.*?``", "", report)
    assert "[GB0170](https://meta-pytorch.github.io/compile-graph-break-site/gb/gb0170.html)" in row
    assert "**unsafe**" in report and "[!WARNING]" in report
    assert "| graph breaks | 1 | 0 |" in report and "torchmend verify train.py --patch fix.patch" in report


def test_forge_client_never_follows_a_redirect_with_the_token(tmp_path: Path) -> None:
    here, elsewhere = FakeGitHub(tmp_path), FakeGitHub(tmp_path)
    try:
        here.redirect_to = elsewhere.api_url + f"/repos/{OWNER}/{NAME}/pulls"
        client = GitHub(here.api_url, TOKEN, lambda s: s.replace(TOKEN, "***"))
        with pytest.raises(ForgeError) as caught:
            client.open_pulls(OWNER, NAME, "torchmend/x")
        assert caught.value.status == 301 and "not followed" in str(caught.value)
        assert elsewhere.requests == [] and TOKEN not in str(caught.value) and TOKEN not in repr(client)
    finally:
        here.close()
        elsewhere.close()


def test_preflight_for_fix_pr(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    """What `fix --pr` checks before it scans: changes nothing, asks no server."""
    options = ship.PrOptions(api_url=world.gh.api_url)
    ship.preflight(Root(world.proj), options)
    (world.proj / "data.py").write_text("BATCH = 16\n")
    with pytest.raises(ship.PrError) as caught:
        ship.preflight(Root(world.proj), options)
    assert caught.value.kind == ship.DIRTY and "data.py (M)" in caught.value.message
    git(world.proj, "checkout", "--", "data.py")
    monkeypatch.delenv("GITHUB_TOKEN")
    with pytest.raises(ship.PrError) as caught:
        ship.preflight(Root(world.proj), options)
    assert caught.value.kind == "auth"
    ship.preflight(Root(world.proj), ship.PrOptions(api_url=world.gh.api_url, dry_run=True))
    assert world.gh.requests == []


# -- the command --------------------------------------------------------------------------------------------


@pytest.mark.faults
def test_dry_run_prints_the_plan_and_touches_nothing(world: World) -> None:
    world.record(report=_report())
    refs_before, objects_before = git(world.proj, "for-each-ref"), git(world.proj, "count-objects")
    index_before = (world.proj / ".git" / "index").read_bytes()
    result = world.pr("--dry-run")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    branch = re.search(r"branch:\s+(torchmend/\S+)", out)[1]
    assert re.fullmatch(r"torchmend/tm101-train-[0-9a-f]{7}", branch)
    assert "--- commit message ---" in out and "- TM101 train.py:5: print() inside compiled code" in out
    assert "## torch.compile fixes from torchmend" in out and "```diff" in out
    assert "+    if not torch.compiler.is_compiling():" in out
    assert f"{OWNER}/{NAME} {branch} -> main" in out
    assert git(world.proj, "for-each-ref") == refs_before and world.remote_branches() == []
    assert git(world.proj, "count-objects") == objects_before  # not even a blob was written
    assert (world.proj / ".git" / "index").read_bytes() == index_before
    assert world.gh.requests == []
    _untouched(world, "M train.py")


def test_first_run_opens_one_pr_and_a_second_run_updates_it(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    world.record(report=_report())
    head = git(world.proj, "rev-parse", "HEAD")
    result = world.pr()
    assert result.returncode == 0, result.stderr
    assert "Opened pull request #1" in result.stdout

    # One branch, one commit on HEAD holding only train.py, pushed as is.
    [branch] = world.branches()
    commit = git(world.proj, "rev-parse", branch)
    assert git(world.proj, "rev-parse", f"{branch}^") == head
    assert git(world.proj, "diff", "--name-only", head, branch) == "train.py"
    assert git(world.proj, "show", f"{branch}:train.py") == AFTER.rstrip("\n")
    message = git(world.proj, "log", "-1", "--format=%B", branch)
    assert message.startswith("torchmend: fix TM101 in train.py") and "- TM101 train.py:5" in message
    assert git(world.bare, "log", "--format=%H", branch) == git(world.proj, "log", "--format=%H", branch)
    assert git(world.bare, "rev-parse", branch) == commit
    assert git(world.bare, "rev-parse", "main") == head  # main on the remote is untouched
    _untouched(world, "M train.py")

    # One PR: head/base/body as sent; the list call came first and asked for owner:branch, open.
    assert world.gh.calls() == [f"GET /api/v3/repos/{OWNER}/{NAME}/pulls", f"POST /api/v3/repos/{OWNER}/{NAME}/pulls"]
    assert world.gh.requests[0]["query"]["head"] == [f"{OWNER}:{branch}"]
    assert world.gh.requests[0]["query"]["state"] == ["open"]
    sent = world.gh.requests[1]["json"]
    assert (sent["head"], sent["base"]) == (branch, "main")
    body = sent["body"]
    for part in (
        "### Findings fixed",
        "`train.py:5`",
        "gb0170.html",
        "### Changes",
        "#### `train.py`",
        "```diff",
        "+    if not torch.compiler.is_compiling():",
        "### Unsafe changes",
        "### Verification",
        "| graph breaks | 1 | 0 |",
        "Reproduce:",
        "torchmend verify train.py --patch fix.patch",
    ):
        assert part in body, part
    assert body.index("### Findings fixed") < body.index("```diff") < body.index("### Verification")
    assert "<script>" not in re.sub(r"``.*?``", "", body)
    assert len(world.gh.pulls) == 1

    # Again (token from another variable this time): the same branch and commit, the same PR, updated.
    monkeypatch.delenv("GITHUB_TOKEN")
    monkeypatch.setenv("TM_TEST_TOKEN", TOKEN)
    again = world.pr("--token-env", "TM_TEST_TOKEN", "--title", "torch.compile fixes")
    assert again.returncode == 0, again.stderr
    assert "Updated pull request #1" in again.stdout and "reusing it" in again.stdout
    assert world.branches() == [branch] and git(world.proj, "rev-parse", branch) == commit
    assert world.gh.calls()[2:] == [
        f"GET /api/v3/repos/{OWNER}/{NAME}/pulls",
        f"PATCH /api/v3/repos/{OWNER}/{NAME}/pulls/1",
    ]
    assert len(world.gh.pulls) == 1 and world.gh.pulls[1]["title"] == "torch.compile fixes"
    assert world.gh.pulls[1]["body"] == body
    _untouched(world, "M train.py")


def test_ssh_remote_and_a_record_without_report(world: World) -> None:
    ssh = f"git@github.com:{OWNER}/{NAME}"
    git(world.proj, "remote", "set-url", "origin", ssh)
    git(world.proj, "config", f"url.{world.bare}.insteadOf", ssh)
    world.record()  # as saved before records had a report
    result = world.pr("--draft")
    assert result.returncode == 0, result.stderr
    sent = world.gh.requests[-1]["json"]
    assert sent["draft"] is True and "saved without a report" in sent["body"] and "```diff" in sent["body"]
    assert world.remote_branches() == world.branches()


@pytest.mark.parametrize("case", ["other_file", "edited_after_fix", "uncommitted_before_fix"])
def test_refuses_a_dirty_tree_and_does_nothing(world: World, case: str) -> None:
    if case == "other_file":
        world.record()
        odd = world.proj / "[red]notes.txt"
        odd.write_text("x\n")
        git(world.proj, "add", odd.name)
        (world.proj / "data.py").write_text("BATCH = 16\n")
    elif case == "edited_after_fix":
        world.record()
        (world.proj / "train.py").write_text(AFTER + "# mine\n")
    else:
        world.record({"train.py": (BEFORE + "# mine\n", AFTER + "# mine\n")})
    result = world.pr()
    assert result.returncode == 15, result.stderr
    expected = {
        "other_file": "[red]notes.txt (A), data.py (M)",
        "edited_after_fix": "train.py was edited after the fix",
        "uncommitted_before_fix": "train.py had changes of yours that were not committed",
    }[case]
    assert expected in result.stderr.replace("\n", " ")
    assert world.branches() == [] and world.remote_branches() == [] and world.gh.requests == []


def test_not_a_git_repository(world: World, tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "train.py").write_text(BEFORE)
    world.record(project=plain)
    result = world.pr("--project", str(plain))
    assert result.returncode == 14 and "is not in a git repository" in result.stderr


def test_nothing_to_ship(world: World) -> None:
    result = world.pr()
    assert result.returncode == 13 and "run `torchmend fix` first" in result.stderr
    world.record()
    git(world.proj, "commit", "-q", "-am", "the fix, committed by hand")
    result = world.pr()
    assert result.returncode == 13 and "already committed" in result.stderr


def test_no_remote(world: World) -> None:
    world.record()
    result = world.pr("--remote", "upstream")
    assert result.returncode == 16 and "no remote named 'upstream'" in result.stderr and "origin" in result.stderr
    git(world.proj, "remote", "set-url", "origin", str(world.bare))  # a path names no GitHub repository
    result = world.pr()
    assert result.returncode == 16 and "--repo OWNER/NAME" in result.stderr
    assert world.pr("--repo", f"{OWNER}/{NAME}", "--dry-run").returncode == 0
    git(world.proj, "remote", "remove", "origin")
    result = world.pr()
    assert result.returncode == 16 and "has no remote" in result.stderr
    assert world.branches() == [] and world.gh.requests == []


@pytest.mark.faults
def test_push_rejected_keeps_the_local_branch_and_a_retry_works(world: World) -> None:
    world.record(report=_report())
    branch = re.search(r"branch:\s+(torchmend/\S+)", world.pr("--dry-run").stdout)[1]
    # Someone else's commit already sits on the remote under that name: ours cannot fast-forward it.
    other = git(world.proj, "commit-tree", "HEAD^{tree}", "-p", "HEAD", "-m", "someone else")
    git(world.proj, "push", "-q", "origin", f"{other}:refs/heads/{branch}")
    result = world.pr()
    assert result.returncode == 17, result.stderr
    err = result.stderr.replace("\n", " ")
    assert "rejected" in err and "never force-pushes" in err and f"The local branch {branch}" in err
    assert f"git branch -D {branch}" in err and "Run `torchmend pr` again" in err
    assert git(world.bare, "rev-parse", branch) == other  # not forced
    assert world.branches() == [branch]
    assert [r["method"] for r in world.gh.requests] == ["GET"]
    _untouched(world, "M train.py")
    git(world.proj, "push", "-q", "origin", "--delete", branch)
    retry = world.pr()
    assert retry.returncode == 0, retry.stderr
    assert "reusing it" in retry.stdout and git(world.bare, "rev-parse", branch) == git(world.proj, "rev-parse", branch)
    assert len(world.gh.pulls) == 1


@pytest.mark.faults
@pytest.mark.parametrize(
    "case, code, says",
    [
        ("401", 18, "refused the token in $GITHUB_TOKEN (401)"),
        ("403", 18, "may not do this on acme/trainer"),
        ("404", 19, "was not found (404)"),
        ("unreachable", 21, "could not be reached"),
    ],
)
def test_api_errors_before_anything_is_created(
    world: World, monkeypatch: pytest.MonkeyPatch, case: str, code: int, says: str
) -> None:
    world.record()
    args: tuple[str, ...] = ()
    if case == "401":
        monkeypatch.setenv("GITHUB_TOKEN", "ghp_wrong_token_0000")
    elif case == "403":
        world.gh.fail["GET"] = (403, "Resource not accessible by personal access token")
    elif case == "404":
        args = ("--repo", f"{OWNER}/missing")
    else:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        args = ("--api-url", f"http://127.0.0.1:{port}/api/v3")
    result = world.pr(*args, api=case != "unreachable")
    assert result.returncode == code, result.stderr
    err = result.stderr.replace("\n", " ")
    assert says in err and "Nothing was created or pushed." in err
    assert world.branches() == [] and world.remote_branches() == []
    _untouched(world, "M train.py")


@pytest.mark.faults
def test_api_422_after_the_push_says_what_is_left(world: World) -> None:
    world.record()
    result = world.pr("--base", "develop")  # no such branch on the remote: GitHub answers 422
    assert result.returncode == 20, result.stderr
    err = result.stderr.replace("\n", " ")
    assert "refused the request as invalid (422" in err and "field=base" in err
    [branch] = world.branches()
    assert f"The branch {branch}" in err and "is pushed to origin" in err and "Run `torchmend pr` again" in err
    assert f"https://github.com/{OWNER}/{NAME}/compare/develop...{branch}" in err
    assert world.remote_branches() == [branch] and world.gh.pulls == {}
    _untouched(world, "M train.py")


def test_missing_token(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    world.record()
    monkeypatch.delenv("GITHUB_TOKEN")
    result = world.pr()
    assert result.returncode == 18 and "$GITHUB_TOKEN is not set" in result.stderr
    result = world.pr("--token-env", "TM_TEST_TOKEN")
    assert result.returncode == 18 and "$TM_TEST_TOKEN is not set" in result.stderr
    assert world.branches() == [] and world.gh.requests == []


def test_plain_http_api_is_refused_off_localhost(world: World) -> None:
    world.record()
    result = world.pr("--api-url", "http://ghe.example.com/api/v3", api=False)
    assert result.returncode == 2 and "must use https" in result.stderr


def test_real_fix_then_pr(world: World) -> None:
    """A real `torchmend fix` run (its record has no report yet) shipped by `torchmend pr`."""
    script = world.proj / "train.py"
    script.write_text(
        (Path(__file__).resolve().parents[2] / "fixtures" / "scan" / "print_in_forward" / "train.py").read_text()
    )
    git(world.proj, "commit", "-q", "-am", "a trainer")
    fixed = torchmend(
        "fix",
        "train.py",
        "--yes",
        "--unsafe",
        "--no-verify",
        "--backend",
        "aot_eager",
        "--steps",
        "3",
        cwd=world.proj,
        timeout=300,
    )
    world.results.append(fixed)
    assert fixed.returncode == 0, fixed.stderr
    result = world.pr()
    assert result.returncode == 0, result.stderr
    [branch] = world.branches()
    assert git(world.proj, "diff", "--name-only", "HEAD", branch) == "train.py"
    body = world.gh.pulls[1]["body"]
    assert "TM101" in body and "reorderable_logging_functions.add(print)" in body and "```diff" in body
    assert git(world.proj, "status", "--porcelain") == "M train.py"


def test_fix_with_pr_ships_the_verification(world: World) -> None:
    """`torchmend fix --pr` in one step: verified changes written, then one PR whose body has the findings,
    the diff and the before/after table."""
    script = world.proj / "train.py"
    script.write_text(
        (Path(__file__).resolve().parents[2] / "fixtures" / "scan" / "print_in_forward" / "train.py").read_text()
    )
    git(world.proj, "commit", "-q", "-am", "a trainer")
    fixed = torchmend(
        "fix",
        "train.py",
        "--yes",
        "--unsafe",
        "--backend",
        "aot_eager",
        "--verify-backend",
        "aot_eager",
        "--pr",
        "--api-url",
        world.gh.api_url,
        cwd=world.proj,
        timeout=300,
    )
    world.results.append(fixed)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    [branch] = world.branches()
    assert world.remote_branches() == [branch]
    assert git(world.proj, "diff", "--name-only", "HEAD", branch) == "train.py"
    [number] = world.gh.pulls
    body = world.gh.pulls[number]["body"]
    assert "TM101" in body and "```diff" in body
    assert "graph breaks" in body and "numerics match" in body and "torchmend verify" in body
    assert git(world.proj, "symbolic-ref", "--short", "HEAD") == "main"


def test_fix_with_pr_checks_before_running(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GITHUB_TOKEN")
    result = torchmend("fix", "train.py", "--yes", "--pr", "--api-url", world.gh.api_url, cwd=world.proj)
    world.results.append(result)
    assert result.returncode == 18, result.stderr
    assert "nothing was scanned or written" in " ".join(result.stderr.split())
    assert (world.proj / "train.py").read_text() == BEFORE


# -- faults (pytest -m faults): slow and malformed answers, a detached HEAD, fix --pr --repo ------------------


@pytest.mark.faults
def test_a_slow_api_before_the_push_leaves_nothing(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    world.record()
    monkeypatch.setenv("TORCHMEND_API_TIMEOUT", "1")
    world.gh.slow["GET"] = 3
    result = world.pr()
    assert result.returncode == 21, result.stderr
    err = " ".join(result.stderr.split())
    assert "got no answer within 1 s (timed out)" in err and "Nothing was created or pushed." in err, err
    assert "Traceback" not in err
    assert world.branches() == [] and world.remote_branches() == [] and world.gh.pulls == {}
    _untouched(world, "M train.py")


@pytest.mark.faults
def test_a_slow_api_after_the_push_says_what_is_left_and_a_retry_updates(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    world.record()
    monkeypatch.setenv("TORCHMEND_API_TIMEOUT", "1")
    world.gh.slow["POST"] = 3  # GitHub makes the pull request, but answers too late
    result = world.pr()
    assert result.returncode == 21, result.stderr
    err = " ".join(result.stderr.split())
    [branch] = world.branches()
    assert "timed out" in err and f"The branch {branch}" in err and "is pushed to origin" in err, err
    assert "Run `torchmend pr` again" in err and "Traceback" not in err
    assert world.remote_branches() == [branch]
    _untouched(world, "M train.py")
    time.sleep(2.5)  # the late answer is done with
    world.gh.slow.clear()
    retry = world.pr()
    assert retry.returncode == 0, retry.stderr
    assert "Updated pull request #1" in retry.stdout and len(world.gh.pulls) == 1  # found, not opened twice


@pytest.mark.faults
def test_an_answer_that_is_not_json(world: World) -> None:
    world.record()
    world.gh.garbage["GET"] = b"<html><body>Sign in to the proxy</body></html>"
    result = world.pr()
    assert result.returncode == 21, result.stderr
    err = " ".join(result.stderr.split())
    assert "answered 200 with something that is not JSON: '<html><body>Sign in to the proxy" in err, err
    assert "a proxy or a login page in the way?" in err and "Nothing was created or pushed." in err
    assert world.branches() == [] and world.remote_branches() == []
    world.gh.garbage = {"POST": b"{not json"}  # after the push: the pushed branch is named, the rest to do said
    result = world.pr()
    assert result.returncode == 21, result.stderr
    err = " ".join(result.stderr.split())
    [branch] = world.branches()
    assert "not JSON" in err and f"The branch {branch}" in err and "is pushed to origin" in err, err
    assert "Traceback" not in err
    _untouched(world, "M train.py")


@pytest.mark.faults
def test_a_detached_head_needs_base(world: World) -> None:
    world.record()
    head = git(world.proj, "rev-parse", "HEAD")
    git(world.proj, "checkout", "-q", "--detach")
    result = world.pr()
    assert result.returncode == 2, result.stderr
    assert "HEAD is detached" in result.stderr and "--base" in result.stderr
    assert world.branches() == [] and world.gh.requests == []
    result = world.pr("--base", "main")  # named: it ships, and HEAD stays detached where it was
    assert result.returncode == 0, result.stderr
    assert world.gh.pulls[1]["base"]["ref"] == "main"
    assert (
        git(world.proj, "symbolic-ref", "-q", "HEAD", check=False) == ""
        and git(world.proj, "rev-parse", "HEAD") == head
    )
    assert git(world.proj, "status", "--porcelain") == "M train.py"


@pytest.mark.faults
def test_fix_pr_takes_repo_like_pr(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    git(world.proj, "remote", "set-url", "origin", str(world.bare))  # a URL that names no GitHub repository
    monkeypatch.delenv("GITHUB_TOKEN")  # so that passing the repository checks ends at the token, before any run
    runs = {}
    for name, extra in (("none", ()), ("bad", ("--repo", "not-a-repo")), ("named", ("--repo", f"{OWNER}/{NAME}"))):
        runs[name] = torchmend(
            "fix", "train.py", "--yes", "--pr", "--api-url", world.gh.api_url, *extra, cwd=world.proj
        )
        world.results.append(runs[name])
    assert runs["none"].returncode == 16 and "Name it with --repo OWNER/NAME" in " ".join(runs["none"].stderr.split())
    assert runs["bad"].returncode == 2 and "--repo must be OWNER/NAME, not 'not-a-repo'" in runs["bad"].stderr
    named = " ".join(runs["named"].stderr.split())  # the repository named: the next check speaks
    assert runs["named"].returncode == 18 and "$GITHUB_TOKEN is not set" in named, named
    assert "nothing was scanned or written" in named
    assert (world.proj / "train.py").read_text() == BEFORE and world.gh.requests == []


@pytest.mark.faults
@pytest.mark.parametrize("encoding", ["latin-1", "bom"])
def test_a_latin1_or_bom_file_ships_byte_for_byte(world: World, encoding: str) -> None:
    # As `fix` writes them (store.write_fix keeps the coding line's encoding, or the BOM): pr must read the
    # file as bytes in that encoding, not as UTF-8 (which took it for "edited after the fix").
    if encoding == "bom":
        head, before_bytes = "", codecs.BOM_UTF8 + BEFORE.replace("mean", "moyenne \u00e9").encode()
    else:
        head = "# -*- coding: latin-1 -*-\n"
        before_bytes = (head + BEFORE.replace("mean", "moyenne \u00e9")).encode("latin-1")
    (world.proj / "train.py").write_bytes(before_bytes)
    git(world.proj, "commit", "-q", "-am", "an accent")
    before = head + BEFORE.replace("mean", "moyenne \u00e9")
    after = head + AFTER.replace("mean", "moyenne \u00e9")
    write_fix({str(world.proj / "train.py"): (before, after)}, world.proj, "(patch)", SUMMARY)
    on_disk = (world.proj / "train.py").read_bytes()
    assert on_disk != after.encode() and b"is_compiling" in on_disk  # not UTF-8 without BOM: the case at hand
    result = world.pr()
    assert result.returncode == 0, result.stderr
    [branch] = world.branches()
    shipped = subprocess.run(
        ["git", "show", f"{branch}:train.py"], cwd=world.proj, capture_output=True, check=True
    ).stdout
    assert shipped == on_disk  # the commit holds the bytes the fix wrote
    assert git(world.proj, "diff", "--stat", "HEAD", branch) != "" and world.gh.pulls[1]["head"]["ref"] == branch
