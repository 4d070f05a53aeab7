"""`torchmend fix` as a user drives it: real keystrokes in a pseudo-terminal (pexpect), real child runs
(aot_eager), real files written in scratch projects, and `git apply` on what --diff prints."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pexpect
import pytest
from conftest import SCAN_FIXTURES, torchmend

# Three changes in one file, from the print and logging codemods: the order they are asked in is the
# order of the file. The prints pass a keyword, which torch does not reorder: each is gated, a change of its own.
THREE_CHANGES = """import logging

import torch
from torch import nn

log = logging.getLogger("trainer")


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 1)

    def forward(self, x):
        print("in", x.shape[0], flush=True)
        h = self.fc(x)
        log.info("mid %s", h.shape[0])
        print("out", h.mean(), flush=True)
        return h


def main():
    torch.manual_seed(0)
    model = Net()
    compiled = torch.compile(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(6):
        loss = compiled(torch.randn(4, 8)).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()


if __name__ == "__main__":
    main()
"""
PROMPT = re.compile(r"Apply this change \[y,n,a,d,q,\?\]\?(?:\x1b\[[0-9;]*m)* ")  # a real TERM gets bold


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TORCHMEND_STATE_DIR", str(tmp_path / "state"))
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "train.py").write_text(THREE_CHANGES)
    return proj


def _spawn(cwd: Path, *args: str, term: str = "dumb") -> pexpect.spawn:
    """`torchmend fix` in a pseudo-terminal: TERM=dumb gets line input (a key, then Enter), any other TERM
    single keys (no Enter)."""
    env = dict(os.environ, NO_COLOR="1", COLUMNS="160", TERM=term)
    # A test run started in the background by a non-interactive shell inherits SIGINT ignored, and Python then
    # installs no KeyboardInterrupt handler: restore the default so Ctrl-C reaches the child as at a terminal.
    child = pexpect.spawn(
        sys.executable,
        ["-m", "torchmend", "fix", *args, "--verify-backend", "aot_eager"],
        cwd=str(cwd),
        env=env,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        encoding="utf-8",
        timeout=150,
        dimensions=(50, 160),
    )
    return child


def _ended(child: pexpect.spawn) -> None:
    """Wait for the end of `fix`'s output; past pexpect's timeout, fail with what was still running (fix, and any
    process of its tree, with its state and what it waits in), for a hang that is rare to be readable when it comes."""
    try:
        child.expect(pexpect.EOF)
    except pexpect.TIMEOUT:
        tree = subprocess.run(
            ["ps", "-eo", "pid,ppid,pgid,sid,stat,wchan:24,etimes,args"], capture_output=True, text=True
        ).stdout
        mine = [line for line in tree.splitlines()[1:] if str(child.pid) in line.split()[:4]]
        pytest.fail(f"fix did not end; its output:\n{child.before}\nits processes:\n" + "\n".join(mine))


def _answer(child: pexpect.spawn, keys: list[str]) -> list[str]:
    """Answer each prompt with the next key; return the rule shown before each prompt."""
    shown = []
    for key in keys:
        child.expect(PROMPT)
        shown.append(re.findall(r"\b(TM\d{3})\b", child.before)[0])
        child.sendline(key)
    return shown


def test_accept_reject_quit_in_a_terminal(project: Path) -> None:
    child = _spawn(project, "train.py", "--backend", "aot_eager", "--no-verify")  # the prompts, not verify, are tested
    shown = _answer(child, ["y", "n", "q"])
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0, child.before
    assert shown == ["TM101", "TM102", "TM101"]
    text = (project / "train.py").read_text()
    # the first print is gated, the logger call (rejected) and the last print (after q) are untouched
    assert 'if not torch.compiler.is_compiling():\n            print("in", x.shape[0], flush=True)' in text
    assert '\n        log.info("mid %s", h.shape[0])' in text
    assert '\n        print("out", h.mean(), flush=True)' in text
    assert text.count("is_compiling") == 1


def test_help_then_apply_rest_of_file(project: Path) -> None:
    child = _spawn(project, "train.py", "--backend", "aot_eager", "--no-verify")  # the prompts, not verify, are tested
    child.expect(PROMPT)
    child.sendline("?")
    child.expect("apply this change and every later one in this file")
    child.expect(PROMPT)  # asked again after the help
    child.sendline("a")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    assert (project / "train.py").read_text().count("is_compiling") == 3
    assert "Wrote 1 file (3 changes)" in child.before


def test_ctrl_c_at_a_prompt_writes_nothing(project: Path) -> None:
    original = (project / "train.py").read_bytes()
    child = _spawn(project, "train.py", "--backend", "aot_eager")
    _answer(child, ["y"])
    child.expect(PROMPT)
    child.sendintr()
    _ended(child)
    child.close()
    assert child.exitstatus == 130
    assert "nothing was written" in child.before
    assert (project / "train.py").read_bytes() == original


def test_single_keys_without_enter_on_a_terminal(project: Path) -> None:
    child = _spawn(project, "train.py", "--backend", "aot_eager", "--no-verify", term="xterm-256color")
    child.expect(PROMPT)
    child.send("y\r")  # the key is taken at once; the Enter typed out of habit is not taken as the next answer
    child.expect(PROMPT, timeout=30)
    assert re.search(r"\by\r?\n", child.before), child.before  # the key is echoed, as a typed line would be
    child.send("x")  # not a key of the prompt: the help, and the same question again
    child.expect("apply this change and every later one in this file", timeout=30)
    child.expect(PROMPT, timeout=30)
    assert "(2/3)" in child.after + child.before
    child.send("n")
    child.expect(PROMPT, timeout=30)
    child.send("q")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0, child.before
    text = (project / "train.py").read_text()
    assert text.count("is_compiling") == 1  # y, n, q: only the first change
    assert 'if not torch.compiler.is_compiling():\n            print("in", x.shape[0], flush=True)' in text


def test_ctrl_c_at_a_single_key_prompt_writes_nothing(project: Path) -> None:
    original = (project / "train.py").read_bytes()
    child = _spawn(project, "train.py", "--backend", "aot_eager", term="xterm-256color")
    child.expect(PROMPT)
    child.send("y")
    child.expect(PROMPT, timeout=30)
    child.sendintr()  # the terminal keeps its signals in single-key mode: Ctrl-C interrupts as in line mode
    _ended(child)
    child.close()
    assert child.exitstatus == 130, child.before
    assert "nothing was written" in child.before
    assert (project / "train.py").read_bytes() == original


def test_file_edited_between_scan_and_write(project: Path) -> None:
    child = _spawn(
        project, "train.py", "--backend", "aot_eager", "--no-verify"
    )  # the write check, not verify, is tested
    child.expect(PROMPT)
    edited = THREE_CHANGES.replace("range(6)", "range(7)")
    (project / "train.py").write_text(edited)  # the user saves the file while torchmend waits
    child.sendline("a")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 9
    assert "changed since it was scanned" in child.before
    assert (project / "train.py").read_text() == edited


def test_read_only_file_is_refused_whole(project: Path) -> None:
    target = project / "train.py"
    target.chmod(0o444)
    result = torchmend("fix", str(target), "--backend", "aot_eager", "--yes", "--unsafe", "--no-verify", cwd=project)
    assert result.returncode == 9, result.stderr
    assert "read-only" in result.stderr
    assert target.read_text() == THREE_CHANGES
    assert not list(project.glob(".*torchmend*"))  # no temporary file left behind


def test_yes_applies_safe_only_and_undo_puts_it_back(project: Path) -> None:
    target = project / "train.py"
    result = torchmend("fix", str(target), "--backend", "aot_eager", "--yes", cwd=project)
    assert result.returncode == 0, result.stderr
    assert target.read_text() == THREE_CHANGES  # gating prints and logs is unsafe: not applied by --yes alone
    assert "No change accepted" in result.stdout

    mode = target.stat().st_mode
    # --backend verifies too (no --verify-backend): the report says so
    result = torchmend("fix", str(target), "--backend", "aot_eager", "--yes", "--unsafe", cwd=project)
    assert result.returncode == 0, result.stderr
    assert "judging on the aot_eager backend" in result.stdout
    assert target.read_text().count("is_compiling") == 3
    # what was written is shown, change by change, each unsafe one marked, with its diff unwrapped
    assert result.stdout.count("UNSAFE") == 3 and result.stdout.count("+++ b/train.py") == 3
    assert (
        '+        if not torch.compiler.is_compiling():\n+            print("in", x.shape[0], flush=True)'
        in result.stdout
    )
    assert target.stat().st_mode == mode
    assert re.search(r"graph breaks\s+│\s*3\s+│\s*0", result.stdout), result.stdout  # the before/after table
    assert "numerics match (6 losses" in result.stdout
    assert result.stdout.count("✓ TM10") == 3  # each change removed what it targeted

    undo = torchmend("undo", cwd=project)
    assert undo.returncode == 0, undo.stderr
    assert target.read_text() == THREE_CHANGES
    again = torchmend("undo", cwd=project)
    assert again.returncode == 11


def test_undo_refuses_after_an_edit(project: Path) -> None:
    target = project / "train.py"
    fixed = torchmend(
        "fix", str(target), "--backend", "aot_eager", "--yes", "--unsafe", "--no-verify", "-q", cwd=project
    )
    assert fixed.returncode == 0, fixed.stderr
    assert fixed.stdout.count("UNSAFE") == 3 and "+++" not in fixed.stdout  # --quiet: a line per change, no diff
    target.write_text(target.read_text() + "# my edit\n")
    undo = torchmend("undo", cwd=project)
    assert undo.returncode == 9
    assert "edited after the fix" in undo.stderr and ".patch" in undo.stderr
    assert target.read_text().endswith("# my edit\n")


def test_diff_applies_with_git_apply(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(SCAN_FIXTURES / "several", repo)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q"], cwd=repo, check=True)
    subprocess.run([*git, "add", "."], cwd=repo, check=True)
    subprocess.run([*git, "commit", "-qm", "start"], cwd=repo, check=True)
    result = torchmend("fix", "train.py", "--backend", "aot_eager", "--diff", "--unsafe", cwd=repo)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("--- a/train.py\n+++ b/train.py\n")
    assert (
        subprocess.run(["git", "status", "--porcelain"], cwd=repo, capture_output=True, text=True).stdout == ""
    )  # --diff writes nothing
    (tmp_path / "p.patch").write_text(result.stdout)
    subprocess.run(["git", "apply", str(tmp_path / "p.patch")], cwd=repo, check=True)
    assert "reorderable_logging_functions.add(print)" in (repo / "train.py").read_text()


def test_check_exit_codes() -> None:
    script = SCAN_FIXTURES / "print_in_forward" / "train.py"
    original = script.read_bytes()
    dirty = torchmend("fix", str(script), "--backend", "aot_eager", "--check")
    assert dirty.returncode == 6, dirty.stderr
    assert "TM101" in dirty.stdout
    assert script.read_bytes() == original  # --check writes nothing
    clean = torchmend("fix", str(SCAN_FIXTURES / "clean" / "train.py"), "--backend", "aot_eager", "--check")
    assert clean.returncode == 0, clean.stderr


def test_no_terminal_and_no_mode_says_so(project: Path) -> None:
    result = torchmend("fix", "train.py", cwd=project)  # stdin is not a terminal here
    assert result.returncode == 2
    assert "not a terminal" in result.stderr and "--yes" in result.stderr
    assert (project / "train.py").read_text() == THREE_CHANGES


def test_modes_are_exclusive(project: Path) -> None:
    result = torchmend("fix", "train.py", "--yes", "--diff", cwd=project)
    assert result.returncode == 2
    assert "one of --yes, --diff and --check" in result.stderr
