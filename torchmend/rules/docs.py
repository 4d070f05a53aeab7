"""The documentation of the rules no codemod fixes, under the five HEADINGS of torchmend.rules (the codemods'
docstrings document the others); scripts/gen_docs.py turns them into docs/rules/."""

# The documentation of the rules no codemod fixes (the codemods' docstrings document the others). Same shape as a
# codemod docstring: each heading on a line of its own ending in a colon, its text indented below. Example is code;
# in the other sections a block indented four more spaces is code.

TM105 = """
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

TM199 = """
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

TM112 = """
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

TM209 = """
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

TM207 = """
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

TM299 = """
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

TM901 = """
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

TM902 = """
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

TM903 = """
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

TM904 = """
What it does:
    `torchmend lint` met a Python file it cannot parse (a syntax error, bytes that are not text in the file's
    encoding, or code nested more deeply than Python's parser takes, such as a sum of 100,000 terms). The finding
    is at the line the parser stopped on (line 1 for nesting). Lint goes on with the other files. Deep code that
    Python does run (a 600-term sum) is checked as any other.

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
