"""No stage acts on another's words (issue 42): a verdict, a refusal, an outcome or a note is a typed value
(verify/reasons.Reason and its ReasonKind, pipeline.FoundBy, pipeline.Outcome, verify.compare.Verdict), and its words
are rendered once, for people. This reads every module of torchmend/ and fails on code that matches text: a prose
literal (words with a space) compared with `==`/`!=`/`in` or tested with `.startswith(...)`/`.endswith(...)`/
`.removeprefix(...)`, or any string literal compared with, or a prefix test on, a value named like a message
(`found_by`, `outcome`, `verdict`, `reason`, `note`, `message`, `why`, ...).

What is left is read from other programs' text, which torchmend does not own: PyTorch's logs and tracebacks, git's
and the forge's replies, the operating system's. Each is listed in ALLOWED with why."""

from __future__ import annotations

import ast
from pathlib import Path

import torchmend

PACKAGE = Path(torchmend.__file__).parent
# Names that hold a stage's words, or the typed value that stands for them.
MESSAGES = {"message", "messages", "reason", "reasons", "note", "notes", "found_by", "outcome", "verdict", "why", "how"}
PREFIX_TESTS = ("startswith", "endswith", "removeprefix", "removesuffix")

# (module, the matching code as ast.unparse writes it): text torchmend reads from outside, not its own stages'.
PYTORCH = "PyTorch's log or traceback text"
ALLOWED = {
    ("profiler/classify.py", "'User-inserted graph break' in text"): PYTORCH,
    ("profiler/classify.py", "'builtin operator `print`' in text"): PYTORCH,
    ("profiler/classify.py", "gb.gb_type.startswith(('Dynamic shape operator', 'Data dependent operator'))"): PYTORCH,
    ("profiler/classify.py", "'Data-dependent branching' in gb.gb_type"): PYTORCH,
    ("profiler/classify.py", "'data-dependent branching' in text.lower()"): PYTORCH,
    ("profiler/classify.py", "'Skip calling' in text"): PYTORCH,
    ("profiler/classify.py", "'size mismatch' in g.guard"): PYTORCH,
    ("profiler/classify.py", "gb.gb_type == 'Observed exception'"): PYTORCH,
    ("profiler/failures.py", "'Backend compiler exception' in text"): PYTORCH,
    ("profiler/failures.py", "ln.strip() == 'from user code:'"): PYTORCH,
    ("profiler/findings.py", "'recompile limit' in fail.lower()"): PYTORCH,
    ("profiler/findings.py", "'cache size limit' in fail.lower()"): PYTORCH,
    ("profiler/traceparse.py", "'User code traceback:' in lines"): PYTORCH,
    ("profiler/traceparse.py", "guard.startswith('GLOBAL_STATE changed:')"): PYTORCH,
    ("profiler/traceparse.py", "'User stack trace:' in lines"): PYTORCH,
    ("profiler/traceparse.py", "ln.startswith('Graph Break Reason:')"): PYTORCH,
    ("profiler/userframe.py", "ln.strip().lstrip('- ').strip() == 'User stack trace:'"): PYTORCH,
    ("verify/failure.py", "ln.strip() == 'from user code:'"): PYTORCH,
    ("profiler/child.py", "tb.tb_frame.f_code.co_filename.startswith('<frozen runpy')"): "Python's frame names",
    ("profiler/runner.py", "'No space left on device' in output"): "the operating system's error text",
    ("profiler/runner.py", "'[Errno 28]' in output"): "the operating system's error text",
    ("profiler/collector.py", "reason == 'timeout'"): "the END event's reason, a protocol word (model.END)",
    ("tune/report.py", "line.startswith('model name')"): "/proc/cpuinfo",
    ("vcs/forge.py", "'timed out' in str(reason)"): "urllib's error",
    ("vcs/ship.py", "'fetch first' in said"): "git push's reply",
    # A finding's reason is PyTorch's graph-break text: "Dynamic shape operator (no meta kernel)".
    ("codemods/fixes/compile_config/capture.py", "'meta kernel' in (finding.reason or '')"): "PyTorch's break reason",
}


def _name(e: ast.expr) -> str | None:
    if isinstance(e, ast.Name):
        return e.id
    if isinstance(e, ast.Attribute):
        return e.attr
    if isinstance(e, (ast.Subscript, ast.Call)):
        return _name(e.value if isinstance(e, ast.Subscript) else e.func)
    return None


def _prose(e: ast.expr) -> bool:
    return isinstance(e, ast.Constant) and isinstance(e.value, str) and " " in e.value.strip()


def _literal(e: ast.expr) -> bool:
    return isinstance(e, ast.Constant) and isinstance(e.value, str)


def _matches(node: ast.AST) -> bool:
    if isinstance(node, ast.Compare):
        sides = [node.left, *node.comparators]
        for op, a, b in zip(node.ops, sides, sides[1:]):
            if not isinstance(op, (ast.Eq, ast.NotEq, ast.In, ast.NotIn)):
                continue
            if (
                _prose(a)
                or _prose(b)
                or (_literal(a) and _name(b) in MESSAGES)
                or (_literal(b) and _name(a) in MESSAGES)
            ):
                return True
        return False
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in PREFIX_TESTS:
        args = node.args[0].elts if node.args and isinstance(node.args[0], ast.Tuple) else node.args
        return any(_prose(a) for a in args) or (_name(node.func.value) in MESSAGES and any(map(_literal, args)))
    return False


def matching_text(package: Path) -> list[tuple[str, str, int]]:
    """(module, code, line) of each place in the package that matches text."""
    found = []
    for path in sorted(package.rglob("*.py")):
        module = path.relative_to(package).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if _matches(node):
                found.append((module, ast.unparse(node), getattr(node, "lineno", 0)))
    return found


def test_no_stage_matches_on_message_text() -> None:
    found = matching_text(PACKAGE)
    left = [f"{m}:{line}: {code}" for m, code, line in found if (m, code) not in ALLOWED]
    assert not left, "code that matches on message text (act on a typed value instead):\n" + "\n".join(left)
    stale = set(ALLOWED) - {(m, code) for m, code, _ in found}
    assert not stale, f"ALLOWED names code that is no longer there: {sorted(stale)}"


def test_the_check_sees_each_way_of_matching_text(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text(
        "def f(v, r, message, why):\n"
        "    a = v.found_by == 'a follow-up round'\n"  # a literal against a message-named value
        "    b = message.startswith('numerics match (')\n"  # a prefix test of a stage's words
        "    c = 'did not remove' in r.text\n"  # words looked for in another stage's text
        "    d = v.verdict == 'refused'\n"  # a typed word compared as a string
        "    e = why != 'no optimizer step or param_groups on that line'\n"
        "    ok = v.verdict == Verdict.REFUSED and v.kind in KINDS and path.startswith(root)\n"
    )
    assert [line for _, _, line in matching_text(tmp_path)] == [2, 3, 4, 5, 6]
