"""torchmend's pytest plugin (the `pytest11` entry point `torchmend.plugin`, named after this module; docs/pytest.md).

    @pytest.mark.torchmend(graph_breaks=0, recompiles=0, max_graphs=None, ignore=[])
    def test_model_compiles(): ...

    def test_training_step(torchmend_compile):
        with torchmend_compile(graph_breaks=0, recompiles=0):
            ...

A marked test (or the fixture's block) is recorded in this process through the structured-trace collector that
`scan` uses in its child (profiler/inprocess.py), and judged by the same analysis (plugin/verdict.py). Options:
--torchmend-report (a summary of every recorded test), --torchmend-report-json PATH, --torchmend-fix-diff.

Loading the plugin imports neither torch nor libcst: only a marked test or the fixture does (a test keeps it so).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from torchmend.plugin.verdict import Limits, Verdict

_PROPERTY = "torchmend"  # the user_properties key a recorded verdict travels under (pytest-xdist sends it back)
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
    config.pluginmanager.register(_Report(config), "torchmend-report")


def _limits(kwargs: dict[str, Any], args: tuple[Any, ...], where: str) -> Limits:
    from torchmend.plugin.verdict import Limits, LimitsError

    try:
        return Limits.from_marker(kwargs, args)
    except LimitsError as e:
        wrong = str(e)
    pytest.fail(f"{where}: {wrong}", pytrace=False)  # before the test's body runs: this line, no traceback


def _config_and_root(item: pytest.Item) -> tuple[Any, Path]:
    """[tool.torchmend] as it applies to the test's file, and the project root (its project-root, else pytest's
    rootdir): files under it are the user's, as for a scanned script."""
    from torchmend.config import ConfigError, load_config

    try:
        cfg = load_config(Path(str(item.path)))
    except ConfigError as e:
        raise pytest.UsageError(f"torchmend: {e}") from None
    root = cfg.resolve().project_root or item.config.rootpath
    return cfg, Path(root).resolve()


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

            diffs = fix_diffs(verdict, torch.__version__)
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
        limits = _limits(
            {"graph_breaks": graph_breaks, "recompiles": recompiles, "max_graphs": max_graphs, "ignore": ignore},
            (),
            f"torchmend_compile in {self._item.nodeid}",
        )
        return _recorded(self._item, limits, reset=reset)


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

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "call":
            return
        self.results += [json.loads(str(value)) for name, value in report.user_properties if name == _PROPERTY]

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        config = self.config
        if hasattr(config, "workerinput"):  # a pytest-xdist worker: the controller reports
            return
        path = config.getoption("torchmend_report_json")
        if path:
            from torchmend import __version__

            data = {"schema": SCHEMA, "torchmend_version": __version__, "tests": self.results}
            Path(path).write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
        if not (config.getoption("torchmend_report") or path):
            return
        tr = terminalreporter
        tr.write_sep("=", "torchmend report")
        if not self.results:
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
        if path:
            tr.write_line(f"JSON: {path}")
