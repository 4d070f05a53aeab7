"""[tool.torchmend] in pyproject.toml (torchmend/config.py): where it is found, what each key may hold, the lines
errors name, the command line over the file, globs; and `torchmend config` plus exit code 24 from every command
that reads it (before anything runs: these tests start no training script)."""

from __future__ import annotations

import textwrap
from dataclasses import fields
from pathlib import Path

import pytest
from conftest import torchmend

from torchmend.config import KEYS, Config, ConfigError, Overrides, glob_matches, key_lines, load_config


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return path


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git work tree (a .git folder is what bounds the walk) with a project inside."""
    (tmp_path / "repo" / ".git").mkdir(parents=True)
    return tmp_path / "repo"


FULL = """
[project]
name = "demo"

[tool.ruff]
line-length = 100

[tool.torchmend]
select = ["TM1", "TM2"]   # breaks and recompiles
ignore = [
    "TM104",
    "TM202",
]
steps = 20
timeout = 90
backend = "aot_eager"
verify-backend = "inductor"
rtol = 1e-3
atol = 0
unsafe-fixes = true
project-root = "src"
remote = "upstream"
base = "main"
allow-random-stream = true
exclude = ["data/", "**/generated_*.py"]

[tool.torchmend.per-file-ignores]
"tests/*.py" = ["TM101"]
"__init__.py" = ["TM2"]
"""


def test_every_key_is_read_with_its_line(repo: Path):
    write(repo / "pyproject.toml", FULL)
    (repo / "src").mkdir()
    cfg = load_config(repo / "src" / "pkg")  # a folder that does not exist yet: the walk starts there anyway
    assert cfg.path == repo / "pyproject.toml"
    assert set(cfg.values) == set(KEYS)
    assert cfg.values["ignore"] == ["TM104", "TM202"] and cfg.values["rtol"] == 1e-3
    assert cfg.values["project-root"] == (repo / "src").resolve()  # relative to the pyproject's folder
    assert cfg.lines == {
        "select": 8,
        "ignore": 9,
        "steps": 13,
        "timeout": 14,
        "backend": 15,
        "verify-backend": 16,
        "rtol": 17,
        "atol": 18,
        "unsafe-fixes": 19,
        "project-root": 20,
        "remote": 21,
        "base": 22,
        "allow-random-stream": 23,
        "exclude": 24,
        "per-file-ignores": 26,
    }
    assert cfg.values["allow-random-stream"] is True


def test_command_line_over_file_over_default(repo: Path):
    write(repo / "pyproject.toml", "[tool.torchmend]\nsteps = 20\n")
    cfg = load_config(repo)
    assert (cfg.get("steps"), cfg.source("steps")) == (20, f"{repo / 'pyproject.toml'}:2")
    assert (cfg.get("steps", 5), cfg.source("steps", 5)) == (5, "command line")
    assert (cfg.get("timeout"), cfg.source("timeout")) == (None, "default")
    assert (cfg.get("remote"), cfg.get("unsafe-fixes"), cfg.get("unsafe-fixes", False)) == ("origin", False, False)
    assert cfg.get("unsafe-fixes", True) is True  # --unsafe
    settings = {s.key: s for s in cfg.settings(Overrides(backend="eager"))}
    assert settings["backend"].source == "command line" and settings["steps"].value == 20


def test_the_command_line_overrides_are_one_typed_field_per_key(repo: Path):
    write(repo / "pyproject.toml", '[tool.torchmend]\nverify-backend = "aot_eager"\n')
    cfg = load_config(repo)
    assert cfg.resolve(Overrides(verify_backend="eager")).verify_backend == "eager"
    assert cfg.resolve().verify_backend == "aot_eager"
    # A misspelt option is an error where it is written, not a value silently dropped (a keyword mapped to its
    # key by spelling gave None for `verfy_backend`).
    with pytest.raises(TypeError, match="verfy_backend"):
        Overrides(verfy_backend="eager")  # type: ignore[call-arg]
    assert {f.name for f in fields(Overrides)} == {k.replace("-", "_") for k in KEYS}
    given = Overrides(**{f.name: f"v-{f.name}" for f in fields(Overrides)})  # type: ignore[arg-type]
    assert [given.get(k) for k in KEYS] == [f"v-{k.replace('-', '_')}" for k in KEYS]
    import torchmend.cli.context as context

    assert not hasattr(context, "resolved")  # the keyword-spelling merge is gone: every command passes Overrides


def test_the_nearest_table_wins_and_a_pyproject_without_one_is_passed_over(repo: Path):
    write(repo / "pyproject.toml", "[tool.torchmend]\nsteps = 1\n")
    write(repo / "a" / "pyproject.toml", "[project]\nname = 'a'\n")  # no table: passed over
    write(repo / "a" / "b" / "pyproject.toml", "[tool.torchmend]\nsteps = 3\n")
    assert load_config(repo / "a" / "train.py").get("steps") == 1  # a file: its folder is the start
    assert load_config(repo / "a" / "b" / "c").get("steps") == 3


def test_the_walk_stops_at_the_git_work_tree(tmp_path: Path, repo: Path):
    write(tmp_path / "pyproject.toml", "[tool.torchmend]\nsteps = 1\n")  # outside the repository: never read
    cfg = load_config(repo / "scripts")
    assert cfg == Config.empty() and cfg.get("steps") is None and cfg.source("steps") == "default"


@pytest.mark.parametrize(
    "line, message",
    [
        ('steps = "ten"', "`steps` must be an integer >= 1, not a string ('ten')"),
        ("steps = 0", "`steps` must be an integer >= 1, not an integer (0)"),
        ("steps = true", "`steps` must be an integer >= 1, not a boolean (true)"),
        ('select = "TM1"', '`select` must be a list of strings, e.g. ["TM1"]'),
        ("ignore = [101]", "`ignore` must be a list of strings, not a list ([101])"),
        ("rtol = -1", "`rtol` must be a number >= 0"),
        ("timeout = 0", "`timeout` must be a number >= 0.1, not an integer (0)"),
        ("unsafe-fixes = 1", "`unsafe-fixes` must be true or false"),
        ('verify-backend = ""', "`verify-backend` must be a non-empty string"),
        ('project-root = "missing"', "`project-root` is not a directory: "),
        ('per-file-ignores = {"a.py" = "TM1"}', "`per-file-ignores` must be a table of glob = list of code prefixes"),
        ("step = 3", "unknown key `step` in [tool.torchmend]; did you mean `steps`?"),
        ("unsafe_fixes = true", "did you mean `unsafe-fixes`?"),
        ("colour = 3", "unknown key `colour` in [tool.torchmend]; known keys: select, ignore,"),
        ('select = ["TM1", "TM999"]', "`select` names a rule code that does not exist: `TM999`; did you mean TM199"),
        ('ignore = ["TM1x", "TM20", "XX1"]', "`ignore` names rule codes that do not exist: `TM1x`, `XX1`"),
        ('per-file-ignores = {"t/*.py" = ["TM101", "TM3"]}', "`per-file-ignores` names a rule code that does not"),
    ],
)
def test_a_wrong_key_or_type_names_the_file_key_and_line(repo: Path, line: str, message: str):
    path = write(repo / "pyproject.toml", f'# top\n[tool.torchmend]\nbackend = "aot_eager"\n{line}\n')
    with pytest.raises(ConfigError) as e:
        load_config(repo)
    assert str(e.value).startswith(f"{path}:4: "), str(e.value)
    assert message in str(e.value)


def test_an_unknown_sub_table_is_an_unknown_key_at_its_header(repo: Path):
    path = write(repo / "pyproject.toml", "[tool.torchmend]\nsteps = 2\n\n[tool.torchmend.lint]\nx = 1\n")
    with pytest.raises(ConfigError, match=rf"^{path}:4: unknown key `lint`"):
        load_config(repo)


def test_not_toml_gives_tomls_message_and_line(repo: Path):
    path = write(repo / "pyproject.toml", "[tool.torchmend]\nsteps = 2\nselect = [\"TM1\"\nbackend = 'x'\n")
    with pytest.raises(ConfigError) as e:
        load_config(repo / "sub")
    assert str(e.value).startswith(f"{path}:") and "not valid TOML" in str(e.value) and "line" in str(e.value)


def test_key_lines_reads_only_the_table_and_skips_array_values():
    text = textwrap.dedent(
        """
        [tool.other]
        steps = 1
        [tool.torchmend]
        'select' = [
            "TM1",  # steps = 9 in a comment
        ]
        "steps" = 4
        [tool]
        torchmend.timeout = 3
        """
    )
    assert key_lines(text) == {"select": 5, "steps": 8, "timeout": 10}


@pytest.mark.parametrize(
    "pattern, path, expected",
    [
        ("tests/*.py", "tests/test_a.py", True),
        ("tests/*.py", "tests/sub/test_a.py", False),
        ("tests/**/*.py", "tests/sub/deep/test_a.py", True),
        ("tests/**/*.py", "tests/test_a.py", True),
        ("**/generated_*.py", "generated_x.py", True),
        ("__init__.py", "pkg/sub/__init__.py", True),  # no slash: a name at any depth
        ("data/", "data/raw/x.py", True),  # a folder: what is inside it
        ("./scripts", "scripts/run.py", True),
        ("scripts", "other/scripts_x.py", False),
        ("model_[ab].py", "model_b.py", True),
        ("model_[!ab].py", "model_b.py", False),
    ],
)
def test_globs(pattern: str, path: str, expected: bool):
    assert glob_matches(pattern, path) is expected


def test_per_file_ignores_and_exclude_are_relative_to_the_pyproject(repo: Path):
    write(repo / "pyproject.toml", FULL)
    (repo / "src").mkdir()
    settings = load_config(repo).resolve()
    selection = settings.selection
    assert selection.ignored_codes(repo / "tests" / "test_a.py") == ["TM101"]
    assert selection.ignored_codes(str(repo / "pkg" / "__init__.py")) == ["TM2"]
    assert selection.ignored_codes(repo / "train.py") == [] and selection.ignored_codes("/elsewhere/tests/a.py") == []
    assert settings.excluded(repo / "data" / "x" / "loader.py") and settings.excluded(repo / "m" / "generated_1.py")
    assert not settings.excluded(repo / "train.py") and not Config.empty().resolve().excluded(repo / "data" / "x.py")
    # what resolves them is Settings alone: the configuration keeps no second copy of their matching
    assert not hasattr(Config, "ignored_codes") and not hasattr(Config, "excluded")


# ------------------------------------------------------------------------------------------- the command line


def test_config_command_shows_values_and_sources(repo: Path):
    write(repo / "pyproject.toml", "[project]\nname = 'x'\n\n[tool.torchmend]\nsteps = 20\nselect = ['TM1']\n")
    r = torchmend("config", str(repo / "train.py"), "--backend", "eager", "-f", "json")
    assert r.returncode == 0, r.stderr
    settings = r.json["settings"]
    assert r.json["pyproject"] == str(repo / "pyproject.toml")
    assert settings["steps"] == {"value": 20, "source": f"{repo / 'pyproject.toml'}:5"}
    assert settings["select"]["value"] == ["TM1"] and settings["backend"]["source"] == "command line"
    assert settings["rtol"]["source"] == "default"
    table = torchmend("config", cwd=repo)
    assert table.returncode == 0
    assert (
        "pyproject.toml:5" in table.stdout and "command line" not in table.stdout and "verify-backend" in table.stdout
    )


@pytest.mark.parametrize(
    "command",
    [
        ["config"],
        ["scan", "train.py"],
        ["fix", "train.py", "--yes"],
        ["verify", "train.py", "--patch", "x.patch"],
        ["pr", "--dry-run"],
    ],
)
def test_every_command_exits_24_on_a_bad_config_before_running(repo: Path, command: list[str]):
    write(repo / "pyproject.toml", '[tool.torchmend]\nsteps = "ten"\n')
    write(repo / "train.py", "raise SystemExit('the script must not run')\n")
    r = torchmend(*command, cwd=repo)
    assert r.returncode == 24, (r.returncode, r.stdout, r.stderr)
    assert f"{repo / 'pyproject.toml'}:2: `steps` must be an integer >= 1" in " ".join(r.stderr.split())


def test_rule_codes_and_prefixes_that_exist_are_accepted(repo: Path):
    write(repo / "pyproject.toml", '[tool.torchmend]\nselect = ["TM", "TM1", "TM10", "TM203"]\nignore = ["TM9"]\n')
    assert load_config(repo).get("select") == ["TM", "TM1", "TM10", "TM203"]


def test_lint_exits_24_on_a_code_that_does_not_exist_in_per_file_ignores(repo: Path):
    write(repo / "pyproject.toml", '[tool.torchmend]\n\n[tool.torchmend.per-file-ignores]\n"tests/*.py" = ["TM1O1"]\n')
    write(repo / "train.py", "import torch\n\n@torch.compile\ndef f(x):\n    print(x)\n    return x\n")
    r = torchmend("lint", ".", cwd=repo)
    assert r.returncode == 24, (r.returncode, r.stdout, r.stderr)
    assert "`per-file-ignores` names a rule code that does not exist: `TM1O1`" in " ".join(r.stderr.split())
