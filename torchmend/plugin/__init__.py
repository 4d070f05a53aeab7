"""torchmend's pytest plugin (the `pytest11` entry point `torchmend.plugin`, named after this module; docs/pytest.md).

    @pytest.mark.torchmend(graph_breaks=0, recompiles=0, max_graphs=None, ignore=[])
    def test_model_compiles(): ...

    def test_training_step(torchmend_compile):
        with torchmend_compile(graph_breaks=0, recompiles=0):
            ...

A marked test (or the fixture's block) is recorded in this process through the structured-trace collector that
`scan` uses in its child (profiler/inprocess.py), and judged by the same analysis (plugin/verdict.py). Options:
--torchmend-report (a summary of every recorded test), --torchmend-report-json PATH, --torchmend-fix-diff. Before any
test runs, the report's path and [tool.torchmend] are checked (plugin/checks.py): a mistake is a pytest usage error.

Loading the plugin imports neither torch nor libcst: only a marked test or the fixture does (a test keeps it so).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import pytest

from torchmend.plugin.checks import check_configs, check_report_path

if TYPE_CHECKING:
    from torchmend.model import Location
    from torchmend.plugin.verdict import Limits, Verdict

_T = TypeVar("_T")
_PROPERTY = "torchmend"  # the user_properties key a recorded verdict travels under (pytest-xdist sends it back)
_SKIPPED = "torchmend-skipped"  # and a marked test that skipped itself: {"test", "reason"}, nothing checked
SCHEMA = "torchmend.pytest/1"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("torchmend", "torchmend: graph breaks and recompiles of torch.compile")
    group.addoption(
        "--torchmend-report",
        action="store_true",
        help="print a summary of every recorded test: graphs, graph breaks, recompiles, and the findings",
    )
    group.addoption(
        "--torchmend-report-json",
        metavar="PATH",
        default=None,
        help="write that summary as JSON (schema torchmend.pytest/1) to PATH",
    )
    group.addoption(
        "--torchmend-fix-diff",
        action="store_true",
        help="with each failing finding, print the diff `torchmend fix` would propose (nothing is written)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "torchmend(graph_breaks=0, recompiles=0, max_graphs=None, ignore=[]): fail when what the test compiles "
        "has more graph breaks, recompiles or graphs than these; None leaves one unchecked (docs/pytest.md)",
    )
    report = _Report(config)
    value = config.getoption("torchmend_report_json")
    if value and not hasattr(config, "workerinput"):  # the controller writes it (a pytest-xdist worker does not)
        report.json_path = check_report_path(value, config.invocation_params.dir)
    cwd = config.invocation_params.dir
    check_configs([config.rootpath, *(cwd / arg.split("::")[0] for arg in config.args)], report.configs_seen)
    config.pluginmanager.register(report, "torchmend-report")


def _checked(where: str, check: Callable[[], _T]) -> _T:
    """The marker's or the fixture's arguments, checked by `check`: a wrong one fails the test with this line (the
    argument, what it takes, what it was given) and no traceback, before the recorded code runs."""
    from torchmend.plugin.verdict import LimitsError

    try:
        return check()
    except LimitsError as e:
        wrong = str(e)
    pytest.fail(f"{where}: {wrong}", pytrace=False)


def _limits(kwargs: dict[str, Any], args: tuple[Any, ...], where: str) -> Limits:
    from torchmend.plugin.verdict import Limits

    return _checked(where, lambda: Limits.from_marker(kwargs, args))


def _config_and_root(item: pytest.Item) -> tuple[Any, Path]:
    """[tool.torchmend] as it applies to the test's file, and the project root (its project-root, else pytest's
    rootdir): files under it are the user's, as for a scanned script. The configuration was checked before the
    tests ran (pytest_configure, pytest_collection_modifyitems); one changed since fails this test, without a
    traceback."""
    from torchmend.config import ConfigError, load_config

    try:
        cfg = load_config(Path(str(item.path)))
    except ConfigError as e:
        wrong = str(e)
    else:
        root = cfg.resolve().project_root or item.config.rootpath
        return cfg, Path(root).resolve()
    pytest.fail(f"torchmend: {wrong}", pytrace=False)  # outside the except: no "During handling of" chain


def _test_location(item: pytest.Item, root: Path) -> Location | None:
    """Where the test function is (its first decorator or its def): a setting the fix puts before a compile call
    goes before this test's own compile, not the first one of the file (--torchmend-fix-diff)."""
    from torchmend.model import Location

    line = item.location[1]
    if line is None:
        return None
    path = Path(str(item.path)).resolve()
    try:
        file = path.relative_to(root).as_posix()
    except ValueError:
        file = str(path)
    return Location(file=file, line=line + 1, function=item.name, path=str(path))


@contextmanager
def _recorded(item: pytest.Item, limits: Limits, reset: bool = True) -> Iterator[None]:
    """Record the block, judge it, keep the verdict on the item, and fail the test with the findings."""
    import time

    from torchmend.plugin.verdict import explain, fix_diffs, judge
    from torchmend.profiler.inprocess import Recording

    cfg, root = _config_and_root(item)
    recording = Recording(reset=reset)
    recording.start()
    t0 = time.monotonic()
    try:
        yield
    except pytest.skip.Exception as e:  # pytest.skip(), importorskip: nothing is checked, and the report says so
        recording.stop()
        item.user_properties.append((_SKIPPED, json.dumps({"test": item.nodeid, "reason": e.msg})))
        raise
    except BaseException as e:
        events = recording.stop(error=e)
        verdict = judge(events, root, cfg, limits, item.nodeid, time.monotonic() - t0, fresh=reset)
        _keep(item, verdict)
        message = explain(verdict)
        if message:  # the test failed on its own: its exception is the failure, the findings are a section
            item.add_report_section("call", "torchmend", message)
        raise
    events = recording.stop()
    verdict = judge(events, root, cfg, limits, item.nodeid, time.monotonic() - t0, fresh=reset)
    _keep(item, verdict)
    message = explain(verdict)
    if message:
        if item.config.getoption("torchmend_fix_diff") and verdict.exceeded:
            import torch

            diffs = fix_diffs(verdict, torch.__version__, entry=_test_location(item, root))
            message += "\ntorchmend fix would propose (nothing was written):\n" + (diffs or "(no change)") + "\n"
        pytest.fail(message, pytrace=False)


def _keep(item: pytest.Item, verdict: Verdict) -> None:
    item.user_properties.append((_PROPERTY, json.dumps(verdict.to_json(), default=str)))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    mark = item.get_closest_marker("torchmend")
    if mark is None:
        return (yield)
    limits = _limits(dict(mark.kwargs), tuple(mark.args), f"@pytest.mark.torchmend on {item.nodeid}")
    with _recorded(item, limits):
        return (yield)


class _Compile:
    """The `torchmend_compile` fixture's value: call it with the limits to get the recording context manager."""

    def __init__(self, item: pytest.Item) -> None:
        self._item = item

    def __call__(
        self,
        graph_breaks: int | None = 0,
        recompiles: int | None = 0,
        max_graphs: int | None = None,
        ignore: list[str] | tuple[str, ...] = (),
        reset: bool = True,
    ) -> Any:
        """Record what the `with` block compiles and fail the test when it exceeds these limits. `reset=False`
        keeps what was compiled before the block (a warm-up), so only the block's recompiles count: vLLM's
        fail_on_recompile check."""
        from torchmend.plugin.verdict import Limits

        where = f"torchmend_compile in {self._item.nodeid}"
        limits = _limits(
            {"graph_breaks": graph_breaks, "recompiles": recompiles, "max_graphs": max_graphs, "ignore": ignore},
            (),
            where,
        )
        return _recorded(self._item, limits, reset=_checked(where, lambda: Limits.flag("reset", reset)))


@pytest.fixture
def torchmend_compile(request: pytest.FixtureRequest) -> _Compile:
    """`with torchmend_compile(graph_breaks=0, recompiles=0, max_graphs=None, ignore=[], reset=True): ...` records
    what the block compiles and fails the test with torchmend's findings when it goes over the limits."""
    return _Compile(request.node)


class _Report:
    """Collects every recorded test's verdict (on the controller under pytest-xdist too: user_properties travel
    back with each report) and prints or writes the summary at the end."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.results: list[dict[str, Any]] = []
        self.skipped: list[dict[str, Any]] = []  # marked tests that skipped themselves: nothing checked
        self.json_path: Path | None = None  # --torchmend-report-json, checked and made absolute at configure
        self.json_error: str | None = None
        self.configs_seen: set[Path] = set()

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        """[tool.torchmend] of every file with a recorded test, checked before any test runs (a pyproject.toml
        below the folders pytest_configure checked). Not on a pytest-xdist worker, whose usage error the controller
        reports as its own crash: there such a test fails, saying why (_config_and_root)."""
        if hasattr(self.config, "workerinput"):
            return
        used = [i for i in items if i.get_closest_marker("torchmend") or "torchmend_compile" in _fixtures(i)]
        check_configs([Path(str(i.path)) for i in used], self.configs_seen)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "call":
            return
        for name, value in report.user_properties:
            if name == _PROPERTY:
                self.results.append(json.loads(str(value)))
            elif name == _SKIPPED:
                self.skipped.append(json.loads(str(value)))

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """Write the JSON report (before the terminal summary, which says where it went or why it could not)."""
        if self.json_path is None:
            return
        from torchmend import __version__

        data = {"schema": SCHEMA, "torchmend_version": __version__, "tests": self.results, "skipped": self.skipped}
        try:
            self.json_path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
        except OSError as e:  # checked at configure; gone or full since
            self.json_error = f"cannot write {self.json_path}: {e.strerror or e}"
            if session.exitstatus == pytest.ExitCode.OK:
                session.exitstatus = pytest.ExitCode.INTERNAL_ERROR

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        config = self.config
        if hasattr(config, "workerinput"):  # a pytest-xdist worker: the controller reports
            return
        path = self.json_path
        if not (config.getoption("torchmend_report") or path):
            return
        tr = terminalreporter
        tr.write_sep("=", "torchmend report")
        if not self.results and not self.skipped:
            tr.write_line("no test was recorded (none marked @pytest.mark.torchmend or using torchmend_compile)")
        for r in self.results:
            state = (
                "ok"
                if r["passed"]
                else "OVER THE LIMITS"
                if r["exceeded"]
                else "NOTHING COMPILED"
                if r["compiled_nothing"] and r["fresh"]
                else "the test raised"
            )
            tr.write_line(
                f"{r['test']}: {r['graphs']} graphs, {r['graph_breaks']} graph breaks, {r['recompiles']} recompiles, "
                f"{r['compiles']} compiles, {r['compile_seconds']:.2f} s compiling: {state}"
            )
            for f in r["findings"]:
                tr.write_line(f"    {f['rule']} {f['file']}:{f['line']} ({f['count']}x) {f['title']}")
        for r in self.skipped:
            tr.write_line(f"{r['test']}: SKIPPED ({r['reason']}): nothing checked")
        if self.json_error:
            tr.write_line(f"torchmend: --torchmend-report-json: {self.json_error}", red=True)
        elif path:
            tr.write_line(f"JSON: {config.getoption('torchmend_report_json')}")


def _fixtures(item: pytest.Item) -> list[str]:
    return list(getattr(item, "fixturenames", ()))
