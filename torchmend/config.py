"""`[tool.torchmend]` in pyproject.toml: found, checked, and merged under the command line.

Where: from a start directory (the script's; for lint the first path's; else the current directory) upwards, the
first pyproject.toml that has a `[tool.torchmend]` table; a pyproject.toml without one is passed over, as Ruff
does. The walk stops at the top of the git work tree holding the start directory (the directory with `.git`),
else at the filesystem root: a configuration outside the repository is never someone else's project's.

What: the keys of KEYS, each with its type checked (`select = "TM1"` is an error, as in Ruff: a list is a list).
An unknown key (the closest known key suggested), a wrong type, a rule code that does not exist in `select`,
`ignore` or `per-file-ignores`, or a pyproject.toml that is not TOML raises
ConfigError, naming the file, the key and its line (tomllib gives no positions: the lines are found in the text
of the table). The command line overrides the file; the file overrides the defaults.

API (commands get theirs through torchmend.project.Project, which loads it):

    cfg = load_config(start_dir)                # ConfigError on a bad file; Config.empty() when there is none
    settings = cfg.resolve(Overrides(steps=5))  # settings.Settings: the command line's values over the file's
    cfg.get("steps", steps_from_cli)            # one key: the command line's value when given, else the file's
    cfg.settings(overrides)                     # every key, its value and where it came from (`torchmend config`)

The command line's values travel as an Overrides, one field per key: a misspelt one is a TypeError (and a mypy
error), where a keyword mapped to a key by its spelling would have been nothing, silently.
"""

from __future__ import annotations

import difflib
import math
import os
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from torchmend.settings import Settings
from torchmend.values import Selection, Tolerance, glob_matches

__all__ = ["KEYS", "Config", "ConfigError", "Overrides", "glob_matches", "key_lines", "load_config"]

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

FILE = "pyproject.toml"
TABLE = ("tool", "torchmend")


class ConfigError(Exception):
    """The configuration cannot be used; the message names the file, the key and the line."""


# ------------------------------------------------------------------------------------------------- the keys


def _list_of_str(v: Any) -> str | None:
    if isinstance(v, list) and all(isinstance(x, str) for x in v):
        return None
    if isinstance(v, str):
        return f'a list of strings, e.g. ["{v}"] (a bare string is not accepted, as in Ruff)'
    return "a list of strings"


def _str(v: Any) -> str | None:
    return None if isinstance(v, str) and v else "a non-empty string"


def _bool(v: Any) -> str | None:
    return None if isinstance(v, bool) else "true or false"


def _int_at_least(low: int) -> Callable[[Any], str | None]:
    def check(v: Any) -> str | None:
        return None if isinstance(v, int) and not isinstance(v, bool) and v >= low else f"an integer >= {low}"

    return check


def _number_at_least(low: float, strict: bool = False) -> Callable[[Any], str | None]:
    def check(v: Any) -> str | None:
        ok = isinstance(v, (int, float)) and not isinstance(v, bool) and (v > low if strict else v >= low)
        ok = ok and math.isfinite(v)  # nan compares false, inf is no number of seconds or tolerance
        return None if ok else f"a number {'>' if strict else '>='} {low}"

    return check


def _per_file_ignores(v: Any) -> str | None:
    if isinstance(v, dict) and all(_list_of_str(codes) is None for codes in v.values()):
        return None
    return 'a table of glob = list of code prefixes, e.g. {"tests/*.py" = ["TM1"]}'


@dataclass(frozen=True)
class Key:
    name: str
    check: Callable[[Any], str | None]  # None when the value is right, else what it should be
    default: Any
    help: str
    option: str  # the command-line option it stands for

    @property
    def attribute(self) -> str:
        """Its field in Overrides (`verify-backend`: verify_backend); a test checks that every key has one."""
        return self.name.replace("-", "_")


KEYS: dict[str, Key] = {
    k.name: k
    for k in (
        Key("select", _list_of_str, None, "only these rules, by code prefix (default: all)", "--select"),
        Key("ignore", _list_of_str, [], "leave out these rules, by code prefix", "--ignore"),
        Key("per-file-ignores", _per_file_ignores, {}, "glob → code prefixes left out in the files it matches", "—"),
        Key("exclude", _list_of_str, [], "globs of paths that lint's file walk leaves out", "—"),
        Key("backend", _str, None, "backend of every torch.compile call (default: the script's own)", "--backend"),
        Key("steps", _int_at_least(1), None, "stop after N optimizer steps", "--steps"),
        Key("timeout", _number_at_least(0.1), None, "stop after S seconds of wall time", "--timeout"),
        Key(
            "verify-backend",
            _str,
            None,
            "backend of the verification runs (fix; verify's --backend)",
            "--verify-backend",
        ),
        Key(
            "rtol", _number_at_least(0), Tolerance.rtol, "relative tolerance for losses and final parameters", "--rtol"
        ),
        Key(
            "atol", _number_at_least(0), Tolerance.atol, "absolute tolerance for losses and final parameters", "--atol"
        ),
        Key("unsafe-fixes", _bool, False, "fix --yes/--diff include the unsafe changes", "--unsafe-fixes"),
        Key(
            "allow-random-stream",
            _bool,
            False,
            "fix --yes/--diff include the changes that alter the random stream (verified in distribution)",
            "--allow-random-stream",
        ),
        Key(
            "project-root",
            _str,
            None,
            "project root, relative to the pyproject.toml (default: the git work tree)",
            "--project",
        ),
        Key("remote", _str, "origin", "pr and fix --pr: the git remote to push to", "--remote"),
        Key("base", _str, None, "pr and fix --pr: the branch the pull request goes into", "--base"),
    )
}


# -------------------------------------------------------------------------------------------- the overrides


@dataclass(frozen=True)
class Overrides:
    """What the command line gives, one field per key of KEYS (None: not given), put over the file's by
    Config.resolve, as Ruff's explicit overrides are over its configuration."""

    select: Sequence[str] | None = None
    ignore: Sequence[str] | None = None
    per_file_ignores: dict[str, list[str]] | None = None
    exclude: Sequence[str] | None = None
    backend: str | None = None
    steps: int | None = None
    timeout: float | None = None
    verify_backend: str | None = None
    rtol: float | None = None
    atol: float | None = None
    unsafe_fixes: bool | None = None
    allow_random_stream: bool | None = None
    project_root: Path | None = None
    remote: str | None = None
    base: str | None = None

    def get(self, key: str) -> Any:
        """The value given for a key of KEYS (None: not given)."""
        return getattr(self, KEYS[key].attribute)


assert {f.name for f in fields(Overrides)} == {k.attribute for k in KEYS.values()}, "one Overrides field per key"


# ----------------------------------------------------------------------------------------------- the config


@dataclass(frozen=True)
class Setting:
    key: str
    value: Any
    source: str  # "default", "pyproject.toml:LINE" or "command line"


@dataclass(frozen=True)
class Config:
    path: Path | None = None  # the pyproject.toml read, None when there is none
    values: dict[str, Any] = field(default_factory=dict)  # what the file sets, by key (paths made absolute)
    lines: dict[str, int] = field(default_factory=dict)  # the line of each key in the file

    @classmethod
    def empty(cls) -> Config:
        return cls()

    @property
    def directory(self) -> Path | None:
        """The pyproject.toml's directory: globs and project-root are relative to it."""
        return self.path.parent if self.path is not None else None

    def get(self, key: str, cli_value: Any = None) -> Any:
        """The command line's value when given (not None), else the file's, else the key's default."""
        if cli_value is not None:
            return cli_value
        if key in self.values:
            return self.values[key]
        return KEYS[key].default

    def source(self, key: str, cli_value: Any = None) -> str:
        if cli_value is not None:
            return "command line"
        if key in self.values:
            line = self.lines.get(key)
            return f"{self.path}:{line}" if line else str(self.path)
        return "default"

    def settings(self, overrides: Overrides | None = None) -> list[Setting]:
        """Every key's effective value and where it came from (`overrides`: the command line's values)."""
        cli = overrides or Overrides()
        return [Setting(k, self.get(k, cli.get(k)), self.source(k, cli.get(k))) for k in KEYS]

    def resolve(self, overrides: Overrides | None = None) -> Settings:
        """The settings a command runs with: each key's command-line value (`overrides`; None: not given) over the
        file's over the default, merged here once for every command."""
        cli = overrides or Overrides()

        def get(key: str) -> Any:
            return self.get(key, cli.get(key))

        select = get("select")
        per_file = tuple((glob, tuple(codes)) for glob, codes in get("per-file-ignores").items())
        root = get("project-root")
        return Settings(
            selection=Selection(
                None if select is None else tuple(select), tuple(get("ignore") or ()), per_file, self.directory
            ),
            tolerance=Tolerance(get("rtol"), get("atol")),
            backend=get("backend"),
            verify_backend=get("verify-backend"),
            steps=get("steps"),
            timeout=get("timeout"),
            unsafe=bool(get("unsafe-fixes")),
            random_stream=bool(get("allow-random-stream")),
            project_root=None if root is None else Path(os.path.abspath(root)),
            remote=get("remote"),
            base=get("base"),
            exclude=tuple(get("exclude")),
            exclude_base=self.directory,
        )


# ----------------------------------------------------------------------------------------------- finding it


def find_pyproject(start: Path) -> tuple[Path, dict[str, Any]] | None:
    """The first pyproject.toml from `start` upwards with a [tool.torchmend] table, and that table; None when
    there is none up to the git work tree's top (or the filesystem root). Raises ConfigError on one that is not
    TOML."""
    start = Path(os.path.abspath(start))
    for d in [start, *start.parents]:
        candidate = d / FILE
        if candidate.is_file():
            table = _table(candidate, _parse(candidate))
            if table is not None:
                return candidate, table
        if (d / ".git").exists():
            return None
    return None


def _parse(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as e:
        line = re.search(r"at line (\d+)", str(e))
        raise ConfigError(f"{path}{':' + line.group(1) if line else ''}: not valid TOML: {e}") from e
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"{path}: cannot read it: {e}") from e


def _table(path: Path, data: dict[str, Any]) -> dict[str, Any] | None:
    tool = data.get("tool")
    if not isinstance(tool, dict) or "torchmend" not in tool:
        return None
    table = tool["torchmend"]
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: tool.torchmend must be a table ([tool.torchmend]), not {type(table).__name__}")
    return table


_CODE_KEYS = ("select", "ignore", "per-file-ignores")


def _known_codes(key: str, value: Any, where: str) -> None:
    """Each code of select/ignore/per-file-ignores must be a rule code or the prefix of one, as on the command line:
    a typo would select nothing, or ignore nothing, and switch a CI check off without a word."""
    if key not in _CODE_KEYS:
        return
    from torchmend.rules import closest_codes, is_code_prefix

    lists = value.values() if isinstance(value, dict) else [value]
    unknown = list(dict.fromkeys(c for codes in lists for c in codes if not is_code_prefix(c)))
    if not unknown:
        return
    near = sorted({n for c in unknown for n in closest_codes(c)})
    hint = f"; did you mean {' or '.join(near)}?" if near else ""
    shown = ", ".join(f"`{c}`" for c in unknown)
    raise ConfigError(
        f"{where}: `{key}` names {'a rule code that does' if len(unknown) == 1 else 'rule codes that do'} not exist: "
        f"{shown}{hint} (a code or the prefix of one: TM1xx graph breaks, TM2xx recompiles, TM9xx notes; "
        "`torchmend rules` lists them)"
    )


def load_config(start: Path) -> Config:
    """The configuration that applies to `start` (a directory, or a file: its directory), checked; Config.empty()
    when no pyproject.toml up to the work tree's top has [tool.torchmend]. Raises ConfigError."""
    start = Path(os.path.abspath(start))
    if start.is_file() or (not start.exists() and start.suffix == ".py"):
        start = start.parent
    found = find_pyproject(start)
    if found is None:
        return Config.empty()
    path, table = found
    lines = key_lines(path.read_text(encoding="utf-8"))
    values: dict[str, Any] = {}
    for key, value in table.items():
        where = f"{path}:{lines[key]}" if key in lines else str(path)
        spec = KEYS.get(key)
        if spec is None:
            close = difflib.get_close_matches(key, list(KEYS), n=1, cutoff=0.6)
            hint = f"; did you mean `{close[0]}`?" if close else f"; known keys: {', '.join(KEYS)}"
            raise ConfigError(f"{where}: unknown key `{key}` in [tool.torchmend]{hint}")
        wrong = spec.check(value)
        if wrong is not None:
            raise ConfigError(f"{where}: `{key}` must be {wrong}, not {_shown(value)}")
        values[key] = value
        _known_codes(key, value, where)
    if "project-root" in values:
        values["project-root"] = (path.parent / values["project-root"]).resolve()
        if not values["project-root"].is_dir():
            where = f"{path}:{lines['project-root']}" if "project-root" in lines else str(path)
            raise ConfigError(f"{where}: `project-root` is not a directory: {values['project-root']}")
    return Config(path=path, values=values, lines=lines)


def _shown(value: Any) -> str:
    kind = {str: "a string", bool: "a boolean", int: "an integer", float: "a number", list: "a list", dict: "a table"}
    shown = str(value).lower() if isinstance(value, bool) else repr(value)
    return f"{kind.get(type(value), type(value).__name__)} ({shown})"


_HEADER = re.compile(r"^\s*\[\s*([^\[\]]+?)\s*\]\s*(?:#.*)?$")
_KEY = re.compile(r"""^\s*(?:"([^"]+)"|'([^']+)'|([A-Za-z0-9_-]+))\s*=""")


def _dotted(name: str) -> tuple[str, ...]:
    return tuple(part.strip().strip("\"'") for part in name.split("."))


def key_lines(text: str) -> dict[str, int]:
    """The line (1-based) of each key of [tool.torchmend] in the text: `key = ...` in the table, or the header of
    a sub-table `[tool.torchmend.key]`. tomllib gives no positions; this reads the lines the table spans."""
    lines: dict[str, int] = {}
    current: tuple[str, ...] = ()
    depth = 0  # open brackets of a multi-line array: its lines are values, not keys or headers
    for number, line in enumerate(text.splitlines(), 1):
        if depth == 0:
            header = _HEADER.match(line)
            if header and not line.lstrip().startswith("[["):
                current = _dotted(header.group(1))
                if current[:2] == TABLE and len(current) > 2:
                    lines.setdefault(current[2], number)
                continue
            key = _KEY.match(line)
            if key and current == TABLE:
                lines.setdefault(next(g for g in key.groups() if g), number)
            elif current == TABLE[:1] and "=" in line:  # [tool] with torchmend.KEY = ...
                dotted = _dotted(line.split("=", 1)[0])
                if dotted[:1] == TABLE[1:] and len(dotted) > 1:
                    lines.setdefault(dotted[1], number)
        depth = max(0, depth + _brackets(line))
    return lines


def _brackets(line: str) -> int:
    """Open minus closed brackets on a line, outside strings and comments (enough for arrays in a table)."""
    count, quote = 0, ""
    for c in line.split("=", 1)[1] if _KEY.match(line) else line:
        if quote:
            quote = "" if c == quote else quote
        elif c in "\"'":
            quote = c
        elif c == "#":
            break
        elif c in "[{":
            count += 1
        elif c in "]}":
            count -= 1
    return count
