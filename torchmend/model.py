"""The data model every stage shares: findings, their locations, a run's summary, and the closed sets of
words they use. The ground floor: imports nothing from torchmend, so the profiler, the codemods, verify
and vcs can all depend on it without depending on each other.

The word sets are StrEnums: a member *is* its string ("fix" == Severity.FIX), so JSON output and old
comparisons keep working, while new code compares against members and a typo fails at import time.
"""

from __future__ import annotations

import enum
import sys
from dataclasses import asdict, dataclass
from typing import Any

if sys.version_info >= (3, 11):
    from enum import StrEnum
else:  # pragma: no cover - Python 3.10

    class StrEnum(str, enum.Enum):
        def __str__(self) -> str:
            return str(self.value)


class Kind(StrEnum):
    """What PyTorch did."""

    GRAPH_BREAK = "graph_break"
    RECOMPILE = "recompile"
    RECOMPILE_LIMIT = "recompile_limit"
    SCRIPT_FAILURE = "script_failure"  # compiling broke the script itself (a compiled model saved whole, ...)
    SUPPRESSION = "suppression"  # not PyTorch's: a suppression comment that suppressed nothing (TM903)
    SOURCE = "source"  # lint: the source itself could not be read (a file that does not parse)


class Where(StrEnum):
    """Whose file a finding is in."""

    PROJECT = "project"  # under the project root: torchmend may edit it
    LIBRARY = "library"  # site-packages, the torch install, <string>, ...: never edited
    OUTSIDE = "outside"  # neither: never edited


class Severity(StrEnum):
    FIX = "fix"  # costs time on every step, or will: worth fixing
    NOTE = "note"  # happened once (a warm-up recompile): worth knowing
    INFO = "info"  # nothing to fix in your code


class Pattern(StrEnum):
    """How a recompile repeated."""

    ONCE = "once"
    STORM = "storm"  # more than once (words: repeated_words)
    LIMIT = "limit"  # until the recompile limit: the function now runs eagerly


# A recompile that repeated is called a storm from this many times on: half of torch's default recompile limit (8),
# on its way there. Fewer (2 or 3) are said as a count: two recompiles are no storm (issue 41). The JSON's
# `pattern` stays `storm` for any repeat.
STORM_FROM = 4


def repeated_words(count: int) -> str:
    """How a repeated recompile (pattern storm) is said: `a recompile storm (6×)`, or `repeated 2×`."""
    return f"a recompile storm ({count}×)" if count >= STORM_FROM else f"repeated {count}×"


class EndedBy(StrEnum):
    """Why a profiled run stopped."""

    FINISHED = "finished"  # the script returned
    STEPS = "steps"  # the step budget was reached
    TIMEOUT = "timeout"  # the time budget was reached
    ERROR = "error"  # the script raised
    EXIT = "exit"  # the script called sys.exit with a non-zero code
    KILLED = "killed"  # the child was killed by a signal (the OOM killer's SIGKILL too) before its end record
    LOST = "lost"  # the child exited (os._exit, a full disk, a closed stderr) before its end record was written
    NO_TORCH = "no_torch"  # the child could not import torch
    INTERNAL_ERROR = "internal_error"  # torchmend's own bootstrap failed
    TRACE = "trace"  # read from TORCH_TRACE logs; nothing ran

    @property
    def failed(self) -> bool:
        """The script itself failed, as opposed to a budget ending it."""
        return self in (EndedBy.ERROR, EndedBy.EXIT, EndedBy.KILLED, EndedBy.LOST)

    @property
    def no_run(self) -> bool:
        """The script failed, or torchmend could not run it at all: nothing to measure."""
        return self.failed or self in (EndedBy.NO_TORCH, EndedBy.INTERNAL_ERROR)


class Confidence(StrEnum):
    """How sure a static (lint) finding is; scan's findings have none."""

    LIKELY = "likely"
    POSSIBLE = "possible"


@dataclass(frozen=True, kw_only=True)
class Location:
    file: str  # relative to the project root when inside it, else absolute
    line: int
    function: str
    path: str  # absolute
    code: str = ""
    # A caller's line that itself runs inside a compiled call (a frame dynamo resumed or entered after a graph
    # break), as the live stack showed it: code added there is traced, not run before the compiled call.
    traced: bool = False


_LOCATIONS = ("user_frame", "call_site", "compiled_function", "entry")


@dataclass(frozen=True, kw_only=True)
class Finding:
    """One problem at one source line, deduplicated over the run (`count` times)."""

    rule: str  # a code from torchmend.rules, e.g. "TM101"
    kind: Kind
    title: str
    file: str
    line: int
    function: str
    path: str
    where: Where
    reason: str
    count: int
    severity: Severity
    pattern: Pattern | None = None  # recompiles only
    variable: str | None = None
    guard: str | None = None
    gb_id: str | None = None
    gb_type: str | None = None
    docs_url: str | None = None
    hint: str | None = None  # recompiles: PyTorch's own hint, when it gives one
    code: str = ""
    # The rule of the root cause when it differs from the symptom's: a TM250 (recompile limit) whose last guard
    # failure is a float learning rate has cause "TM203". The codemod registry dispatches on `cause or rule`.
    cause: str | None = None
    user_frame: Location | None = None  # for findings outside the project: the user's frame that reached it
    call_site: Location | None = None  # recompiles: where the compiled function was called from
    # Recompiles: the line of your code, outside compiled code, that the run entered compiled code from on the way
    # (the training loop's `model(x)`, where call_site may be a layer's call inside a model that broke). None: the
    # run did not show it (a trace, a frame entered from a library).
    entry: Location | None = None
    compiled_function: Location | None = None
    ranks: dict[int, int] | None = None  # multi-rank runs: how often on each rank that saw it
    divergent: bool = False  # not on every rank alike: the other ranks wait for this one at the next collective
    # A parallel wrapper's own break (DDP's logger, ...), by design on this torch: informational, shown apart, e.g.
    # "from DistributedDataParallel (its logger), expected on torch 2.13; not in your code" (profiler/parallel.py).
    expected: str | None = None
    # `torchmend lint`'s static findings: "likely" (the source shows it) or "possible" (it depends on values the
    # source does not show). None for scan's, which a run observed.
    confidence: str | None = None
    # Graph breaks: how many times a frame the break bubbled up through recorded it again. Dynamo breaks the frame it
    # compiles at the outermost call on the way to the break, then compiles each callee as a frame of its own, which
    # records the same break one call shallower: the number of different depths the records found it at, less one
    # (a break recompiled at one depth is not nested). Above 0, `torch._dynamo.config.nested_graph_breaks` is the
    # remedy that keeps the outer frames compiling (codemods/fixes/compile_config/nested.py).
    nested: int = 0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Finding:
        """The inverse of to_json (a `scan --format json` finding back into a record)."""
        known = cls.__dataclass_fields__
        fields = {k: v for k, v in data.items() if k in known}
        for key in _LOCATIONS:
            if fields.get(key) is not None:
                fields[key] = Location(**fields[key])
        if fields.get("ranks") is not None:
            fields["ranks"] = {int(r): n for r, n in fields["ranks"].items()}
        fields["kind"] = Kind(fields["kind"])
        fields["where"] = Where(fields["where"])
        fields["severity"] = Severity(fields["severity"])
        if fields.get("pattern") is not None:
            fields["pattern"] = Pattern(fields["pattern"])
        return cls(**fields)


@dataclass(frozen=True, kw_only=True)
class Placement:
    """Compile placement: a whole-model compile (the call at `path:line`, of a `model`) broke inside its submodules
    `broken`; `modules` (dotted names under the compiled model) compiled without a break and hold `share` of its
    parameters. profiler/placement.py reads it from the run."""

    path: str
    line: int
    model: str
    modules: tuple[str, ...]
    broken: tuple[str, ...]
    share: float

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, kw_only=True)
class Summary:
    frames_compiled: int
    compiles: int
    graphs: int
    graph_breaks: int
    recompiles: int
    recompile_limit_hits: int
    compile_seconds: float
    steps: int
    ended_by: EndedBy
    wall_seconds: float
    torch_version: str | None
    first_step_s: float | None = None  # from the script's start to the end of its first optimizer step
    steady_step_s: float | None = None  # median step time over the second half of the steps
    last_step_s: float | None = None  # from the script's start to the end of its last optimizer step
    # Compiled coverage, from the trace's graph_op_count: each compiled code object counted once, by the last graph
    # it compiled (what the run goes on with: a recompile adds nothing, and a first call's one-time graph, an
    # initialisation run once, does not count over the steady one), and the largest of those.
    ops_compiled: int = 0
    largest_graph_ops: int = 0
    ranks: int | None = None  # multi-rank runs: how many ranks reported; the counts above are their sums
    # how many optimizers stepped: each step() of each is one of `steps`, so with 2 (a GAN) steps are 2 per iteration
    optimizers: int = 0
    per_rank: tuple[dict[str, Any], ...] = ()  # multi-rank runs: each rank's own summary, with "rank"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)
