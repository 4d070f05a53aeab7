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


# The documentation of the rules no codemod fixes (the codemods' docstrings document the others). Same shape as a
# codemod docstring: each heading on a line of its own ending in a colon, its text indented below. Example is code;
# in the other sections a block indented four more spaces is code.

_TM105 = """
What it does:
    A graph break where compiled code calls a function that torch.compile was told to skip: one wrapped in
    `torch.compiler.disable` (or `torch._dynamo.disable`), or another call PyTorch reports as skipped (for
    example GB0098, "Skip calling `torch.compiler.disable()`d function"). The finding is at the calling line.
    Also a `torch.compiler.disable(fn)` *called* inside the compiled region (GB0376 / GB0377 from torch 2.14:
    `disable` works as a decorator or wrapper applied where `fn` is defined, outside the compiled code), and a
    clock read such as `time.time()` or `time.perf_counter()` (GB0007, "marked as skipped", up to torch 2.14;
    GB9193, "Call to a time function", from 2.15): the break ids are read per release
    (docs/graph-break-ids.md), so the finding is the same on each.

Why is this bad:
    Dynamo does not trace into a skipped function: it ends the graph before the call, runs the function in
    Python, and starts a new graph after it, on every call. The compiler cannot optimise across the call.

Example:
    @torch.compiler.disable
    def log_stats(t):
        return t.mean().item()

    @torch.compile
    def step(x):
        y = x * 2
        log_stats(y)  # TM105: the graph breaks here
        return y + 1

Fix:
    No codemod: `torchmend fix` lists the finding with this advice and changes nothing. By hand, remove the
    `torch.compiler.disable` (or skip) from the called function if dynamo can trace it, or move the call out
    of the compiled region:

        @torch.compile
        def step(x):
            y = x * 2
            return y, y + 1

        y, out = step(x)
        log_stats(y)  # eager, after the compiled call

Fix safety:
    No automatic fix. A function is often disabled for a reason: traced, it may break or recompile inside
    instead, and moving the call changes when it runs. `torchmend verify SCRIPT --patch FILE` checks a hand
    fix (same seed and steps before and after: counts, times, losses and final weights).
"""

_TM199 = """
What it does:
    Any graph break that no more specific rule covers: not a print (TM101), a logging call (TM102), a
    data-dependent branch (TM103), a tensor turned into a Python number (TM104), a call to a skipped function
    (TM105) or an operator of data-dependent shape (TM111); a deliberate break inside a library is TM901. The finding carries PyTorch's own account: the GB id,
    the break type, its explanation, and the link to PyTorch's page for that break (`docs_url` in the JSON).

Why is this bad:
    At a graph break dynamo ends the graph, runs the code it cannot trace in Python, and compiles what follows
    as a separate graph: every call pays for the switch, and the compiler cannot optimise across it.

Example:
    @torch.compile
    def step(x):
        y = x * 2
        torch._dynamo.graph_break()  # TM199: GB0025, Call to `torch._dynamo.graph_break()`
        return y + 1

Fix:
    No codemod: `torchmend fix` lists the finding and changes nothing. Follow the PyTorch docs link in the
    finding; it explains that break type and the usual ways around it.

Fix safety:
    No automatic fix. `torchmend verify SCRIPT --patch FILE` checks a hand fix (same seed and steps before and
    after: counts, times, losses and final weights).
"""

_TM112 = """
What it does:
    Recognises a script that dynamo itself crashed on: while tracing a call in compiled code it raised an error of
    its own (`InternalTorchDynamoError`), which ends the run. The finding is at the innermost line of your project
    that dynamo was tracing, names the compiled function and the calls in between, and says what dynamo raised
    inside. A known case: on torch 2.13 (and 2.12, by the upstream report) dynamo traces into
    `inspect.getfullargspec` of a bound method and crashes (`'method' object has no attribute '__dict__'`), which
    is what a compiled Lightning `training_step` that calls `self.log(...)` does (fixtures/dynamo_crash is the same
    shape without Lightning).

Why is this bad:
    The run dies at the first compiled call: no graph, nothing trained. The crash is a bug of dynamo's, not of
    your code (the same code runs eagerly, and torch 2.14 compiles it), so the traceback points into torch and says
    little about what to change.

Example:
    def step_takes(step, name):
        return name in inspect.getfullargspec(inspect.unwrap(step)).args  # TM112: InternalTorchDynamoError

    class LitRegressor(nn.Module):
        def log(self, name, value):
            if step_takes(self.training_step, "dataloader_iter"):
                name = f"{name}/iter"
            self.logged[name] = value.detach()

        def training_step(self, batch, batch_idx):
            loss = nn.functional.mse_loss(self.net(batch[0]), batch[1])
            self.log("train_loss", loss)
            return loss

    module.training_step = torch.compile(module.training_step)

Fix:
    No codemod: `torchmend fix` lists the finding with this advice and changes nothing. Keep dynamo out of the
    call it crashes on. When the line is in a helper the compiled function calls, decorate that helper with
    `torch.compiler.disable` where it is defined (a decorator at the definition, not a call inside compiled
    code, which is TM105):

        @torch.compiler.disable
        def step_takes(step, name):
            return name in inspect.getfullargspec(inspect.unwrap(step)).args

    When the line is in the compiled function itself (your `self.log(...)`, with Lightning's code below it),
    move the call into such a helper, defined outside the compiled function, and call the helper there. Dynamo
    then calls it eagerly, with one graph break at the call.

Fix safety:
    Manual. The helper runs eagerly, as it did without compile: on the fixture the losses of the decorated
    version match the eager run's. `torchmend verify SCRIPT --patch FILE` checks a hand fix.
"""

_TM209 = """
What it does:
    Recognises a setting of a module or of its config (a string, a flag, None: not a tensor, not a number that
    keeps changing) that forward itself writes, so the guard torch.compile put on it fails once the write has run.
    The shape transformers' classification heads have: `if self.config.problem_type is None:` picks
    `"regression"`, `"single_label_classification"` or `"multi_label_classification"` from the labels on the
    first call and stores it in the config. scan files the recompile at the line that reads the setting; lint
    finds the write in compiled code.

Why is this bad:
    The first compiled call traces the branch that writes the setting; the next call finds it changed and compiles
    forward again (one recompile per compiled frame). It is one-time, but it is a whole second compile of the model,
    and a config shared by several models (or reset between runs) pays it again.

Example:
    def forward(self, x, labels):
        logits = self.head(x)
        if self.config.problem_type is None:  # TM209: guard failed: self.config.problem_type is None
            self.config.problem_type = "single_label_classification"
        ...

Fix:
    No codemod: `torchmend fix` lists the finding with this advice and changes nothing. Set the value once,
    before compiling, so forward only reads it:

        config.problem_type = "single_label_classification"  # or pass problem_type= to the config
        model = torch.compile(Model(config))

    transformers' `loss_type` is the same: set `config.loss_type` (or `model.loss_type`) to a known value (for
    example "ForCausalLM") before compiling, rather than letting the first call pick it (and warn).

Fix safety:
    Manual. The value set by hand is the one the first call would have chosen: check it matches your labels
    (integer class ids: single-label; floats with one column per label: multi-label). `torchmend verify SCRIPT
    --patch FILE` checks a hand fix.
"""

_TM207 = """
What it does:
    A recompile whose failing guard is on a tensor property other than its size: dtype, device, requires_grad,
    stride or layout (`tensor 'x' dtype mismatch. expected Float, actual Double`). Such guards name no source
    line, so the finding is at the call site: your line that called the compiled function. A changing size is
    TM204; a tensor cached on a module, TM208; a one-time recompile of this kind inside a library, TM902.

Why is this bad:
    A compiled graph is specialised to the dtype, device and autograd state of its inputs. A call with another
    one fails the guard and compiles a new graph; each new combination costs a compile, and enough of them
    reach the recompile limit (TM250), after which the function runs eagerly. A recompile seen once is labelled
    `once` (severity note); one that repeats, `storm` or `limit` (severity fix).

Example:
    @torch.compile
    def step(x):
        return x * 2 + 1

    for i in range(4):
        x = torch.randn(4, dtype=torch.float32 if i % 2 == 0 else torch.float64)
        step(x)  # TM207: tensor 'x' dtype mismatch

Fix:
    No codemod (which dtype or device is right is a decision about your program): `torchmend fix` lists the
    finding with this advice and changes nothing. Keep the dtype, device and requires_grad of the inputs the
    same between calls, for example by converting once where the data is made:

        step(x.to(torch.float32))  # the same dtype on every call

Fix safety:
    No automatic fix. Converting an input changes the precision or the device of the computation; `torchmend
    verify SCRIPT --patch FILE` compares losses and final weights before and after a hand fix.
"""

_TM299 = """
What it does:
    A recompile whose failing guard no more specific rule covers: a truthiness guard (`not self.state`: a dict
    or list that was empty on the first call and has been filled since, such as an optimizer's state created on
    its first step), or a guard torchmend cannot attribute to a number, a shape or a tensor property. The
    finding shows the guard. One that happens once inside a library is reported as TM902 instead.

Why is this bad:
    Each failing guard compiles the function again. Once (state set up on the first call) costs one extra
    compile: labelled `once`, severity note. A guard that keeps failing recompiles on every new value, up to
    the recompile limit (TM250), after which the function runs eagerly.

Example:
    class Ema:
        def __init__(self):
            self.state = {}

        @torch.compile
        def update(self, x):
            if not self.state:  # TM299 once: guard failed: not self.state
                self.state["avg"] = torch.zeros_like(x)
            self.state["avg"].mul_(0.9).add_(x, alpha=0.1)

Fix:
    No codemod: `torchmend fix` lists the finding with this advice and changes nothing. Read the guard in the
    finding; `TORCH_LOGS=recompiles python SCRIPT` prints every guard failure as it happens. A one-time
    recompile like the one above usually needs nothing. For one that repeats, keep the guarded value the same
    between calls: create the state before the first compiled call, pass changing numbers as tensors.

Fix safety:
    No automatic fix; torchmend changes nothing.
"""

_TM901 = """
What it does:
    A graph break inside a library (a file outside your project) that the library asks for on purpose, with
    `torch._dynamo.graph_break()`: for example the two breaks around every optimizer step in
    torch/optim/optimizer.py. The finding names the frame of yours that reached it (here, the `opt.step()`
    line). Severity info: `scan --fail-on-findings` does not count it.

Why is this bad:
    It is not: the library breaks there by design (torch/optim/optimizer.py says why, next to the break), and
    torchmend never edits files outside your project. It is reported so that the graph-break count of the
    run adds up.

Example:
    model = nn.Linear(4, 1)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)

    @torch.compile
    def optimizer_step():
        opt.step()  # TM901 (2x), in torch/optim/optimizer.py, reached from this line

Fix:
    Nothing to change: `torchmend fix` skips informational findings ("informational: nothing to change in your
    code").

Fix safety:
    Nothing is changed.
"""

_TM902 = """
What it does:
    A recompile that happened once, inside a library, whose guard would otherwise be TM207 (a tensor property)
    or TM299 (another guard): typically a library setting up its state on the first call, such as an optimizer
    creating its per-parameter state on its first step. Severity info.

Why is this bad:
    Mostly it is not: one extra compile at the start of the run, in code that is not yours to edit (torchmend
    never edits libraries). It is reported so that the recompile count of the run adds up. A library recompile
    that repeats keeps its TM2xx rule, with severity fix and the frame of yours that reached it.

Example:
    # an optimizer installed as a library (site-packages/...), compiled by your training script
    class SignMomentum(torch.optim.Optimizer):
        @torch.no_grad()
        def step(self):
            for group in self.param_groups:
                for p in group["params"]:
                    state = self.state[p]  # empty on the first step, filled after: recompiles once
                    if "buf" not in state:
                        state["buf"] = torch.zeros_like(p)

    # The same class in your own project reports TM299 `once` at that line (fixtures/scan/own_optimizer).

Fix:
    Nothing to change: `torchmend fix` skips informational findings ("informational: nothing to change in your
    code").

Fix safety:
    Nothing is changed.
"""

_TM903 = """
What it does:
    A suppression comment (`# torchmend: ignore[TM101]`, or a bare `# torchmend: ignore`) that suppressed
    nothing in this run, or that names a code that is no rule. Only codes the run could have reported count:
    a code left out by `--select`/`--ignore` or by the configuration's `per-file-ignores` is not reported.
    From `scan` and `fix` it is a hint: a run sees only the code that ran and compiled, so a line that did not
    run (or a finding that needs more steps) looks unused too. Severity info. See docs/suppressions.md.

Why is this bad:
    A stale comment hides the next real finding on that line: after a fix, or a refactor that moved the code,
    the comment silences whatever torchmend reports there later.

Example:
    @torch.compile
    def step(x):
        y = x * 2  # torchmend: ignore[TM101]   <- TM903: nothing on this line is a print
        return y + 1

Fix:
    No codemod: delete the comment, or the codes in it that suppress nothing. `torchmend lint --add-ignore`
    writes comments for what remains.

Fix safety:
    Nothing is changed.
"""

_TM904 = """
What it does:
    `torchmend lint` met a Python file it cannot parse (a syntax error, or bytes that are not text in the file's
    encoding). The finding is at the line the parser stopped on. Lint goes on with the other files.

Why is this bad:
    Nothing in that file was checked: a compiled function in it, or one that it calls, may hide graph breaks and
    recompiles that lint cannot see. Python would refuse to import it too.

Example:
    def forward(self, x)
        return self.fc(x)  # TM904: expected ':'

Fix:
    No codemod: fix the syntax error (or exclude the file, for example a template that is not Python), then run
    lint again.

Fix safety:
    Nothing is changed.
"""

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
        doc=_TM105,
    ),
    Rule(
        "TM111",
        GRAPH_BREAK,
        "data-dependent-operator",
        "operator whose output depends on tensor data (nonzero, unique, .item() in an op)",
    ),
    Rule(
        "TM113",
        GRAPH_BREAK,
        "compile-stops-at-fsdp-hooks",
        "torch.compile of a fully_shard'ed model stops at FSDP2's hooks",
        advice="compile each fully_shard'ed block after sharding (`for block in model.layers: block.compile()`) "
        "instead of the whole model",
    ),
    Rule(
        "TM199",
        GRAPH_BREAK,
        "other-graph-break",
        "graph break",
        advice="see the PyTorch docs link in the finding",
        doc=_TM199,
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
        doc=_TM207,
    ),
    Rule(
        "TM209",
        RECOMPILE,
        "setting-written-in-forward",
        "module or config setting (not a tensor) written inside compiled forward",
        advice="set the value once before compiling (e.g. `model.config.problem_type = "
        '"single_label_classification"`, or `config.loss_type` for transformers\' loss), so forward only reads it',
        doc=_TM209,
    ),
    Rule(
        "TM299",
        RECOMPILE,
        "other-recompile",
        "recompilation",
        advice="see the guard in the finding; TORCH_LOGS=recompiles shows every guard failure",
        doc=_TM299,
    ),
    Rule("TM250", RECOMPILE_LIMIT, "recompile-limit-reached", "recompile limit reached: the function now runs eagerly"),
    Rule(
        "TM901",
        GRAPH_BREAK,
        "library-deliberate-break",
        "PyTorch's own deliberate graph break",
        informational=True,
        doc=_TM901,
    ),
    Rule(
        "TM902",
        RECOMPILE,
        "one-time-library-recompile",
        "one-time recompile inside a library (e.g. state set-up)",
        informational=True,
        doc=_TM902,
    ),
    Rule(
        "TM903",
        SUPPRESSION,
        "unused-suppression",
        "suppression comment that suppressed nothing",
        informational=True,
        doc=_TM903,
    ),
    Rule(
        "TM904",
        SOURCE,
        "unparsable-file",
        "a Python file lint cannot parse: nothing in it was checked",
        informational=True,
        advice="fix the syntax error, or leave the file out of the paths given to lint",
        doc=_TM904,
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
        doc=_TM112,
    ),
    Rule(
        "TM107",
        SCRIPT_FAILURE,
        "compiled-model-saved",
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
""",
    ),
)
RULES = tuple(sorted(RULES, key=lambda r: r.code))  # listed by code, whatever order they were added in

BY_CODE: dict[str, Rule] = {r.code: r for r in RULES}

# What to do by hand for a graph break PyTorch names by its GB id, when no codemod fixes the finding's rule: more
# precise than the rule's advice for shapes real model code has (issue 26).
GB_ADVICE: dict[str, str] = {
    "GB0264": (
        "a `torch.nn.Parameter` (or a module such as nn.Linear, which makes them) is built while forward runs, for "
        "example when a model switches its attention implementation on the fly; build it in `__init__` (or once, "
        "before torch.compile) and only use it in forward: a parameter made in forward is also new on every call "
        "and the optimizer never sees it"
    ),
    # By the library function the break is in, where one id has several shapes: `Module._apply` (a submodule cast
    # or moved in forward) and a module's `__init__` (a module built in forward).
    "GB0264 _apply": (
        "forward casts or moves a submodule (`self.m = self.m.to(dtype)`, `.float()`): where that changes a parameter, "
        "nn.Module._apply builds a new nn.Parameter for it, which dynamo cannot trace; cast the model once before "
        "torch.compile (`model.to(dtype)`) and drop the line from forward, or gate it with "
        "`if not torch.compiler.is_compiling():` when the model is already cast"
    ),
    "GB0264 __init__": (
        "forward builds a module (nn.Linear and the like make new nn.Parameters), for example when a model switches "
        "its attention implementation on the fly (a `set_attention_type(...)` call in forward): choose that path "
        "before torch.compile, by calling the switch once on the model or setting the config value that selects it "
        "(e.g. `attention_type`), so that forward finds the layers built; a parameter made in forward is also new "
        "on every call and the optimizer never sees it"
    ),
    "GB0098": (
        "the called function is wrapped in torch.compiler.disable, so it runs in Python between two graphs on every "
        "call: remove the decorator if dynamo can trace the function, or move the call out of the compiled region. "
        "Keep it on a helper that draws NumPy or Python random numbers (a SpecAugment mask helper such as "
        "`_compute_mask_indices`; torchmend's TM110 fix puts it there): traced, the draws come from torch's "
        "generator and break the graph more. No rewrite torchmend can make keeps NumPy's stream and removes this "
        "break: what does (measured on torch 2.13, wav2vec2 and SEW-D models, losses and weights equal to the eager "
        "run's) is to make the mask outside the compiled model, in the data collator or the training loop, and pass "
        "it in (transformers' wav2vec2-family models take `mask_time_indices=`), or, where the helper is your code, "
        "to wrap it in a `torch.library.custom_op` whose fake returns a tensor of the mask's shape; either way with "
        "`torch._dynamo.config.capture_dynamic_output_shape_ops = True` before the compile call, since the boolean-"
        "mask assignment that applies it (`h[mask] = v`) needs nonzero in its backward once the mask is a tensor the "
        "graph receives"
    ),
    "GB4347": (
        "next() on a dict key iterator that dynamo did not create: a comprehension (`{k: ... for k in d}`) compiled "
        "as a frame of its own, handed the iterator by its enclosing function, which dynamo skipped because of "
        "another graph break in it ('Skipping the function and falling back to eager'); fix that break first and "
        "the comprehension is traced inline again"
    ),
    "GB8985": (
        "a tensor made an autograd leaf with requires_grad_() inside compiled code is returned: if the caller "
        "only needs its values, drop requires_grad_() or `.detach()` it; if it needs the gradient, create the "
        "tensor outside the compiled region and pass it in"
    ),
}


def gb_advice(gb_id: str | None, function: str = "") -> str | None:
    """The advice for a graph break by its GB id, by the library function it is in first (GB_ADVICE's "ID function"
    keys), else by the id alone."""
    return GB_ADVICE.get(f"{gb_id} {function}") or GB_ADVICE.get(gb_id or "")


# The codemod (its `name`) that fixes each rule, so `torchmend rules` can list them without importing the
# codemods (libcst); tests/unit/test_rules_and_docs.py checks that the registry agrees.
FIXES: dict[str, str] = {
    "TM101": "gate-print",
    "TM102": "gate-logging",
    "TM103": "branch-to-where",
    "TM104": "keep-scalar-tensor",
    "TM106": "capture-for-backend",
    "TM108": "assert-in-graph",
    "TM109": "gate-requires-grad",
    "TM110": "eager-host-random",
    "TM111": "capture-data-dependent-op",
    "TM113": "compile-fsdp-blocks",
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


def select(codes: list[str], select: list[str] | None, ignore: list[str] | None) -> list[str]:
    """Codes kept by --select/--ignore prefixes (e.g. --select TM1 --ignore TM104)."""
    kept = [c for c in codes if not select or any(c.startswith(p) for p in select)]
    return [c for c in kept if not ignore or not any(c.startswith(p) for p in ignore)]
