"""The project and the resolved settings (issue 29): Config.resolve merges the command line over [tool.torchmend]
over the defaults once, into frozen Settings; Project finds the root and the configuration, says which files may be
edited and checks the journal, raising what the CLI maps to the documented exit codes; lint's CLI and the API
(lint_paths + pipeline.select) report the same. In-process, no training run."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from torchmend import pipeline
from torchmend.cli.exitcodes import ExitCode
from torchmend.config import Config, Overrides, load_config
from torchmend.project import (
    ConfigInvalid,
    JournalBlocked,
    NotPython,
    OutsideProject,
    Project,
    Unreadable,
    root_of,
)
from torchmend.settings import Settings
from torchmend.values import Root, Selection, Tolerance

TABLE = """
[tool.torchmend]
select = ["TM1", "TM2"]
ignore = ["TM104"]
steps = 20
backend = "aot_eager"
verify-backend = "inductor"
rtol = 1e-3
unsafe-fixes = true
project-root = "src"
base = "main"
exclude = ["data/"]

[tool.torchmend.per-file-ignores]
"tests/*.py" = ["TM101"]
"""


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    (tmp_path / "repo" / ".git").mkdir(parents=True)
    (tmp_path / "repo" / "src").mkdir()
    return tmp_path / "repo"


def test_resolve_puts_the_command_line_over_the_file_over_the_defaults(repo: Path) -> None:
    (repo / "pyproject.toml").write_text(textwrap.dedent(TABLE))
    s = load_config(repo).resolve(Overrides(steps=5, ignore=["TM2"], atol=0.5, remote=None))
    assert s.selection.select == ("TM1", "TM2") and s.selection.ignore == ("TM2",)  # the command line's ignore
    assert (s.steps, s.backend, s.verify_backend, s.timeout) == (5, "aot_eager", "inductor", None)
    assert s.tolerance == Tolerance(1e-3, 0.5) and s.unsafe and not s.random_stream
    assert (s.project_root, s.remote, s.base) == (repo / "src", "origin", "main")  # None: not given, the default
    assert s.selection.ignored_codes(repo / "tests" / "test_a.py") == ["TM101"]
    assert not s.selection.selects("TM101", repo / "tests" / "test_a.py") and s.selection.selects(
        "TM101", repo / "a.py"
    )
    assert s.excluded(repo / "data" / "x.py") and not s.excluded(repo / "x.py")
    # no file: the defaults alone, which Settings() is too
    assert Config.empty().resolve() == Settings() == Settings(tolerance=Tolerance(1e-4, 1e-6))
    assert Selection().selects("TM903") and not Selection(select=("TM1",)).selects("TM903")
    assert Selection(ignore=("TM1",)).ignoring("TM2") == Selection(ignore=("TM1", "TM2"))


def test_the_project_of_a_script(repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    script = repo / "src" / "train.py"
    script.write_text("x = 1\n")
    assert Project.for_script(script).root == repo.resolve()  # the git work tree
    assert Project.for_script(script, root=repo / "src").root == (repo / "src").resolve()  # --project
    (repo / "pyproject.toml").write_text('[tool.torchmend]\nproject-root = "src"\n')
    assert Project.for_script(script).root == (repo / "src").resolve()  # project-root
    monkeypatch.chdir(repo / "src")
    assert Project.for_script(None).root == (repo / "src").resolve()  # a trace: the current directory's
    assert root_of(tmp_path) == tmp_path.resolve()  # no work tree: the folder itself
    (repo / "pyproject.toml").write_text("[tool.torchmend]\nstep = 3\n")
    with pytest.raises(ConfigInvalid, match="did you mean `steps`"):
        Project.for_script(script)
    assert Project.at(repo, config=False).config.path is None  # undo reads none: a bad one never blocks it


def test_which_files_may_be_edited(repo: Path, tmp_path: Path) -> None:
    project = Project(repo.resolve())
    ok = repo / "ok.py"
    ok.write_text("x = 1\n")
    project.check_editable(ok)
    (repo / "bad.py").write_text("x = (\n")
    with pytest.raises(NotPython, match="Python rejects the script"):
        project.check_editable(repo / "bad.py")
    with pytest.raises(Unreadable, match="cannot read"):
        project.check_editable(repo / "gone.py")
    (tmp_path / "elsewhere.py").write_text("y = 2\n")
    (repo / "linked.py").symlink_to(tmp_path / "elsewhere.py")
    with pytest.raises(OutsideProject, match="outside the project"):
        project.check_editable(repo / "linked.py")
    paths = [str(repo / "linked.py"), str(ok), str(tmp_path / "elsewhere.py")]  # the last: not the project's
    assert project.files_outside(paths) == [(str(repo / "linked.py"), (tmp_path / "elsewhere.py").resolve())]
    assert project.display(ok) == "ok.py" and project.display("/usr/lib/x.py") == "/usr/lib/x.py"


def test_the_journal_needs_a_state_folder_that_holds_records(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TORCHMEND_STATE_DIR", str(tmp_path / "state"))
    project = Project(repo.resolve())
    assert project.check_journal(writes=True) == [] and project.check_journal(writes=False) == []
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("TORCHMEND_STATE_DIR", str(tmp_path / "file"))  # a file where the folder should be
    with pytest.raises(JournalBlocked, match="nothing was run or written"):
        project.check_journal(writes=True)
    assert project.check_journal(writes=False) == []  # --diff and --check write nothing: no folder needed


def test_the_cli_maps_each_project_error_to_its_exit_code(repo: Path) -> None:
    import typer

    from torchmend.cli.context import project_errors

    for error, code in [
        (ConfigInvalid("x"), ExitCode.CONFIG_INVALID),
        (NotPython("x"), ExitCode.SCRIPT_FAILED),
        (Unreadable("x"), ExitCode.SCRIPT_NOT_FOUND),
        (OutsideProject("x"), ExitCode.WRITE_REFUSED),
        (JournalBlocked("x"), ExitCode.WRITE_REFUSED),
        (pipeline.ProjectBusy("x"), ExitCode.PROJECT_BUSY),
    ]:
        with pytest.raises(typer.Exit) as e, project_errors():
            raise error
        assert e.value.exit_code == code, error


def test_lint_on_the_command_line_and_through_the_api_report_the_same(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """[tool.torchmend] ignore and a suppression comment: lint's JSON and lint_paths + pipeline.select agree."""
    from torchmend.cli.main import app
    from torchmend.lint import lint_paths

    monkeypatch.setenv("TORCHMEND_CACHE_DIR", str(repo.parent / "cache"))
    (repo / "pyproject.toml").write_text('[tool.torchmend]\nignore = ["TM103"]\n')
    (repo / "train.py").write_text(
        textwrap.dedent(
            """
            import torch


            @torch.compile
            def step(x):
                print("x", x.sum())  # torchmend: ignore[TM101]
                if x.sum() > 0:
                    x = x * 2
                return x.item() + 1
            """
        ).lstrip()
    )
    r = CliRunner().invoke(app, ["lint", str(repo), "--format", "json", "--show-possible", "--exit-zero"])
    assert r.exit_code == 0, r.output
    cli = sorted((f["rule"], f["line"]) for f in json.loads(r.stdout)["findings"])
    result = lint_paths([repo], Root(repo.resolve()), cache=False)
    kept, suppressed, unused = pipeline.select(result.findings, repo.resolve())
    assert sorted((f.rule, f.line) for f in kept + unused) == cli
    assert {f.rule for f in suppressed} == {"TM101", "TM103"} and cli  # the comment, the configured ignore
