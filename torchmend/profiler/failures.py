"""Ways compiling goes wrong without a graph break or a recompile, read from the texts PyTorch leaves.

- A frame that never converts ("WON'T CONVERT"): the backend compiler raised, dynamo gave up on the whole
  function, and it runs eagerly on every call. The failure text names the user's line that broke the
  backend ("Original traceback"); the break texts it also logs name only the `def` line.
- A script that torch.compile itself broke: a compiled model pickled whole cannot be loaded with
  `torch.load(weights_only=True)`, and a compiled model's state dict carries `_orig_mod.` keys.
- A script dynamo itself crashed on (InternalTorchDynamoError) while tracing the user's code: the "from user
  code:" stack names the compiled function's line and the calls dynamo followed.

Pure string work: no torch.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any

from torchmend import rules
from torchmend.model import Finding, Location, Severity, Where
from torchmend.profiler.traceparse import Frame, parse_stack

_BACKEND_FAILED_RE = re.compile(r"Backend compiler `(?P<backend>[^`]+)` failed with (?P<error>[^\n]+)")
_OLD_BACKEND_FAILED_RE = re.compile(r"backend='(?P<backend>[^']+)' raised:\n(?P<error>[^\n]+)")  # torch <= 2.11
_GB_URL_RE = re.compile(r"(https://\S+/gb/(?P<id>gb\d+)\.html)")


def is_backend_failure_break(text: str) -> bool:
    """A graph-break text that only reports the backend compiler failing (dynamo names the `def` line)."""
    return "Backend compiler exception" in text or "BackendCompilerFailed" in text


@dataclass(frozen=True)
class EagerFallback:
    """A frame dynamo gave up on: the backend failed, so the function runs eagerly."""

    backend: str  # the backend that failed (the detection backend, under scan)
    error: str  # what it failed with, one line
    frames: tuple[Frame, ...]  # the stack the failure names, oldest first (its innermost frame is the line)
    gb_id: str | None
    docs_url: str | None


def eager_fallback(ev: dict[str, Any]) -> EagerFallback | None:
    """The COMPILE_END of a frame whose backend compile failed and that produced no compiled code."""
    fail = ev.get("fail_reason") or ""
    if not ev.get("fail_type") or ev.get("has_guarded_code"):
        return None
    m = _BACKEND_FAILED_RE.search(fail) or _OLD_BACKEND_FAILED_RE.search(fail)
    if m is None:
        return None
    url = _GB_URL_RE.search(fail)
    return EagerFallback(
        backend=m["backend"],
        error=m["error"].strip(),
        frames=_failing_frames(fail, ev),
        gb_id=url["id"].upper() if url else None,
        docs_url=url.group(1) if url else None,
    )


def _section(text: str, heading: str) -> list[str]:
    """The indented lines under `heading` (e.g. "Original traceback:"), up to the first blank line."""
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.strip() == heading), None)
    if start is None:
        return []
    out = []
    for ln in lines[start + 1 :]:
        if not ln.strip():
            break
        out.append(ln)
    return out


def _failing_frames(fail: str, ev: dict[str, Any]) -> tuple[Frame, ...]:
    # "Original traceback" is the node the backend failed on; "Traceback" only where dynamo stopped tracing.
    for heading in ("Original traceback:", "Traceback:"):
        frames = parse_stack(_section(fail, heading))
        if frames:
            return tuple(frames)
    if ev.get("fail_user_frame_filename") and ev.get("fail_user_frame_lineno"):
        return (Frame(ev["fail_user_frame_filename"], int(ev["fail_user_frame_lineno"]), ev.get("co_name") or ""),)
    return ()


# --- scripts that torch.compile broke ---------------------------------------------------------------------


@dataclass(frozen=True)
class CompiledSaveFailure:
    """The script failed because it saved or loaded a compiled model as if it were the plain module."""

    what: str  # "pickled" (the OptimizedModule itself) or "prefixed-keys" (a state dict with _orig_mod.)
    error: str  # the exception line
    frames: tuple[Frame, ...]  # the traceback, oldest first: its innermost project frame is the load


_PICKLED = re.compile(r"OptimizedModule|torch\._dynamo\.eval_frame")
_SAID = re.compile(r"Unsupported global: GLOBAL \S+|Unexpected key\(s\) in state_dict: [^\n]{0,160}")
_PREFIXED = re.compile(r"Unexpected key\(s\) in state_dict:[^\n]*\"_orig_mod\.")


def compiled_save_failure(end: dict[str, Any]) -> CompiledSaveFailure | None:
    """Recognise the failure in the END event of a script that raised."""
    error = end.get("error") or ""
    text = f"{error}\n{end.get('traceback') or ''}"
    if "weights_only" in text.lower().replace(" ", "_") and _PICKLED.search(text):
        what = "pickled"
    elif _PREFIXED.search(text):
        what = "prefixed-keys"
    else:
        return None
    frames = parse_stack((end.get("traceback") or "").splitlines())
    said = _SAID.search(text)
    exc = error.split(":", 1)[0]
    summary = f"{exc}: {said.group(0).rstrip(' .')}" if said else (error.splitlines()[0] if error else "")
    return CompiledSaveFailure(what=what, error=summary[:300], frames=tuple(frames))


def save_advice(what: str) -> str:
    if what == "pickled":
        return (
            "the script saved the compiled model object (an OptimizedModule), which torch.load(weights_only=True) "
            "refuses; save the plain module's weights instead: torch.save(model._orig_mod.state_dict(), ...) "
            "(or the uncompiled model's state_dict()), and load them into a fresh module"
        )
    return (
        "the state dict came from the compiled model, whose keys start with `_orig_mod.`; save "
        "model._orig_mod.state_dict() (or the uncompiled model's), or compile in place with model.compile(), "
        "which keeps the keys unchanged"
    )


def reason_for_eager(fb: EagerFallback, function: str, check: dict[str, Any] | None) -> str:
    reason = (
        f"backend compiler `{fb.backend}` failed with {fb.error}: dynamo gave up on `{function}`, "
        "which runs eagerly on every call"
    )
    if check is None:
        return reason
    if check.get("own_compiles"):
        return (
            f"{reason}. The script's own backend `{check['own']}` compiles this graph: the detection backend "
            f"`{check['detect']}` and `{check['own']}` disagree (scan with --backend {check['own']} to see "
            f"what `{check['own']}` makes of it)"
        )
    return f"{reason}. The script's own backend `{check['own']}` fails on it too ({check.get('own_error')})"


def compiled_save_finding(places: Any, end: dict[str, Any]) -> Finding | None:
    """TM107 at the user's line that raised, when the END event's exception is a compiled model saved whole
    (`places`: findings.Places, which decides whose file a frame is in)."""
    failure = compiled_save_failure(end)
    if failure is None:
        return None
    project = [f for f in failure.frames if places.where(places.absolute(f.file)) == Where.PROJECT]
    site = project[-1] if project else (failure.frames[-1] if failure.frames else None)
    if site is None:
        return None
    return _failure_finding("TM107", places.location(site), places, f"{failure.error}: {save_advice(failure.what)}")


# --- dynamo's own crash while tracing the user's code ---------------------------------------------------

# Dynamo wraps an error of its own (not one the traced code raises eagerly too) as InternalTorchDynamoError.
_INTERNAL = re.compile(r"^(?:torch\._dynamo\.exc\.)?InternalTorchDynamoError:\s*(?P<what>.*)$")


@dataclass(frozen=True)
class DynamoCrash:
    """The script ended because dynamo crashed while tracing a call in compiled code (a bug of dynamo's, such as
    torch 2.12/2.13 tracing `inspect.getfullargspec` of a bound method: Lightning's `self.log`)."""

    error: str  # what dynamo raised inside, one line: "AttributeError: 'method' object has no attribute '__dict__'"
    frames: tuple[Frame, ...]  # "from user code:", oldest first: the compiled function's line, then what it called


def dynamo_crash(end: dict[str, Any]) -> DynamoCrash | None:
    """Recognise the crash in the END event of a script that raised; None for any other error."""
    error = end.get("error") or ""
    first = error.strip().splitlines()[0] if error.strip() else ""
    m = _INTERNAL.match(first.strip())
    if m is None:
        return None
    frames = parse_stack(_section(error, "from user code:"))
    if not frames:
        return None
    return DynamoCrash(error=m["what"].strip()[:300], frames=tuple(frames))


def crash_advice(site: Frame, compiled: Frame, inner: Frame | None) -> str:
    """The known remedy: dynamo must not trace the call. A helper the compiled function reaches is decorated where
    it is defined; a call made by the compiled function itself moves into such a helper."""
    what = f"`{inner.function}` ({os.path.basename(inner.file)})" if inner else "the call"
    if site == compiled:
        return (
            f"dynamo crashes tracing into {what} from this line: move the call into a helper decorated with "
            "@torch.compiler.disable where it is defined (outside the compiled function) and call the helper "
            "here; dynamo then calls it eagerly (one graph break) instead of tracing it"
        )
    return (
        f"dynamo crashes tracing into {what} from `{site.function}`, which `{compiled.function}` calls: decorate "
        f"`{site.function}` with @torch.compiler.disable where it is defined, so dynamo calls it eagerly (one graph "
        "break at the call) instead of tracing it; or keep the call out of the compiled function"
    )


def dynamo_crash_finding(places: Any, end: dict[str, Any]) -> Finding | None:
    """TM112 at the innermost line of the user's project that dynamo was tracing when it crashed (`places`:
    findings.Places), with the chain from the compiled function and the remedy."""
    crash = dynamo_crash(end)
    if crash is None:
        return None
    ours = [i for i, f in enumerate(crash.frames) if places.where(places.absolute(f.file)) == Where.PROJECT]
    if not ours:
        return None
    at = ours[-1]
    site, compiled = crash.frames[at], crash.frames[0]
    inner = crash.frames[at + 1] if at + 1 < len(crash.frames) else None
    loc = places.location(site)
    chain = " -> ".join(f"{f.function} (line {f.line})" for f in crash.frames[:at] if f.file == site.file)
    reached = f", reached from {chain}" if chain else ""
    reason = f"InternalTorchDynamoError: {crash.error}{reached}: {crash_advice(site, compiled, inner)}"
    return _failure_finding("TM112", loc, places, reason)


# --- the exception a failed run ended with ----------------------------------------------------------------

# What PyTorch appends to an exception's message after the message itself: the hints, the user stack, the docs
# link. The first of these ends the message.
_APPENDIX = re.compile(
    r"^\s*(?:Set TORCHDYNAMO_VERBOSE=|For even more developer context|from user code:|Developer debug context"
    r"|For more details about this graph break|Minifier script written|Last frame execution written)"
)
_EXPLANATION = re.compile(r"^\s*Explanation:\s*(?P<text>.+)")
_WRAPPED = re.compile(r"got (?P<exc>[A-Z]\w*(?:Error|Exception)\(.*\))\s*$")
_USER_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<fn>\S+)')
EXCEPTION_LINE = re.compile(r"^(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?::\s.*|(?<=Error)|(?<=Exception)|(?<=Interrupt)):?$")
MAX_SUMMARY = 400


def is_hint(line: str) -> bool:
    """A line PyTorch adds after an exception's message ("Set TORCHDYNAMO_VERBOSE=1 ...", "from user code:")."""
    return bool(_APPENDIX.match(line))


def exception_summary(error: str, output: str = "", traceback: str = "", empty: str = "(no output)") -> str:
    """The exception a failed run ended with, in one line: its type and message with PyTorch's hints left out.

    `error`: the child's record of it (`Type: message`, the message as torch augmented it), or empty; `output`:
    the run's output tail, read when there is no record (the last exception line that is not a hint). A message
    that only says what dynamo was doing ("RuntimeError when making fake tensor call") gets the error it wraps
    from its explanation; an empty one gets the user's line (from "from user code:", else the `traceback`).
    `empty`: what it says when there is neither record nor output."""
    lines = (error or "").strip().splitlines()
    if not lines:
        found = [ln.strip() for ln in output.strip().splitlines() if EXCEPTION_LINE.match(ln.strip())]
        found = [ln for ln in found if not is_hint(ln)]
        rest = [ln.strip() for ln in output.strip().splitlines() if ln.strip() and not is_hint(ln)]
        return (found or rest or [empty])[-1][:MAX_SUMMARY]
    message: list[str] = []
    for ln in lines:
        if is_hint(ln):
            break
        message.append(ln)
    head = (message or lines)[0].strip().rstrip(":")
    if is_hint(head):  # the message was empty: only PyTorch's appendix follows the type
        head = ""
    explanation = next((m["text"].strip() for ln in message for m in [_EXPLANATION.match(ln)] if m), "")
    wrapped = _WRAPPED.search(explanation)
    if wrapped:
        head = f"{head}: {wrapped['exc']}"
    elif explanation and len(head) < 80:
        head = f"{head}: {explanation}"
    if head.endswith(":") or ":" not in head or head.split(":", 1)[1].strip() == "":
        frame = _innermost_user_frame(lines) or _innermost_user_frame(["from user code:", *traceback.splitlines()])
        head = f"{head.rstrip(':')} (no message)" + (f" at {frame}" if frame else "")
    return head[:MAX_SUMMARY]


def _innermost_user_frame(lines: list[str]) -> str:
    """`file:line in function` of the last frame under "from user code:", with its source line."""
    start = next((i for i, ln in enumerate(lines) if ln.strip() == "from user code:"), None)
    if start is None:
        return ""
    found = ""
    for i, ln in enumerate(lines[start + 1 :], start + 1):
        m = _USER_FRAME.match(ln)
        if m:
            code = lines[i + 1].strip() if i + 1 < len(lines) else ""
            found = f"{m['file']}:{m['line']} in {m['fn']}" + (f": {code}" if code and not is_hint(code) else "")
    return found


def _failure_finding(code: str, loc: Location, places: Any, reason: str) -> Finding:
    """The one finding of a run that failed (a script-failure rule), at the user's line that failed."""
    rule = rules.BY_CODE[code]
    return Finding(
        rule=rule.code,
        kind=rule.kind,
        title=rule.title,
        file=loc.file,
        line=loc.line,
        function=loc.function,
        path=loc.path,
        where=Where(places.where(loc.path)),
        reason=reason,
        count=1,
        severity=Severity.FIX,
        code=loc.code,
    )
