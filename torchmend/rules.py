"""The rule catalogue: one stable code per kind of problem `scan` can report.

Families: TM1xx graph breaks, TM2xx recompilations, TM9xx informational (nothing to fix in your code).
Codes are stable: never reuse or renumber one (tests/test_rules.py checks they are unique).
Codemods (torchmend/codemods/) key their fixes on these codes.
"""

from __future__ import annotations

from dataclasses import dataclass

from torchmend.model import Kind

GRAPH_BREAK, RECOMPILE, RECOMPILE_LIMIT = Kind.GRAPH_BREAK, Kind.RECOMPILE, Kind.RECOMPILE_LIMIT


@dataclass(frozen=True)
class Rule:
    code: str
    kind: Kind
    name: str  # kebab-case, for humans and --select
    title: str  # one line, shown in reports
    informational: bool = False
    advice: str = ""  # what to do by hand when no codemod fixes it


RULES: tuple[Rule, ...] = (
    Rule("TM101", GRAPH_BREAK, "print-in-compiled-code", "print() inside compiled code"),
    Rule("TM102", GRAPH_BREAK, "logging-in-compiled-code", "logging call inside compiled code"),
    Rule("TM103", GRAPH_BREAK, "data-dependent-branch", "Python `if`/`while` on a tensor value"),
    Rule("TM104", GRAPH_BREAK, "tensor-to-python-scalar", "tensor turned into a Python number (.item(), float(), int())"),
    Rule("TM105", GRAPH_BREAK, "call-to-disabled-function", "call to a function that torch.compile skips",
         advice="remove the torch.compiler.disable / skip on the called function, or move the call out of the "
                "compiled region"),
    Rule("TM199", GRAPH_BREAK, "other-graph-break", "graph break", advice="see the PyTorch docs link in the finding"),
    Rule("TM201", RECOMPILE, "module-scalar-attribute", "int/float attribute of an nn.Module that changes"),
    Rule("TM202", RECOMPILE, "changing-scalar-argument", "Python number argument that changes between calls"),
    Rule("TM203", RECOMPILE, "optimizer-float-hyperparameter", "optimizer hyperparameter (lr, betas, ...) kept as a float"),
    Rule("TM204", RECOMPILE, "changing-input-shape", "input shape that changes between calls (batch or sequence length)"),
    Rule("TM205", RECOMPILE, "scalar-across-graph-break", "Python number carried across a graph break"),
    Rule("TM206", RECOMPILE, "global-scalar", "global or closure Python number that changes"),
    Rule("TM207", RECOMPILE, "changing-tensor-property", "tensor dtype, device, requires_grad or layout that changes",
         advice="keep dtype, device and requires_grad of the inputs the same between calls"),
    Rule("TM299", RECOMPILE, "other-recompile", "recompilation",
         advice="see the guard in the finding; TORCH_LOGS=recompiles shows every guard failure"),
    Rule("TM250", RECOMPILE_LIMIT, "recompile-limit-reached", "recompile limit reached: the function now runs eagerly"),
    Rule("TM901", GRAPH_BREAK, "library-deliberate-break", "PyTorch's own deliberate graph break", informational=True),
    Rule("TM902", RECOMPILE, "one-time-library-recompile", "one-time recompile inside a library (e.g. state set-up)",
         informational=True),
    Rule("TM208", RECOMPILE, "tensor-cached-on-module",
         "tensor cached on an nn.Module and rebuilt in forward (`is None` or size check)",
         advice="compute the tensor as a local in forward (it is part of the graph then), or register it as a "
                "buffer in __init__ when its shape is fixed; for an nn.Transformer* causal mask also pass "
                "is_causal=True"),
)

BY_CODE: dict[str, Rule] = {r.code: r for r in RULES}

# The codemod (its `name`) that fixes each rule, so `torchmend rules` can list them without importing the
# codemods (libcst); tests/test_rules_and_docs.py checks that the registry agrees.
FIXES: dict[str, str] = {
    "TM101": "gate-print", "TM102": "gate-logging", "TM103": "branch-to-where", "TM104": "keep-scalar-tensor",
    "TM201": "module-scalar-to-buffer", "TM202": "scalar-argument-to-tensor", "TM203": "tensor-learning-rate",
    "TM204": "mark-dynamic", "TM205": "keep-carried-scalar-tensor", "TM206": "global-scalar-to-tensor",
    "TM208": "cached-tensor-to-local", "TM250": "recompile-limit-module-scalar",
}


def select(codes: list[str], select: list[str] | None, ignore: list[str] | None) -> list[str]:
    """Codes kept by --select/--ignore prefixes (e.g. --select TM1 --ignore TM104)."""
    kept = [c for c in codes if not select or any(c.startswith(p) for p in select)]
    return [c for c in kept if not ignore or not any(c.startswith(p) for p in ignore)]
