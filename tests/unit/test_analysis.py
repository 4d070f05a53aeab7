"""The shared analysis of the codemods (torchmend/analysis/): value kinds, compiled functions, callees
and call binding, on small real sources parsed with libcst."""

from __future__ import annotations

import textwrap
from pathlib import Path

import libcst as cst
import pytest

from torchmend.analysis import (
    Kind,
    PythonUse,
    UseKind,
    bind,
    callee,
    candidate_callees,
    compiled_functions,
    instance_class,
    instance_classes,
    is_compiled,
    python_use,
    reads,
    values,
)
from torchmend.analysis.source import Context, SourceFile


def _src(code: str) -> SourceFile:
    return SourceFile("/p/example.py", textwrap.dedent(code).lstrip("\n"))


def _expr(src: SourceFile, code: str) -> cst.BaseExpression:
    """The expression node whose code is `code` (the last one, so names read after their assignment)."""
    found = [n for n in src.nodes_in(src.module, cst.BaseExpression) if src.code(n) == code]
    assert found, code
    return found[-1]  # type: ignore[return-value]


def _def(src: SourceFile, name: str) -> cst.FunctionDef:
    return next(f for f in src.nodes_in(src.module, cst.FunctionDef) if f.name.value == name)  # type: ignore


def _call(src: SourceFile, code: str) -> cst.Call:
    return next(c for c in src.nodes_in(src.module, cst.Call) if src.code(c) == code)  # type: ignore


KINDS = """
import math
import torch

def f(x, n):
    a = 2
    b = a * 1.5
    c = torch.zeros(3)
    d = c * a
    e = len(x) // 2
    g = x.abs()
    h = None
    k = math.floor(b)
    m = x.shape[0]
    p = n > 0
    q = x.size(1)
    r = "s"
    h2 = h2 * 2
    return a, b, c, d, e, g, h, k, m, p, q, r, n, h2, a / 3, x.float(), not n, float(n), x.training
"""


@pytest.mark.parametrize(
    "code, kind",
    [
        ("a", Kind.INT),
        ("b", Kind.FLOAT),
        ("c", Kind.TENSOR),
        ("d", Kind.TENSOR),
        ("e", Kind.INT),
        ("g", Kind.TENSOR),
        ("h", Kind.NONE),
        ("k", Kind.INT),
        ("m", Kind.INT),
        ("p", Kind.UNKNOWN),
        ("q", Kind.INT),
        ("r", Kind.UNKNOWN),
        ("n", Kind.UNKNOWN),
        ("h2", Kind.UNKNOWN),
        ("a / 3", Kind.FLOAT),
        ("x.float()", Kind.TENSOR),
        ("not n", Kind.BOOL),
        ("float(n)", Kind.FLOAT),
        ("x.training", Kind.BOOL),
    ],
)
def test_value_kinds(code: str, kind: Kind) -> None:
    src = _src(KINDS)
    assert values(src).kind(_expr(src, code)) is kind


def test_the_analysis_is_one_per_file_and_remembered() -> None:
    src = _src(KINDS)
    assert values(src) is values(src)
    assert values(src) is not values(_src(KINDS))


def test_a_parameter_used_as_a_tensor_is_likely_one_but_not_self_or_the_excluded_name() -> None:
    src = _src("""
        class Net:
            def forward(self, x, scale, n):
                y = self.fc(x[0])
                return y * scale + n
        """)
    kinds = values(src)
    fn = _def(src, "forward")
    assert kinds.param_maybe_tensor(fn, "x")
    assert not kinds.param_maybe_tensor(fn, "self") and not kinds.param_maybe_tensor(fn, "scale")
    assert kinds.maybe_tensor(_expr(src, "y"))  # a call torchmend cannot see into, in model code
    assert not kinds.maybe_tensor(_expr(src, "n"))
    assert kinds.maybe_tensor(_expr(src, "y * scale"), exclude=("y",)) is False


def test_plain_python_tests() -> None:
    src = _src("""
        def f(x, mode, flag):
            return x is None, mode == "train", x.dim() > 2, x.sum() > 0, flag, len(x) > 3 and x.ndim == 2
        """)
    kinds = values(src)
    assert [
        kinds.is_python(e.value) for e in _expr(src, src.code(src.nodes_in(src.module, cst.Tuple)[0])).elements
    ] == [True, True, True, False, False, True]  # type: ignore[attr-defined]


COMPILED = """
import torch
from torch import nn


class Net(nn.Module):
    def forward(self, src, mask=None):
        return src

    def helper(self, x):
        return x


class Teacher(nn.Module):
    def update(self, x):
        return x


@torch.compile
def decorated(x):
    return x


@torch.compile(dynamic=True)
def decorated_call(x):
    return x


def step(model, tokens, scale=1.0, *rest, **options):
    return model(tokens) * scale


def plain(x):
    return x


def main(data):
    fast = torch.compile(step)
    model = Net()
    model = torch.compile(model)
    teacher = Teacher()
    fast_update = torch.compile(teacher.update)
    fast(model, data)
    model(data)
    fast_update(data)
    plain(data)
"""


def test_compiled_functions_finds_every_way_of_compiling() -> None:
    src = _src(COMPILED)
    found = {f.name.value for f in compiled_functions(src)}  # type: ignore[attr-defined]
    assert found == {"decorated", "decorated_call", "step", "forward", "update"}
    assert is_compiled(src, _def(src, "step")) and not is_compiled(src, _def(src, "plain"))
    assert not is_compiled(src, _def(src, "helper")) and not is_compiled(src, _def(src, "main"))


def test_callee_follows_aliases_compiles_instances_and_bound_methods() -> None:
    src = _src(COMPILED)
    fast = callee(src, _call(src, "fast(model, data)").func)
    assert fast is not None and fast.fn.name.value == "step" and not fast.bound and fast.compiled_at is not None
    model = callee(src, _call(src, "model(data)").func)
    assert model is not None and model.fn.name.value == "forward" and model.bound and model.compiled_at is not None
    update = callee(src, _call(src, "fast_update(data)").func)
    assert update is not None and update.fn.name.value == "update" and update.bound
    assert update.owner is not None and update.owner.name.value == "Teacher"
    plain = callee(src, _call(src, "plain(data)").func)
    assert plain is not None and plain.compiled_at is None


def _bound(call: str, params: str) -> dict[str, str]:
    src = _src(f"def f({params}):\n    pass\n\n{call}\n")
    binding = bind(_call(src, call), _def(src, "f"))
    out = {name: src.code(arg.value) for name, arg in binding.args.items()}
    out.update({name: f"default {src.code(v)}" for name, v in binding.defaults.items()})
    out.update({name: f"? {why}" for name, why in binding.unknown.items()})
    shown = {
        name: [f"{a.keyword.value}={src.code(a.value)}" if a.keyword else src.code(a.value) for a in args]
        for name, args in binding.packed.items()
        if args
    }
    out.update({name: "packed " + ", ".join(args) for name, args in shown.items()})
    if binding.error:
        out["error"] = binding.error
    return out


@pytest.mark.parametrize(
    "call, params, method, expected",
    [
        ("f(1, 2)", "a, b", False, {"a": "1", "b": "2"}),
        ("f(1, b=2)", "a, b, c=3", False, {"a": "1", "b": "2", "c": "default 3"}),
        ("model(data)", "self, src", True, {"src": "data"}),
        ("f(b=2, a=1)", "a, b", False, {"a": "1", "b": "2"}),
        ("f(1, 2, 3, k=4)", "a, *rest, **kw", False, {"a": "1", "rest": "packed 2, 3", "kw": "packed k=4"}),
        ("f(*xs)", "a, b", False, {"a": "? it is passed through *args", "b": "? it is passed through *args"}),
        (
            "f(1, **kw)",
            "a, b, *, c",
            False,
            {"a": "1", "b": "? it is passed through **kwargs", "c": "? it is passed through **kwargs"},
        ),
        (
            "f(1, 2, 3)",
            "a, b",
            False,
            {"a": "1", "b": "2", "error": "f() takes 2 positional arguments, the call passes more"},
        ),
        ("f(1, z=2)", "a, /, b=0", False, {"a": "1", "b": "default 0", "error": "f() has no parameter `z`"}),
        ("f(a=1)", "a, /", False, {"error": "f() has no parameter `a`"}),
    ],
)
def test_binding_is_how_python_binds(call: str, params: str, method: bool, expected: dict[str, str]) -> None:
    if method:  # `model(data)` -> forward(self, src)
        src = _src(f"class M:\n    def f({params}):\n        pass\n\n{call}\n")
        binding = bind(_call(src, call), _def(src, "f"), bound=True)
        assert {n: src.code(a.value) for n, a in binding.args.items()} == expected
        return
    assert _bound(call, params) == expected


def test_why_not_names_the_reason() -> None:
    src = _src("def f(a, b=1):\n    pass\n\nf(1)\nf(*xs)\n")
    fn = _def(src, "f")
    assert bind(_call(src, "f(1)"), fn).why_not("b") == "the call leaves it to its default"
    assert bind(_call(src, "f(*xs)"), fn).why_not("a") == "it is passed through *args"


def test_a_class_in_another_file_is_found_through_the_import(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("from pkg.models import Teacher\n")
    (tmp_path / "pkg" / "models.py").write_text("class Teacher:\n    def update(self, x):\n        return x\n")
    train = "import torch\nfrom pkg import Teacher\n\nt = Teacher()\nfast = torch.compile(t.update)\nfast(1)\n"
    (tmp_path / "train.py").write_text(train)
    ctx = Context(str(tmp_path), lambda p: Path(p).read_text())
    src = ctx.file(str(tmp_path / "train.py"))
    found = callee(src, _call(src, "fast(1)").func, ctx)
    assert found is not None and found.src.path.endswith("models.py") and found.bound
    assert callee(src, _call(src, "fast(1)").func) is None  # without the project, the class is not known


EITHER = """
import torch
from torch import nn


class A(nn.Module):
    def forward(self, x):
        return x


class B(nn.Module):
    def forward(self, x):
        return x

    def generate(self, x):
        return x


class C(nn.Module):
    def forward(self, x):
        return x


if flag:
    model = A().to("cpu")
else:
    model = B()
model = torch.compile(model)
model(1)
model.generate(1)
model = C()  # built after the compile: not what the compile or the calls above see

try:
    other = A()
except ImportError:
    other = C()
other(2)

picked = A() if flag else C()
picked(3)

only = B() if flag else B()
only(4)


def later():
    model(5)  # a def reading the global may run after any of its bindings
"""


def _classes(src: SourceFile, code: str) -> list[str]:
    return [c[1].name.value for c in instance_classes(src, _expr(src, code))]


def test_instance_classes_are_every_class_a_name_may_hold_where_it_is_read() -> None:
    src = _src(EITHER)
    assert _classes(src, "torch.compile(model)") == ["A", "B"]  # both arms; not C, bound after it
    assert [c[1].name.value for c in instance_classes(src, _call(src, "model(1)").func)] == ["A", "B"]
    assert [c[1].name.value for c in instance_classes(src, _call(src, "other(2)").func)] == ["A", "C"]
    assert [c[1].name.value for c in instance_classes(src, _call(src, "picked(3)").func)] == ["A", "C"]
    assert [c[1].name.value for c in instance_classes(src, _call(src, "model(5)").func)] == ["A", "B", "C"]
    only = instance_class(src, _call(src, "only(4)").func)
    assert only is not None and only[1].name.value == "B"  # one class in both arms is one class


def test_a_fix_that_needs_one_class_gets_none_where_there_are_several() -> None:
    src = _src(EITHER)
    for call in ("model(1)", "model.generate(1)", "other(2)", "picked(3)"):
        assert instance_class(src, _call(src, call).func) is None, call
        assert callee(src, _call(src, call).func) is None, call
    assert callee(src, _call(src, "only(4)").func) is not None


def test_candidate_callees_and_compiled_functions_take_every_class() -> None:
    src = _src(EITHER)
    owners = [c.owner.name.value for c in candidate_callees(src, _call(src, "model(1)").func) if c.owner]
    assert owners == ["A", "B"]
    generate = candidate_callees(src, _call(src, "model.generate(1)").func)
    assert [(c.fn.name.value, c.bound) for c in generate] == [("generate", True)]  # only B has one
    assert {src.enclosing(f, cst.ClassDef).name.value for f in compiled_functions(src)} == {"A", "B"}  # type: ignore


def test_a_submodule_of_either_class_has_the_forward_of_each() -> None:
    src = _src(
        EITHER
        + """

class Wrapper(nn.Module):
    def __init__(self, small):
        super().__init__()
        self.inner = A() if small else C()

    def forward(self, x):
        return self.inner(x)
"""
    )
    inner = _call(src, "self.inner(x)").func
    assert callee(src, inner) is None
    assert [c.owner.name.value for c in candidate_callees(src, inner) if c.owner] == ["A", "C"]


@pytest.mark.parametrize(
    "line, kind, name, text",
    [
        ("if n > 0:\n        pass", UseKind.CONDITION, "", "used in the condition of an `if`/`while`"),
        ("y = x[n]", UseKind.INDEX, "", "used as an index or slice"),
        ("y = range(n)", UseKind.BUILTIN, "range", "passed to range()"),
        ("y = torch.zeros(n)", UseKind.FACTORY_SIZE, "zeros", "passed to zeros() as a size"),
        ("y = x.sum(dim=n)", UseKind.SIZE_KEYWORD, "dim", "passed as `dim=`, a size or dimension"),
        (
            "y = x.view(n, -1)",
            UseKind.SIZE_ARGUMENT,
            "view",
            "passed to view() as a size, dimension or option that must be a Python number",
        ),
        ("y = (n + 1).bit_length()", UseKind.ATTRIBUTE, "bit_length", "used as a Python number (`.bit_length`)"),
    ],
)
def test_python_use_is_a_kind_with_its_line_and_name(line: str, kind: UseKind, name: str, text: str) -> None:
    """Where a number must stay a Python number is a typed value (analysis.uses.PythonUse): callers decide on its
    kind, and its words are rendered from it once."""
    src = _src(f"import torch\n\ndef f(x, t):\n    n = t.sum().item()\n    {line}\n")
    fn = _def(src, "f")
    uses = [r for r in reads(src, fn, "n") if src.line_of(r) == 5]
    assert python_use(src, fn, uses, "n") == PythonUse(kind, 5, name)
    assert PythonUse(kind, 5, name).text == text


def test_a_switch_moves_the_break_where_the_number_needs_its_value() -> None:
    """compile_config/flow.scalar_moves decides on python_use's kind: `view(n)` (a dimension or option),
    `math.ceil(n)` and an assert need the real number, so capture_scalar_outputs only moves the break there; a
    factory's size and an index take the symbolic number as it is."""
    from torchmend.codemods.fixes.compile_config.flow import scalar_moves

    def moves(line: str) -> str | None:
        src = _src(f"import math\nimport torch\n\ndef f(x, t):\n    n = t.sum().item()\n    {line}\n")
        return scalar_moves(src, src.statement_at(5))  # type: ignore[arg-type]

    view = "passed to view() as a size, dimension or option that must be a Python number"
    assert moves("y = x.view(n, -1)") == f"`n` is {view} at line 6"
    assert moves("y = math.ceil(n)") == "`n` is passed to ceil() at line 6"
    assert moves("assert n > 0") == "`n` is used in an assert at line 6"
    assert moves("y = torch.zeros(n)") is None
    assert moves("y = x[n]") is None
