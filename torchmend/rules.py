"""The rule catalogue: one stable code per kind of problem `scan` can report.

Families: TM1xx graph breaks, TM2xx recompilations, TM9xx informational (nothing to fix in your code).
Codes are stable: never reuse or renumber one (tests/test_rules.py checks they are unique).
Codemods (torchmend/codemods/) key their fixes on these codes.
"""

from __future__ import annotations

from dataclasses import dataclass

from torchmend.model import Kind

GRAPH_BREAK, RECOMPILE, RECOMPILE_LIMIT = Kind.GRAPH_BREAK, Kind.RECOMPILE, Kind.RECOMPILE_LIMIT
SCRIPT_FAILURE = Kind.SCRIPT_FAILURE


@dataclass(frozen=True)
class Rule:
    code: str
    kind: Kind
    name: str  # kebab-case, for humans and --select
    title: str  # one line, shown in reports
    informational: bool = False
    advice: str = ""  # what to do by hand when no codemod fixes it
    doc: str = ""  # the rule's page: "What it does:", "Why is this bad:", "Example:", "Fix:", "Fix safety:"


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
    Rule("TM106", GRAPH_BREAK, "function-never-compiles",
         "compiled function the backend cannot compile: it runs eagerly (WON'T CONVERT)",
         advice="change the line the backend failed on (a 0-d tensor used as an index: index with `t.view(1)` or "
                "`index_select`, or pass a Python int); the reason says whether the script's own backend fails too",
         doc="""
What it does:
    Finds a compiled function that dynamo gave up on: the backend compiler raised while compiling its graph
    ("WON'T CONVERT"), so no graph is kept and the function runs eagerly on every call. The finding sits at
    the line the backend failed on, not at the `def`.
Why is this bad:
    Nothing of the function is compiled, silently: the run looks normal but the speed-up never comes. When
    the detection backend (`--backend`) is not the script's own, the scan hands the failing graph to the
    script's backend too and says whether the two disagree.
Example:
    def step(self, model_output, timestep, sample):      # timestep is a 0-d tensor
        alpha_prod_t = self.alphas_cumprod[timestep]      # AOTAutograd: aten._local_scalar_dense
Fix:
    alpha_prod_t = self.alphas_cumprod[timestep.view(1)]  # or .index_select(0, timestep.view(1))
    Or pass the timestep as a Python int where that is what the code means.
Fix safety:
    Manual. Indexing with a one-element tensor returns a one-element tensor, not a 0-d one: check the
    shapes that broadcasting gives downstream.
"""),
    Rule("TM107", SCRIPT_FAILURE, "compiled-model-saved",
         "the script failed on a compiled model saved as if it were the plain module",
         advice="save model._orig_mod.state_dict() (or the uncompiled module's state_dict()), or compile in "
                "place with model.compile(), which keeps the module and its keys",
         doc="""
What it does:
    Recognises a script that torch.compile itself broke: `torch.save(model)` of a compiled model pickles
    the OptimizedModule wrapper, which `torch.load(weights_only=True)` (the default since torch 2.6)
    refuses to load; and a compiled model's `state_dict()` has every key prefixed with `_orig_mod.`, so
    loading it into the plain module fails with unexpected keys. The finding sits at the failing line.
Why is this bad:
    The run dies after training: the checkpoint cannot be loaded without trusting arbitrary pickles or
    renaming keys, and every tool that reads the checkpoint has to know about the wrapper.
Example:
    model = torch.compile(model)
    torch.save(model, path)
    restored = torch.load(path, weights_only=True)   # Unsupported global: OptimizedModule
Fix:
    torch.save(model._orig_mod.state_dict(), path)   # or keep the uncompiled module and save its state_dict
    Or call model.compile() instead of model = torch.compile(model): the module stays itself, keys unchanged.
Fix safety:
    Manual. The loader must then build the module and load_state_dict() into it.
"""),
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
