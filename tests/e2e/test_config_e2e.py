"""[tool.torchmend] and suppression comments through a real scan: the backend and an ignore come from the file (the command line wins), a
configured ignore and a comment leave findings out, and a comment that suppressed nothing is a TM903 hint."""

from __future__ import annotations

from pathlib import Path

from conftest import SCAN_FIXTURES, torchmend


def test_scan_reads_pyproject_and_honours_suppressions(tmp_path: Path):
    (tmp_path / ".git").mkdir()  # the work tree's top: the walk for pyproject.toml stops here
    source = (SCAN_FIXTURES / "several" / "train.py").read_text()
    source = source.replace(
        'print("activation norm", h.norm())', 'print("activation norm", h.norm())  # torchmend: ignore[TM101]'
    ).replace("h = torch.relu(self.inp(x))", "h = torch.relu(self.inp(x))  # torchmend: ignore[TM103]")
    (tmp_path / "train.py").write_text(source)
    (tmp_path / "pyproject.toml").write_text(
        '[tool.torchmend]\nsteps = 50\nbackend = "aot_eager"\nignore = ["TM202"]\n'
    )

    # the backend and the ignore come from the file; the command line's --steps wins over the file's
    r = torchmend("scan", "train.py", "--format", "json", "--steps", "4", cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.stderr
    report = r.json
    assert report["summary"]["steps"] == 4 and report["summary"]["ended_by"] == "steps"
    assert report["backend"] == "aot_eager" and report["budget"]["steps"] == 4
    rules = {(f["rule"], f["line"]) for f in report["findings"]}
    assert ("TM201", 20) in rules and ("TM103", 22) in rules  # the TM103 comment is on line 21, not 22
    assert not any(rule in ("TM101", "TM202") for rule, _ in rules)  # the comment; the configured ignore
    (unused,) = [f for f in report["findings"] if f["rule"] == "TM903"]
    assert unused["line"] == 21 and unused["severity"] == "info" and "A hint only" in unused["reason"]
