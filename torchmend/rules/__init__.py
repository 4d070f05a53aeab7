"""The rule catalogue: one stable code per kind of problem `scan` can report.

Families: TM1xx graph breaks, TM2xx recompilations, TM9xx informational (nothing to fix in your code).
Codes are stable: never reuse or renumber one (tests/unit/test_rules_and_docs.py checks they are unique).
Codemods (torchmend/codemods/) key their fixes on these codes.

Every rule is documented under the five HEADINGS: a rule that a codemod fixes by the codemod's class docstring,
any other by its `doc` here, in the same shape (`What it does:` on a line of its own, the text indented below).
scripts/gen_docs.py turns both into docs/rules/; `doc_sections` is the one parser of that shape.
"""

from __future__ import annotations

import inspect
import textwrap
from dataclasses import dataclass

from torchmend.model import Kind
from torchmend.rules import docs
from torchmend.rules.advice import GB_ADVICE, gb_advice  # noqa: F401 (rules.gb_advice, as callers use it)

GRAPH_BREAK, RECOMPILE, RECOMPILE_LIMIT = Kind.GRAPH_BREAK, Kind.RECOMPILE, Kind.RECOMPILE_LIMIT
SCRIPT_FAILURE, SUPPRESSION, SOURCE = Kind.SCRIPT_FAILURE, Kind.SUPPRESSION, Kind.SOURCE

HEADINGS = ("What it does", "Why is this bad", "Example", "Fix", "Fix safety")


def doc_sections(doc: str | None) -> dict[str, str]:
    """A rule's documentation (a codemod docstring or `Rule.doc`) split at its headings (`What it does:` ...),
    each section's text dedented. Text before the first heading (a docstring's summary) is dropped."""
    sections: dict[str, list[str]] = {}
    current = None
    for line in inspect.cleandoc(doc or "").splitlines():
        head = line.strip().rstrip(":")
        if head in HEADINGS and line.rstrip().endswith(":") and not line[:1].isspace():
            current = head
            sections[current] = []
        elif current:
            sections[current].append(line)
    return {k: textwrap.dedent("\n".join(v)).strip() for k, v in sections.items()}


@dataclass(frozen=True)
class Rule:
    code: str
    kind: Kind
    name: str  # kebab-case, for humans and --select
    title: str  # one line, shown in reports
    informational: bool = False
    advice: str = ""  # what to do by hand when no codemod fixes it
    doc: str = ""  # the five HEADINGS, for a rule no codemod fixes (a codemod's docstring documents the others)


RULES: tuple[Rule, ...] = (
    Rule("TM101", GRAPH_BREAK, "print-in-compiled-code", "print() inside compiled code"),
    Rule("TM102", GRAPH_BREAK, "logging-in-compiled-code", "logging call inside compiled code"),
    Rule("TM103", GRAPH_BREAK, "data-dependent-branch", "Python `if`/`while` on a tensor value"),
    Rule(
        "TM104", GRAPH_BREAK, "tensor-to-python-scalar", "tensor turned into a Python number (.item(), float(), int())"
    ),
    Rule("TM108", GRAPH_BREAK, "tensor-assert", "`assert` on a tensor value inside compiled code"),
    Rule("TM109", GRAPH_BREAK, "requires-grad-in-compiled-code", "`requires_grad` turned on inside compiled code"),
    Rule(
        "TM110",
        GRAPH_BREAK,
        "host-random-in-compiled-code",
        "NumPy or Python random draw inside compiled code",
        advice="decorate the helper that draws the random numbers with @torch.compiler.disable, so it runs eagerly "
        "with NumPy's generator, exactly as without compile (one break at its call); or make the random values "
        "outside the compiled model (data collator or training loop) and pass them in as tensors",
    ),
    Rule(
        "TM105",
        GRAPH_BREAK,
        "call-to-disabled-function",
        "call to a function that torch.compile skips",
        advice="remove the torch.compiler.disable / skip on the called function if dynamo can trace it (keep it on "
        "a helper that draws NumPy or Python random numbers: traced, those come from torch's generator and break "
        "the graph more, TM110), or move the call out of the compiled region",
        doc=docs.TM105,
    ),
    Rule(
        "TM111",
        GRAPH_BREAK,
        "data-dependent-operator",
        "operator whose output depends on tensor data (nonzero, unique, .item() in an op)",
        advice="wrap the operator in a custom op with a fake (meta) implementation, or move it out of the compiled "
        "code",
    ),
    Rule(
        "TM113",
        GRAPH_BREAK,
        "compile-stops-at-fsdp-hooks",
        "torch.compile of a fully_shard'ed model stops at FSDP2's hooks",
        advice="compile each fully_shard'ed block after sharding instead of the whole model: "
        "`for block in model.layers: block.compile()` in place of `model = torch.compile(model)`",
    ),
    Rule(
        "TM114",
        GRAPH_BREAK,
        "numpy-on-python-numbers",
        "NumPy arithmetic on Python numbers (shapes, lengths) inside compiled code",
        advice="compute the number with Python's `math` module and builtins (`math.ceil(math.log(L))`, `max(a, b)`, "
        "`math.prod(x.shape[1:])`) instead of NumPy: dynamo traces those on Python ints and keeps one graph",
    ),
    Rule(
        "TM199",
        GRAPH_BREAK,
        "other-graph-break",
        "graph break",
        advice="see the PyTorch docs link in the finding",
        doc=docs.TM199,
    ),
    Rule("TM201", RECOMPILE, "module-scalar-attribute", "int/float attribute of an nn.Module that changes"),
    Rule("TM202", RECOMPILE, "changing-scalar-argument", "Python number argument that changes between calls"),
    Rule(
        "TM203",
        RECOMPILE,
        "optimizer-float-hyperparameter",
        "optimizer hyperparameter (lr, betas, ...) kept as a float",
    ),
    Rule(
        "TM204", RECOMPILE, "changing-input-shape", "input shape that changes between calls (batch or sequence length)"
    ),
    Rule("TM205", RECOMPILE, "scalar-across-graph-break", "Python number carried across a graph break"),
    Rule("TM206", RECOMPILE, "global-scalar", "global or closure Python number that changes"),
    Rule(
        "TM207",
        RECOMPILE,
        "changing-tensor-property",
        "tensor dtype, device, requires_grad or layout that changes",
        advice="keep dtype, device and requires_grad of the inputs the same between calls",
        doc=docs.TM207,
    ),
    Rule(
        "TM209",
        RECOMPILE,
        "setting-written-in-forward",
        "module or config setting (not a tensor) written inside compiled forward",
        advice="set the value once before compiling (e.g. `model.config.problem_type = "
        '"single_label_classification"`, or `config.loss_type` for transformers\' loss), so forward only reads it',
        doc=docs.TM209,
    ),
    Rule(
        "TM299",
        RECOMPILE,
        "other-recompile",
        "recompilation",
        advice="see the guard in the finding; TORCH_LOGS=recompiles shows every guard failure",
        doc=docs.TM299,
    ),
    Rule("TM250", RECOMPILE_LIMIT, "recompile-limit-reached", "recompile limit reached: the function now runs eagerly"),
    Rule(
        "TM901",
        GRAPH_BREAK,
        "library-deliberate-break",
        "PyTorch's own deliberate graph break",
        informational=True,
        doc=docs.TM901,
    ),
    Rule(
        "TM902",
        RECOMPILE,
        "one-time-library-recompile",
        "one-time recompile inside a library (e.g. state set-up)",
        informational=True,
        doc=docs.TM902,
    ),
    Rule(
        "TM903",
        SUPPRESSION,
        "unused-suppression",
        "suppression comment that suppressed nothing",
        informational=True,
        doc=docs.TM903,
    ),
    Rule(
        "TM904",
        SOURCE,
        "unparsable-file",
        "a Python file lint cannot parse: nothing in it was checked",
        informational=True,
        advice="fix the syntax error, or leave the file out of the paths given to lint",
        doc=docs.TM904,
    ),
    Rule(
        "TM208",
        RECOMPILE,
        "tensor-cached-on-module",
        "tensor cached on an nn.Module and rebuilt in forward (`is None` or size check)",
        advice="compute the tensor as a local in forward (it is part of the graph then), or register it as a "
        "buffer in __init__ when its shape is fixed; for an nn.Transformer* causal mask also pass "
        "is_causal=True",
    ),
    Rule(
        "TM106",
        GRAPH_BREAK,
        "function-never-compiles",
        "compiled function the backend cannot compile: it runs eagerly (WON'T CONVERT)",
        advice="change the line the backend failed on (a 0-d tensor used as an index: index with `t.view(1)` or "
        "`index_select`, or pass a Python int); the reason says whether the script's own backend fails too",
    ),
    Rule(
        "TM112",
        SCRIPT_FAILURE,
        "dynamo-crashed-in-your-code",
        "torch.compile crashed tracing a call in compiled code (InternalTorchDynamoError)",
        advice="decorate the helper dynamo crashes in with @torch.compiler.disable where it is defined, or move the "
        "call into such a helper defined outside the compiled function",
        doc=docs.TM112,
    ),
    Rule(
        "TM107",
        SCRIPT_FAILURE,
        "compiled-model-saved",
        "a compiled model saved as if it were the plain module: its checkpoint does not load",
        advice="save model._orig_mod.state_dict() (or the uncompiled module's state_dict()), or compile in "
        "place with model.compile(), which keeps the module and its keys",
    ),
)
RULES = tuple(sorted(RULES, key=lambda r: r.code))  # listed by code, whatever order they were added in

BY_CODE: dict[str, Rule] = {r.code: r for r in RULES}

# TM110's draws: a call whose qualified name starts with one of these (the profiler's classifier, lint, the codemod)
HOST_RANDOM_MODULES = ("numpy.random.", "random.")

# The codemod (its `name`) that fixes each rule, so `torchmend rules` can list them without importing the
# codemods (libcst); tests/unit/test_rules_and_docs.py checks that the registry agrees.
FIXES: dict[str, str] = {
    "TM101": "gate-print",
    "TM102": "gate-logging",
    "TM103": "branch-to-where",
    "TM104": "keep-scalar-tensor",
    "TM106": "capture-for-backend",
    "TM107": "save-plain-module",
    "TM108": "assert-in-graph",
    "TM109": "gate-requires-grad",
    "TM110": "eager-host-random",
    "TM111": "capture-data-dependent-op",
    "TM113": "compile-fsdp-blocks",
    "TM114": "numpy-scalar-to-math",
    "TM201": "module-scalar-to-buffer",
    "TM202": "scalar-argument-to-tensor",
    "TM203": "tensor-learning-rate",
    "TM204": "mark-dynamic",
    "TM205": "keep-carried-scalar-tensor",
    "TM206": "global-scalar-to-tensor",
    "TM208": "cached-tensor-to-local",
    "TM250": "recompile-limit-module-scalar",
}


def is_code_prefix(value: str) -> bool:
    """Whether `value` is a rule code or a prefix of one, as --select/--ignore take them (TM, TM1, TM10, TM101)."""
    return len(value) >= 2 and any(r.code.startswith(value) for r in RULES)


def closest_codes(value: str) -> list[str]:
    """The known codes or families a mistyped --select/--ignore value most likely meant (upper case first)."""
    import difflib

    if is_code_prefix(value.strip().upper()):
        return [value.strip().upper()]
    names = [r.code for r in RULES] + sorted({r.code[:3] for r in RULES})
    return difflib.get_close_matches(value.strip().upper(), names, n=3, cutoff=0.6)
