"""Calls bound the way Python binds them: which argument each parameter of the def receives."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import libcst as cst

STAR_ARGS = "it is passed through *args"
STAR_KWARGS = "it is passed through **kwargs"
DEFAULT = "the call leaves it to its default"
NOT_PASSED = "the call does not name it"


@dataclass
class Binding:
    """A call bound to a def's parameters as Python binds them."""

    fn: cst.FunctionDef
    call: cst.Call
    args: dict[str, cst.Arg] = field(default_factory=dict)  # parameter -> the argument it receives
    defaults: dict[str, cst.BaseExpression] = field(default_factory=dict)  # parameters left to their default
    packed: dict[str, list[cst.Arg]] = field(default_factory=dict)  # *args / **kwargs parameter -> what it takes
    unknown: dict[str, str] = field(default_factory=dict)  # parameter -> why its argument cannot be told
    error: str = ""  # the call does not fit the def (Python would raise TypeError)

    def arg(self, name: str) -> cst.Arg | None:
        return self.args.get(name)

    def why_not(self, name: str) -> str:
        """Why `arg(name)` is None, in words."""
        if self.error:
            return self.error
        if name in self.unknown:
            return self.unknown[name]
        if name in self.defaults:
            return DEFAULT
        return NOT_PASSED if name not in self.args else ""


def bind(call: cst.Call, fn: cst.FunctionDef, bound: bool = False) -> Binding:
    """Which argument of `call` each parameter of `fn` receives, as Python binds them. `bound`: the def's
    first parameter is passed by Python (a method through an instance, `module(x)` -> forward)."""
    p = fn.params
    positional = [*p.posonly_params, *p.params]
    if bound:
        positional = positional[1:]
    posonly = {q.name.value for q in p.posonly_params}
    by_name = {q.name.value: q for q in [*positional, *p.kwonly_params] if q.name.value not in posonly}
    star = p.star_arg if isinstance(p.star_arg, cst.Param) else None
    kwstar = p.star_kwarg
    out = Binding(fn, call)
    if star is not None:
        out.packed[star.name.value] = []
    if kwstar is not None:
        out.packed[kwstar.name.value] = []
    i, star_seen, kw_seen = 0, False, False
    for a in call.args:
        if a.star == "*":
            star_seen = True
        elif a.star == "**":
            kw_seen = True
        elif a.keyword is None:
            if star_seen:
                continue  # its position is not known
            if i < len(positional):
                out.args[positional[i].name.value] = a
                i += 1
            elif star is not None:
                out.packed[star.name.value].append(a)
            else:
                out.error = f"{fn.name.value}() takes {len(positional)} positional arguments, the call passes more"
        else:
            key = a.keyword.value
            if key in by_name:
                out.args[key] = a
            elif kwstar is not None:
                out.packed[kwstar.name.value].append(a)
            else:
                out.error = f"{fn.name.value}() has no parameter `{key}`"
    for q in [*positional, *p.kwonly_params]:
        name = q.name.value
        if name in out.args:
            continue
        if star_seen and q in positional[i:]:
            out.unknown[name] = STAR_ARGS
        elif kw_seen and name in by_name:
            out.unknown[name] = STAR_KWARGS
        elif q.default is not None:
            out.defaults[name] = q.default
    if star is not None and star_seen:
        out.unknown[star.name.value] = STAR_ARGS
    if kwstar is not None and kw_seen:
        out.unknown[kwstar.name.value] = STAR_KWARGS
    return out


# --- what a wrapper's *args / **kwargs hold (a decorator's `def wrapper(self, *args, **kwargs)`) -------------

_PACKED = re.compile(r"^(?P<star>[A-Za-z_]\w*)\[(?:(?P<index>\d+)|'(?P<key>[^']*)'|\"(?P<dkey>[^\"]*)\")\]$")


def packed_key(variable: str) -> tuple[str, int | str] | None:
    """A guard's name for what a `*args` or `**kwargs` parameter holds: `args[2]` -> ("args", 2),
    `kwargs['scale']` -> ("kwargs", "scale")."""
    m = _PACKED.match(variable or "")
    if m is None:
        return None
    if m["index"] is not None:
        return m["star"], int(m["index"])
    return m["star"], m["key"] if m["key"] is not None else m["dkey"]


def packed_argument(binding: Binding, star: str, key: int | str) -> tuple[cst.Arg | None, str]:
    """The argument of the call that the def's `*star` holds at index `key`, or its `**star` under name `key`;
    or (None, why not, in words)."""
    p = binding.fn.params
    call = binding.call
    if isinstance(key, int):
        if not (isinstance(p.star_arg, cst.Param) and p.star_arg.name.value == star):
            return None, f"{binding.fn.name.value}() has no `*{star}` parameter"
        held = binding.packed.get(star, [])
        if key < len(held):
            return held[key], ""
        spread = next((a for a in call.args if a.star == "*"), None)
        if spread is not None:
            return None, f"the call spreads `*{_code(spread.value)}` before it, so its position is not known"
        return None, f"the call passes {len(held)} argument{'s' * (len(held) != 1)} into *{star}, not {key + 1}"
    if not (p.star_kwarg is not None and p.star_kwarg.name.value == star):
        return None, f"{binding.fn.name.value}() has no `**{star}` parameter"
    found = next((a for a in binding.packed.get(star, []) if a.keyword is not None and a.keyword.value == key), None)
    if found is not None:
        return found, ""
    spread = next((a for a in call.args if a.star == "**"), None)
    if spread is not None:
        return None, f"`{key}` comes through the call's `**{_code(spread.value)}`, which this file does not spell out"
    return None, f"the call does not pass `{key}` by name"


def _code(node: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(node)
