"""Parse the two texts PyTorch puts in its structured trace: graph-break reasons and guard-failure reasons.

Pure string work, tested against texts captured from real runs (tests/unit/test_traceparse.py).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

_FRAME_RE = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>\S+)\s*$')
_GB_AT_RE = re.compile(r"Graph break in user code at (?P<file>.+):(?P<line>\d+)\s*$")
_GB_URL_RE = re.compile(r"(https://\S+/gb/(?P<id>gb\d+)\.html)")
# `guard  # code  # file:line in func`, where torch 2.13 may add the torch frame that made the guard
# (`(_dynamo/utils.py:4231 in run_node)`) and shortens `file` (see resolve_short_path).
_RECOMPILE_RE = re.compile(
    r"^(?:(?P<cid>\d+/\d+): )?(?P<guard>.*?)(?:\s+# (?P<code>.*?)\s+# (?P<file>\S+):(?P<line>\d+) in (?P<func>\S+)"
    r"(?: \([^()]*:\d+ in [^()]*\))?)?(?: \(HINT: (?P<hint>.*)\))?\s*$"
)
_RESUME_RE = re.compile(r"^torch_dynamo_resume_in_(?P<func>.+)_at_\d+$")


@dataclass(frozen=True)
class Frame:
    file: str
    line: int
    function: str
    code: str = ""

    def with_function_unwrapped(self) -> Frame:
        return Frame(self.file, self.line, user_function_name(self.function), self.code)


def user_function_name(name: str) -> str:
    """Dynamo names the code after a break `torch_dynamo_resume_in_<fn>_at_<line>`: give back `<fn>`."""
    m = _RESUME_RE.match(name or "")
    return m.group("func") if m else name


def parse_stack(lines: list[str]) -> list[Frame]:
    """Frames of a Python traceback, oldest first, each with its source line if printed."""
    frames: list[Frame] = []
    for i, line in enumerate(lines):
        m = _FRAME_RE.match(line)
        if not m:
            continue
        code = ""
        if i + 1 < len(lines) and not _FRAME_RE.match(lines[i + 1]):
            nxt = lines[i + 1].strip()
            if nxt and set(nxt) - set("^~ "):
                code = nxt
        frames.append(Frame(m["file"], int(m["line"]), m["func"], code).with_function_unwrapped())
    return frames


@dataclass(frozen=True)
class GraphBreak:
    file: str
    line: int
    gb_type: str
    explanation: str
    gb_id: str | None  # e.g. "GB0170"
    docs_url: str | None
    user_stack: tuple[Frame, ...] = field(default=())
    context: str = ""  # PyTorch's "Developer debug context", e.g. `raised exception TypeError("...")`
    # How many calls deep the break was, inside the compiled frame: dynamo raised it while inlining that many calls
    # (its traceback passes through `InliningInstructionTranslator.inline_call_` once per call, on 2.11 to 2.15).
    # Without `torch._dynamo.config.nested_graph_breaks` the frame breaks at its outermost call and each callee
    # is compiled as a frame of its own, which records the same break again.
    inlined: int = 0

    @property
    def function(self) -> str:
        return self.user_stack[-1].function if self.user_stack else ""


def parse_graph_break(text: str) -> GraphBreak | None:
    lines = text.splitlines()
    m = next((_GB_AT_RE.search(line) for line in lines if _GB_AT_RE.search(line)), None)
    if m is None:
        return None
    gb_type, explanation = "", ""
    for i, line in enumerate(lines):
        if line.strip().startswith("Explanation:"):
            explanation = line.split("Explanation:", 1)[1].strip()
            prev = lines[i - 1].strip() if i else ""
            gb_type = prev.split("Graph Break Reason:", 1)[-1].strip()
            break
    if not gb_type:  # older texts: the reason is on the "Graph Break Reason:" line itself
        reason = next((ln for ln in lines if ln.startswith("Graph Break Reason:")), "")
        gb_type = reason.split(":", 1)[-1].strip()
    url = _GB_URL_RE.search(text)
    stack: list[Frame] = []
    if "User code traceback:" in lines:
        start = lines.index("User code traceback:") + 1
        end = next((j for j in range(start, len(lines)) if lines[j].startswith(("Traceback", "NoneType"))), len(lines))
        stack = parse_stack(lines[start:end])
    return GraphBreak(
        file=m["file"],
        line=int(m["line"]),
        gb_type=gb_type,
        explanation=explanation,
        gb_id=url["id"].upper() if url else None,
        docs_url=url.group(1) if url else None,
        user_stack=tuple(stack),
        context=next((ln.split(":", 1)[1].strip() for ln in lines if ln.strip().startswith(_CONTEXT)), ""),
        inlined=sum(1 for ln in lines if _INLINE_RE.match(ln)),
    )


_CONTEXT = "Developer debug context:"
_INLINE_RE = re.compile(r'^\s*File ".*[/\\]_dynamo[/\\]symbolic_convert\.py", line \d+, in inline_call_\s*$')


@dataclass(frozen=True)
class GuardFailure:
    compile_id: str | None
    guard: str  # the failing guard, e.g. "self.forward_calls == 0"
    variable: str | None  # what it guards, e.g. "self.forward_calls", "args[0]"
    site: Frame | None  # where the guarded value is used, when dynamo says
    hint: str | None
    text: str


_TENSOR_RE = re.compile(
    r"tensor '(?P<var>.+?)' (?P<what>[\w ]+?) mismatch"
)  # var may hold quotes: self._modules['p'].t
_LG_RE = re.compile(r"\b[LG]\['(?P<name>[^']+)'\]")
# A source expression: a name (or L['x'] / G['x']) followed by attributes and subscripts.
_CHAIN_RE = re.compile(r"""(?:[LG]\['[^']+'\]|[A-Za-z_]\w*)(?:\.[A-Za-z_]\w*|\[(?:'[^']*'|"[^"]*"|[^\]]*)\])*""")
_COMPARE_OPS = ("==", "!=", "<=", ">=", " is not ", " is ", " in ", " not in ", "<", ">")
_WORDS = {"not", "and", "or", "is", "in", "None", "True", "False"}


def tidy_variable(var: str) -> str:
    """`L['temperature']` -> `temperature`, as the user wrote it."""
    return _LG_RE.sub(lambda m: m["name"], var.strip())


def _left_side(guard: str) -> str:
    """The guard's expression left of its top-level comparison, without dynamo's trailing `# ...` comment."""
    depth, i, quote = 0, 0, ""
    while i < len(guard):
        c = guard[i]
        if quote:
            quote = "" if c == quote else quote
        elif c in "'\"":
            quote = c
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == "#" and depth == 0:
            return guard[:i].strip()
        elif depth == 0 and any(guard.startswith(op, i) for op in _COMPARE_OPS):
            return guard[:i].strip()
        i += 1
    return guard.strip()


def guard_variable(guard: str) -> str | None:
    """What a guard is on, parsed whole: `self.forward_calls == 0` -> `self.forward_calls`; also inside the
    wrappers torch adds (`___as_tensor(self.param_groups[0]['lr']).item() == 0.002`,
    `((-1)*self.param_groups[0]['lr']) == (-0.0005)`, `___as_tensor(timestep.item()).item()` -> `timestep`)."""
    m = _TENSOR_RE.search(guard)
    if m:
        return tidy_variable(m["var"])
    if guard.startswith("GLOBAL_STATE changed:"):  # `GLOBAL_STATE changed: grad_mode` -> grad_mode
        return guard.split(":", 1)[1].strip().split(" ")[0] or None
    left = _left_side(guard)
    for chain in _CHAIN_RE.finditer(left):
        text = chain.group(0)
        if text in _WORDS:
            continue
        if left[chain.end() :].lstrip().startswith("("):  # a call
            if "." not in text and "[" not in text:
                continue  # a function: ___as_tensor(...), len(...)
            head, _, last = text.rpartition(".")
            if head and "]" not in last:
                text = head  # a method: timestep.item() -> timestep
        return tidy_variable(text)
    return None


def tensor_mismatch(guard: str) -> str | None:
    """'size', 'stride', 'requires_grad', 'dtype', ... when the guard is a tensor-property check."""
    m = _TENSOR_RE.search(guard)
    return m["what"].strip() if m else None


def parse_recompile_reason(text: str) -> GuardFailure:
    lines = text.splitlines() or [""]
    m = _RECOMPILE_RE.match(lines[0])
    assert m is not None  # the pattern matches any line
    site = None
    if "User stack trace:" in lines:
        frames = parse_stack(lines[lines.index("User stack trace:") + 1 :])
        site = frames[-1] if frames else None
    if site is None and m["file"]:
        site = Frame(m["file"], int(m["line"]), user_function_name(m["func"]), (m["code"] or "").strip())
    guard = m["guard"].strip()
    return GuardFailure(m["cid"], guard, guard_variable(guard), site, m["hint"], text)


def resolve_short_path(short: str, known: Iterable[str], torch_root: str | None) -> str:
    """The full path of a file name torch shortened in a guard text.

    torch (utils/_traceback.shorten_filename) cuts the common prefix of the file and its own install
    directory: `/home/a/proj/train.py` beside `/home/a/venv/.../torch` becomes `proj/train.py`, a library
    file `.../site-packages/transformers/x.py` becomes `transformers/x.py`, torch's own `torch/optim/adam.py`
    becomes `optim/adam.py`, and with only `/` in common it
    also loses its first character (`/tmp/t.py` -> `mp/t.py`). Files the run named elsewhere (stacks, compiled
    code) are matched first; then the torch install's ancestors are tried on disk."""
    if not short or short.startswith(("/", "<")):
        return short
    known = list(known)
    for path in known:
        if path.endswith("/" + short):
            return path
    ancestors = []
    if torch_root:
        d = os.path.realpath(torch_root)  # a torch file itself is named relative to torch/
        while True:
            ancestors.append(d)
            parent = os.path.dirname(d)
            if parent == d:
                break
            d = parent
    for anc in ancestors:
        cand = os.path.join(anc, short)
        if os.path.exists(cand):
            return cand
    for path in known:  # only `/` in common: one character lost
        if path.endswith(short) and path.count("/") == short.count("/") + 1:
            return path
    return short
