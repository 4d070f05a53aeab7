"""What a codemod is and what it returns.

A codemod reads a finding and the parsed source behind it and *proposes*: a `Proposal` (node-level
edits on one file, a one-line why, a safety label) or a `NoFix` (why not, and what the user can do
instead). It never writes, prints or runs anything; the engine (engine.py) applies accepted proposals.

Docstrings of codemod classes have the same five headings every time (see HEADINGS); scripts/gen_docs.py
generates docs/rules/ from them and from the inline examples.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar, Union

import libcst as cst

from torchmend import rules
from torchmend.model import Finding, StrEnum

if TYPE_CHECKING:
    from torchmend.analysis.source import Context


class Safety(StrEnum):
    """How safe a fix is (a member is its word: `"unsafe" == Safety.UNSAFE`)."""

    SAFE = "safe"
    UNSAFE = (
        "unsafe"  # may change numerics or output: needs --unsafe-fixes or a prompt; the verified re-run is the gate
    )
    # Changes the random stream but keeps the distribution (a LayerDrop skip picked with torch.where): applied only
    # with an explicit opt-in (`fix --allow-random-stream`), never by --yes or --unsafe-fixes alone, and verified in
    # distribution over several seeds (verify/stochastic.py), not bit for bit.
    RANDOM_STREAM = "random-stream"


SAFE, UNSAFE, RANDOM_STREAM = Safety.SAFE, Safety.UNSAFE, Safety.RANDOM_STREAM
SAFETIES = tuple(Safety)
HEADINGS = rules.HEADINGS  # the same five headings as `Rule.doc`

Replacement = Union[cst.CSTNode, cst.FlattenSentinel, cst.RemovalSentinel]


@dataclass(frozen=True, eq=False)
class Proposal:
    """Edits on one file that fix one or more findings.

    Nodes are those of the file's parsed module (`Context.file(path).module`), matched by identity:
    `replace` swaps a node (a statement may become several through FlattenSentinel), `insert_before` /
    `insert_after` add statements around a statement. `imports` are (module, name or None) pairs, added
    once each through libcst's AddImportsVisitor.
    """

    findings: tuple[Finding, ...]
    rule: str
    path: str
    why: str
    safety: Safety = Safety.SAFE  # a word of the set is taken too ("unsafe")
    replace: Mapping[cst.CSTNode, Replacement] = field(default_factory=dict)
    insert_before: Mapping[cst.BaseStatement, Sequence[cst.BaseStatement]] = field(default_factory=dict)
    insert_after: Mapping[cst.BaseStatement, Sequence[cst.BaseStatement]] = field(default_factory=dict)
    imports: tuple[tuple[str, str | None], ...] = ()
    note: str = ""  # what the user should know before accepting (e.g. "the message is not printed under compile")
    alternative: str = ""  # another way to fix it, in words or code
    # Other fixes of the same findings, in the order to try them when verification refuses this one (each a whole
    # Proposal on the same parsed file; the engine checks they compile, the verify rounds substitute them).
    fallbacks: tuple[Proposal, ...] = ()
    shape: str = ""  # the form of the edit, named for the table of known PyTorch hazards (profiler/hazards.py)
    # The change makes its findings recorded fewer times instead of removing them (a setting that keeps the calling
    # frames compiling around a nested break): verification counts it as helping when their counts fall.
    reduces: bool = False
    # The change is a global compiler setting (a dynamo config line, a compiler stance) rather than a local source
    # edit: it is written only when the script's own backend measured it faster (pipeline/stages.py).
    global_setting: bool = False
    # The coverage counts (verify/compare.py's COVERAGE) verification holds the patched run to; None: all of them.
    # Compile placement holds none (its coverage is the parameters it compiles, codemods/fixes/compile_placement.py).
    kept_coverage: tuple[str, ...] | None = None
    # The modules (class names) whose calls the runs' outputs are compared by, where neither records a loss, instead
    # of every compiled callable's: compile placement compiles the model's submodules, the model's own calls are the
    # ones both runs make (profiler/outputs.py).
    outputs_of: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.safety not in SAFETIES:
            raise ValueError(f"safety must be one of {tuple(s.value for s in Safety)}, not {self.safety!r}")
        object.__setattr__(self, "safety", Safety(self.safety))
        if not (self.replace or self.insert_before or self.insert_after):
            raise ValueError("a proposal must edit something")

    @property
    def finding(self) -> Finding:
        return self.findings[0]

    def anchors(self) -> list[tuple[cst.CSTNode, bool]]:
        """Every node this proposal touches, with whether it replaces it (True) or only inserts beside it."""
        return (
            [(n, True) for n in self.replace]
            + [(n, False) for n in self.insert_before]
            + [(n, False) for n in self.insert_after]
        )


@dataclass(frozen=True)
class NoFix:
    """A finding with no proposal: `skipped` (nothing to do: informational, already fixed, not selected) or
    unfixable (with the reason, and what the user can do instead)."""

    finding: Finding
    reason: str
    advice: str = ""
    skipped: bool = False


Result = Union[Proposal, NoFix]


@dataclass(frozen=True)
class Delegate:
    """The finding is another rule's to fix after all (a TM202 whose name turns out to be a closure variable is
    TM206's): the engine asks the codemod of `rule` (engine.ask). A codemod lists every rule it may hand a finding
    to in `delegates_to`, so the hand-over is declared where the registry and the tests can see it; no codemod looks
    another up itself."""

    finding: Finding
    rule: str


# What `Codemod.propose` answers: a Result, or a hand-over the engine resolves into one.
Answer = Union[Proposal, NoFix, Delegate]


class Refuse(Exception):
    """The shape of the code rules the fix out: raised inside a codemod's own helpers, carrying the NoFix's reason
    and what the user can do instead. A codemod may catch it to word its NoFix; one that leaves `propose` becomes
    that NoFix in the engine (never an "internal error")."""

    def __init__(self, reason: str, advice: str = "") -> None:
        super().__init__(reason)
        self.reason, self.advice = reason, advice


def _dedent(code: str) -> str:
    return textwrap.dedent(code).lstrip("\n")


@dataclass(frozen=True)
class Valid:
    """An example source the codemod leaves alone, written as an indented triple-quoted block (as Fixit's)."""

    code: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "code", _dedent(self.code))


@dataclass(frozen=True)
class Invalid:
    """An example source with its findings marked (examples.py) and the text the codemod turns it into."""

    code: str
    expected: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "code", _dedent(self.code))
        object.__setattr__(self, "expected", _dedent(self.expected))


class Codemod:
    """Base class: subclasses set `rules` and implement `propose`; the registry finds them."""

    rules: ClassVar[tuple[str, ...]] = ()
    # Rules this codemod also fixes when they are another finding's cause (`Finding.cause`): a recompile-limit
    # finding (TM250) whose failing guard is a float lr goes to the tensor-lr fix.
    causes: ClassVar[tuple[str, ...]] = ()
    # PyTorch graph-break ids (GB4347) this codemod fixes in findings of a rule that has no codemod of its own (a
    # generic TM199): one shape of a catch-all rule, without making the rule's page the shape's.
    gb_ids: ClassVar[tuple[str, ...]] = ()
    name: ClassVar[str] = ""
    # The rules whose codemods this one may hand a finding to (`Delegate`), resolved by the engine.
    delegates_to: ClassVar[tuple[str, ...]] = ()
    # Asked for any finding its own rule's codemod leaves unfixed, and made the last fallback of a source fix: a fix
    # that is no rule's own (compile_config/nested.py). Listed by registry.last_resorts(), not by rule.
    last_resort: ClassVar[bool] = False
    # The order last resorts are asked in, lowest first: a local source change before a global setting.
    last_resort_order: ClassVar[int] = 50
    # Inline examples, checked by tests/unit/test_codemod_examples.py. Sources mark findings with comments
    # (see examples.py): INVALID sources become their expected text; VALID sources propose nothing. The docs
    # (docs/rules/) render them, so every example shown is a tested one.
    INVALID: ClassVar[Sequence[Invalid]] = ()
    VALID: ClassVar[Sequence[Valid]] = ()

    def propose(self, finding: Finding, ctx: Context) -> Answer:
        raise NotImplementedError

    @classmethod
    def doc_sections(cls) -> dict[str, str]:
        """The docstring split at its headings (`What it does:` ...), by the parser that reads `Rule.doc` too."""
        return rules.doc_sections(cls.__doc__)
