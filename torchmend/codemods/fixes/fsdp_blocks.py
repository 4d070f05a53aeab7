"""Compile each fully_shard'ed block instead of the whole FSDP2 model (TM113)."""

from __future__ import annotations

import libcst as cst

from torchmend import rules
from torchmend.analysis.source import Context, SourceFile
from torchmend.codemods.base import SAFE, Codemod, Invalid, NoFix, Proposal, Result, Valid
from torchmend.model import Finding

_COMPILE = ("torch.compile",)
_FULLY_SHARD = (
    "torch.distributed.fsdp.fully_shard",
    "torch.distributed.fsdp._fully_shard.fully_shard",
    "torch.distributed.fsdp._fully_shard._fully_shard.fully_shard",
    "torch.distributed._composable.fsdp.fully_shard",
)


def _first_arg_name(call: cst.Call) -> str | None:
    if (
        call.args
        and call.args[0].keyword is None
        and not call.args[0].star
        and isinstance(call.args[0].value, cst.Name)
    ):
        return call.args[0].value.value
    return None


def _target_names(target: cst.BaseExpression) -> set[str]:
    if isinstance(target, cst.Name):
        return {target.value}
    if isinstance(target, (cst.Tuple, cst.List)):
        return {n for e in target.elements for n in _target_names(e.value)}
    return set()


class _Site:
    """`X = torch.compile(M, ...)` over a model M that was fully_shard'ed, with the loop that sharded its blocks."""

    def __init__(self, stmt: cst.SimpleStatementLine, call: cst.Call, model: str, loop: cst.For, block: str) -> None:
        self.stmt, self.call, self.model, self.loop, self.block = stmt, call, model, loop, block


def _sites(src: SourceFile) -> list[_Site]:
    shards = [c for c in src.nodes_in(src.module, cst.Call) if src.is_qualified(c.func, *_FULLY_SHARD)]
    found = []
    for call in src.nodes_in(src.module, cst.Call):
        model = _first_arg_name(call)
        if model is None or not src.is_qualified(call.func, *_COMPILE):
            continue
        stmt = src.enclosing(call, cst.SimpleStatementLine)
        if stmt is None or len(stmt.body) != 1:
            continue
        small = stmt.body[0]
        plain = isinstance(small, cst.Expr) and small.value is call
        assigned = (
            isinstance(small, cst.Assign)
            and small.value is call
            and len(small.targets) == 1
            and isinstance(small.targets[0].target, cst.Name)
        )
        if not (plain or assigned):
            continue
        scope = src.enclosing(stmt, cst.FunctionDef) or src.module
        line = src.line_of(stmt)
        in_scope = [
            s for s in shards if (src.enclosing(s, cst.FunctionDef) or src.module) is scope and src.line_of(s) < line
        ]
        if not any(_first_arg_name(s) == model for s in in_scope):
            continue  # the model compiled is not the fully_shard'ed root
        for s in in_scope:
            block = _first_arg_name(s)
            loop = src.enclosing(s, cst.For)
            if block is None or loop is None or block == model or block not in _target_names(loop.target):
                continue
            found.append(_Site(stmt, call, model, loop, block))
            break
    return found


def _rewrite(src: SourceFile, site: _Site) -> cst.FlattenSentinel[cst.BaseStatement]:
    options = ", ".join(src.code(a).strip().rstrip(",") for a in site.call.args[1:])
    loop = cst.parse_statement(
        f"for {src.code(site.loop.target).strip()} in {src.code(site.loop.iter).strip()}:\n"
        f"    {site.block}.compile({options})\n"
    )
    out: list[cst.BaseStatement] = [loop.with_changes(leading_lines=site.stmt.leading_lines)]
    small = site.stmt.body[0]
    if isinstance(small, cst.Assign):
        name = small.targets[0].target
        if isinstance(name, cst.Name) and name.value != site.model:
            out.append(cst.parse_statement(f"{name.value} = {site.model}\n"))
    return cst.FlattenSentinel(out)


class CompileFsdpBlocks(Codemod):
    """Compile each fully_shard'ed block after sharding, not the whole model.

    What it does:
        TM113: `model = torch.compile(model)` over a model whose blocks and root were sharded with FSDP2's
        `fully_shard`. FSDP2 runs its hooks (all-gather before a block's forward, reshard after) with dynamo disabled
        (`torch._dynamo.disable(recursive=True)`, "skipping FSDP hooks"): the graph breaks at the first block's hook,
        on every step. The rewrite compiles each block in place after it was sharded (`block.compile(...)`, with the
        call's own options), as torchtitan does, and leaves the root model itself uncompiled. Found in the file the
        break was reached from, where the loop that shards the blocks and the compile of the root are in one function.

    Why is this bad:
        Compiling the root does not compile what the user meant: on torch 2.11 the compiled region stops at the first
        block's hook and the rest of forward runs eagerly, so the blocks' own graph breaks and recompiles are not even
        reported. Compiled per block, each block's forward is one region between FSDP's hooks (which run eagerly, by
        design), and its own problems can be found and fixed.

    Example:
        for block in model.blocks:
            fully_shard(block, mesh=mesh)
        fully_shard(model, mesh=mesh)
        model = torch.compile(model)

    Fix:
        for block in model.blocks:
            fully_shard(block, mesh=mesh)
        fully_shard(model, mesh=mesh)
        for block in model.blocks:
            block.compile()

    Fix safety:
        Safe. The same computation: the blocks run compiled, and the root's own layers (an embedding, a final norm
        and head) run eagerly, as FSDP2's hooks around them already did. `block.compile()` compiles in place: the
        module, its parameter names and its state_dict keys stay as they were (no `_orig_mod.` prefix). Verified
        like every change (losses and final weights before and after).
    """

    rules = ("TM113",)
    name = "compile-fsdp-blocks"
    INVALID = (
        Invalid(
            """
            import torch
            from torch.distributed.fsdp import fully_shard

            def train(model, mesh):
                for layer in model.layers:
                    fully_shard(layer, mesh=mesh)
                fully_shard(model, mesh=mesh)
                compiled = torch.compile(model, mode="max-autotune")
                return compiled(torch.ones(2))  # tm: TM113 where=library
            """,
            """
            import torch
            from torch.distributed.fsdp import fully_shard

            def train(model, mesh):
                for layer in model.layers:
                    fully_shard(layer, mesh=mesh)
                fully_shard(model, mesh=mesh)
                for layer in model.layers:
                    layer.compile(mode="max-autotune")
                compiled = model
                return compiled(torch.ones(2))  # tm: TM113 where=library
            """,
        ),
        Invalid(
            """
            import torch
            from torch.distributed.fsdp import fully_shard

            def train(model, mesh):
                for i, block in enumerate(model.blocks):
                    fully_shard(block, mesh=mesh, reshard_after_forward=i < 3)
                fully_shard(model, mesh=mesh)
                model = torch.compile(model)
                return model(torch.ones(2))  # tm: TM113 where=library
            """,
            """
            import torch
            from torch.distributed.fsdp import fully_shard

            def train(model, mesh):
                for i, block in enumerate(model.blocks):
                    fully_shard(block, mesh=mesh, reshard_after_forward=i < 3)
                fully_shard(model, mesh=mesh)
                for i, block in enumerate(model.blocks):
                    block.compile()
                return model(torch.ones(2))  # tm: TM113 where=library
            """,
        ),
    )
    VALID = (
        # the blocks are compiled already: nothing to move
        Valid(
            """
            import torch
            from torch.distributed.fsdp import fully_shard

            def train(model, mesh):
                for layer in model.layers:
                    fully_shard(layer, mesh=mesh)
                    layer.compile()
                fully_shard(model, mesh=mesh)
                return model(torch.ones(2))  # tm: TM113 where=library
            """,
        ),
        # only the root is sharded: no blocks to compile one by one
        Valid(
            """
            import torch
            from torch.distributed.fsdp import fully_shard

            def train(model, mesh):
                fully_shard(model, mesh=mesh)
                model = torch.compile(model)
                return model(torch.ones(2))  # tm: TM113 where=library
            """,
        ),
    )

    def propose(self, finding: Finding, ctx: Context) -> Result:
        paths = dict.fromkeys(loc.path for loc in (finding.user_frame, finding.call_site) if loc is not None)
        for path in paths:
            if not ctx.in_project(path):
                continue
            src = ctx.file(path)
            sites = _sites(src)
            if sites:
                site = sites[0]
                return Proposal(
                    findings=(finding,),
                    rule="TM113",
                    path=src.path,
                    why=f"compile each fully_shard'ed block of `{site.model}` after sharding ({site.block}.compile()), "
                    "not the whole model: FSDP2's hooks run with dynamo disabled and stop a compiled root at its "
                    "first block",
                    safety=SAFE,
                    replace={site.stmt: _rewrite(src, site)},
                    note="the root's own layers (outside the blocks) now run eagerly",
                )
        return NoFix(
            finding,
            "no `torch.compile(model)` over a fully_shard'ed model, with the loop that shards its blocks in the same "
            "function, in the file the break was reached from",
            rules.BY_CODE["TM113"].advice,
        )
