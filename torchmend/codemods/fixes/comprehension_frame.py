"""Write a comprehension that dynamo compiled as a frame of its own as a plain loop (TM199, GB4347)."""

from __future__ import annotations

import libcst as cst

from torchmend import rules
from torchmend.analysis.source import Context, SourceFile
from torchmend.codemods.base import SAFE, Codemod, Invalid, NoFix, Proposal, Result, Valid
from torchmend.model import Finding, Where

_COMPREHENSIONS = ("<dictcomp>", "<listcomp>", "<setcomp>")


def _other(finding: Finding) -> NoFix:
    """What every other TM199 gets: the advice of its GB id when there is one, else the rule's."""
    rule = rules.BY_CODE["TM199"]
    advice = rules.gb_advice(finding.gb_id, finding.function)
    if advice:
        return NoFix(finding, f"no source-level fix for TM199 ({rule.name}, PyTorch's {finding.gb_id})", advice)
    return NoFix(finding, f"no source-level fix for TM199 ({rule.name})", rule.advice)


def _names(target: cst.BaseExpression) -> list[cst.Name] | None:
    """The names a `for` target binds (`k`, `k, v`), or None for attributes and subscripts."""
    if isinstance(target, cst.Name):
        return [target]
    if isinstance(target, (cst.Tuple, cst.List)):
        out: list[cst.Name] = []
        for e in target.elements:
            inner = _names(e.value)
            if inner is None:
                return None
            out += inner
        return out
    return None


def _loop(comp: cst.DictComp | cst.ListComp | cst.SetComp, name: str) -> cst.BaseStatement:
    """`for ...: [if ...:] name[k] = v` / `name.append(x)` / `name.add(x)`, the comprehension's clauses nested."""
    target = cst.Name(name)
    if isinstance(comp, cst.DictComp):
        body: cst.BaseStatement = cst.SimpleStatementLine(
            [
                cst.Assign(
                    [cst.AssignTarget(cst.Subscript(target, [cst.SubscriptElement(cst.Index(comp.key))]))], comp.value
                )
            ]
        )
    else:
        method = "append" if isinstance(comp, cst.ListComp) else "add"
        body = cst.SimpleStatementLine(
            [cst.Expr(cst.Call(cst.Attribute(target, cst.Name(method)), [cst.Arg(comp.elt)]))]
        )
    clauses: list[cst.CompFor] = []
    clause: cst.CompFor | None = comp.for_in
    while clause is not None:
        clauses.append(clause)
        clause = clause.inner_for_in
    for clause in reversed(clauses):
        for cond in reversed(clause.ifs):
            body = cst.If(test=cond.test, body=cst.IndentedBlock([body]))
        body = cst.For(target=clause.target, iter=clause.iter, body=cst.IndentedBlock([body]))
    return body


class ComprehensionFrame(Codemod):
    """Write a dict, list or set comprehension as a plain loop when dynamo compiled it as a frame of its own.

    What it does:
        TM199 (a graph break of no other rule), one shape of it, dispatched on its GB id: PyTorch's GB4347 "Missing tp_iternext: Dynamo
        does not support next() on dict_keyiterator" (or list_iterator) in a `<dictcomp>`, `<listcomp>` or
        `<setcomp>`, where the comprehension is the value of a plain assignment `name = {...}`.

    Why is this bad:
        On Python 3.11 a comprehension is a function of its own, called with the iterator of its first `for`.
        When dynamo skips the enclosing function (another graph break it cannot resume from, such as one
        inside a `try` block: "Skipping the function and falling back to eager"), the comprehension's frame
        is compiled alone, and its argument is an iterator dynamo did not create and cannot step: one more
        graph break, and a frame that compiles nothing. A plain loop has no frame of its own: it runs with
        the enclosing function. (Python 3.12 inlines comprehensions, PEP 709.)

    Example:
        flags = {f"output_{k}": kwargs.get(f"output_{k}", False) for k in registry}

    Fix:
        flags = {}
        for k in registry:
            flags[f"output_{k}"] = kwargs.get(f"output_{k}", False)

    Fix safety:
        Safe: the same keys and values in the same order, the same exceptions. The loop variables now live in
        the enclosing function, so it is not offered when those names are used anywhere else in that function,
        or when the comprehension reads the name it is assigned to. The other graph break (the one that made
        dynamo skip the function) is still there: fix it too.
    """

    gb_ids = ("GB4347",)
    name = "comprehension-to-loop"
    INVALID = (
        Invalid(
            """
            def wrapper(self, *args, **kwargs):
                flags = {f"out_{k}": kwargs.get(k, False) for k in REGISTRY}  # tm: TM199 gb_id=GB4347 function=<dictcomp>
                return func(self, *args, **flags)
            """,
            """
            def wrapper(self, *args, **kwargs):
                flags = {}
                for k in REGISTRY:
                    flags[f"out_{k}"] = kwargs.get(k, False)  # tm: TM199 gb_id=GB4347 function=<dictcomp>
                return func(self, *args, **flags)
            """,
        ),
        Invalid(
            """
            def names(self, specs):
                found = [s.name for s in specs if s.enabled]  # tm: TM199 gb_id=GB4347 function=<listcomp>
                others = {s: 1 for s in specs}  # another comprehension's `s`: not the function's
                return found, others
            """,
            """
            def names(self, specs):
                found = []
                for s in specs:
                    if s.enabled:
                        found.append(s.name)  # tm: TM199 gb_id=GB4347 function=<listcomp>
                others = {s: 1 for s in specs}  # another comprehension's `s`: not the function's
                return found, others
            """,
        ),
    )
    VALID = (
        # the loop variable is used elsewhere in the function: a loop would overwrite it
        Valid(
            """
            def f(self, d, k):
                keys = {k: 1 for k in d}  # tm: TM199 gb_id=GB4347 function=<dictcomp>
                return keys, k
            """,
        ),
    )

    def propose(self, finding: Finding, ctx: Context) -> Result:
        if finding.gb_id != "GB4347" or finding.function not in _COMPREHENSIONS:
            return _other(finding)
        if finding.where != Where.PROJECT:
            return NoFix(
                finding,
                f"the comprehension is in {finding.file}, outside your project; torchmend does not edit libraries",
                rules.GB_ADVICE["GB4347"],
            )
        src = ctx.file(finding.path)
        stmt = src.statement_at(finding.line)
        return self._rewrite(finding, src, stmt)

    def _rewrite(self, finding: Finding, src: SourceFile, stmt: cst.BaseStatement | None) -> Result:
        why_not = rules.GB_ADVICE["GB4347"]
        if not (
            isinstance(stmt, cst.SimpleStatementLine)
            and len(stmt.body) == 1
            and isinstance(stmt.body[0], cst.Assign)
            and len(stmt.body[0].targets) == 1
            and isinstance(stmt.body[0].targets[0].target, cst.Name)
            and isinstance(stmt.body[0].value, (cst.DictComp, cst.ListComp, cst.SetComp))
        ):
            return NoFix(finding, f"line {finding.line} is not `name = <comprehension>`", why_not)
        assign = stmt.body[0]
        comp = assign.value
        assert isinstance(comp, (cst.DictComp, cst.ListComp, cst.SetComp))
        name = assign.targets[0].target
        assert isinstance(name, cst.Name)
        if any(isinstance(n, cst.Await) for n in src.nodes_in(comp, cst.Await)) or any(
            c.asynchronous is not None for c in src.nodes_in(comp, cst.CompFor)
        ):
            return NoFix(finding, "an async comprehension", why_not)
        fn = src.enclosing(stmt, cst.FunctionDef)
        if fn is None:
            return NoFix(finding, "the comprehension is not inside a function", why_not)
        loop_names: list[str] = []
        for clause in src.nodes_in(comp, cst.CompFor):
            bound = _names(clause.target)
            if bound is None:
                return NoFix(finding, f"the loop target `{src.code(clause.target)}` is not a plain name", why_not)
            loop_names += [n.value for n in bound]
        inside = set(src.nodes_in(comp, cst.Name))
        # A name of the function's own scope (not another comprehension's or a lambda's) that a loop would overwrite
        here = src.scopes.get(stmt)
        clash = sorted(
            {
                n.value
                for n in src.nodes_in(fn, cst.Name)
                if n.value in loop_names and n not in inside and src.scopes.get(n) is here
            }
        )
        if clash:
            return NoFix(
                finding,
                f"`{clash[0]}` is also used elsewhere in {fn.name.value}(); as a loop variable it would be overwritten",
                why_not,
            )
        if any(n.value == name.value for n in inside):
            return NoFix(finding, f"the comprehension reads `{name.value}`, the name it is assigned to", why_not)
        empty: cst.BaseExpression = (
            cst.Dict([])
            if isinstance(comp, cst.DictComp)
            else cst.List([])
            if isinstance(comp, cst.ListComp)
            else cst.Call(cst.Name("set"))
        )
        start = stmt.with_changes(body=[assign.with_changes(value=empty)], trailing_whitespace=cst.TrailingWhitespace())
        loop = _loop(comp, name.value)
        # the line's comment (a finding marker, a note) goes with the innermost statement, which holds the value
        loop = _with_comment(loop, stmt.trailing_whitespace)
        return Proposal(
            (finding,),
            finding.rule,
            src.path,
            replace={stmt: cst.FlattenSentinel([start, loop])},
            safety=SAFE,
            why=f"build `{name.value}` with a plain loop: the comprehension was compiled as a frame of its own and "
            "dynamo cannot step the iterator it was handed (GB4347); a loop runs with its function",
            note="the graph break that made dynamo skip the enclosing function is still there",
        )


def _with_comment(stmt: cst.BaseStatement, trailing: cst.TrailingWhitespace) -> cst.BaseStatement:
    if isinstance(stmt, cst.SimpleStatementLine):
        return stmt.with_changes(trailing_whitespace=trailing)
    assert isinstance(stmt, (cst.For, cst.If))
    body = stmt.body
    assert isinstance(body, cst.IndentedBlock)
    return stmt.with_changes(body=body.with_changes(body=[_with_comment(body.body[0], trailing)]))
