"""The parallel wrappers' own graph breaks: DistributedDataParallel and FSDP2 break the graph inside torch, by
design, and nothing in the user's code can remove those breaks.

Each entry names a break by its graph-break id and the file of its frame (a path suffix: under the torch root, or
the standard library's contextlib for a context manager dynamo skips), with a regex on the reason where one id
covers other calls too. Versioned like the id table (gbids.py): an entry names the first release it was read from
and holds from there on. Read on torch 2.13 (CPU, gloo) and 2.11 (2 x H100, NCCL), the same on both for DDP;
benchmarks/distributed/ makes them (benchmarks/results/distributed-h100-torch2.11.md).

An entry with a `rule` is not "expected": FSDP2's hooks stop a `torch.compile` of the fully_shard'ed root model at
the first block (TM113, which `fix` rewrites into per-block compilation). The others become informational findings
marked `expected`, shown apart and counted neither as findings to fix nor by `--fail-on-findings`. Pure: no torch.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from torchmend import rules
from torchmend.model import Finding, Severity, Where
from torchmend.profiler.gbids import V2_11, V2_13, Version

DDP = "DistributedDataParallel"
FSDP2 = "FSDP2 (fully_shard)"


@dataclass(frozen=True)
class WrapperBreak:
    wrapper: str  # who breaks: DDP, FSDP2
    what: str  # which of its parts, in words
    gb_id: str
    frame: str  # the break's frame file, a path suffix
    detail: str  # regex on the finding's reason
    since: Version  # first release it was read from
    until: Version | None = None  # first release it no longer holds for (None: still current)
    rule: str | None = None  # a rule of its own (a stop that a rewrite removes) instead of the expected class

    def applies(self, version: Version | None) -> bool:
        if version is None:
            return self.until is None
        return version[:2] >= self.since and (self.until is None or version[:2] < self.until)

    def matches(self, f: Finding, version: Version | None) -> bool:
        return (
            f.where != Where.PROJECT
            and f.gb_id == self.gb_id
            and f.path.replace("\\", "/").endswith(self.frame)
            and re.search(self.detail, f.reason) is not None
            and self.applies(version)
        )


WRAPPER_BREAKS: tuple[WrapperBreak, ...] = (
    # DDP's forward logs its runtime stats through a C++ Logger dynamo cannot trace (torch/nn/parallel/distributed.py
    # `_pre_forward`: `self.logger.set_runtime_stats_and_log()`).
    WrapperBreak(DDP, "its logger", "GB0156", "torch/nn/parallel/distributed.py", r"set_runtime_stats_and_log", V2_11),
    # `with self._inside_ddp_forward():` in DDP's forward: a context manager dynamo is told to skip; the break's
    # frame is contextlib's, the reason names DDP's method.
    WrapperBreak(DDP, "`_inside_ddp_forward`", "GB0007", "contextlib.py", r"_inside_ddp_forward", V2_11),
    # FSDP2's forward hooks are wrapped in torch._dynamo.disable(recursive=True) ("skipping FSDP hooks"): on 2.11 in
    # `_fsdp_state.py`'s `fsdp_hook_wrapper`, from 2.13 in `_fsdp_common.py`'s `_dynamo_disable` (2.12 not read).
    WrapperBreak(
        FSDP2,
        "its hooks",
        "GB0007",
        "torch/distributed/fsdp/_fully_shard/_fsdp_state.py",
        r"`disable`",
        V2_11,
        until=V2_13,
        rule="TM113",
    ),
    WrapperBreak(
        FSDP2,
        "its hooks",
        "GB0007",
        "torch/distributed/fsdp/_fully_shard/_fsdp_common.py",
        r"`disable`",
        V2_13,
        rule="TM113",
    ),
)


def wrapper_break(f: Finding, version: Version | None) -> WrapperBreak | None:
    return next((w for w in WRAPPER_BREAKS if w.matches(f, version)), None)


def expected_text(w: WrapperBreak, torch_version: str | None) -> str:
    on = f"torch {'.'.join(map(str, torch_version_tuple(torch_version)))}" if torch_version else "this torch"
    return f"from {w.wrapper} ({w.what}), expected on {on}; not in your code"


def torch_version_tuple(text: str | None) -> Version:
    m = re.match(r"(\d+)\.(\d+)", text or "")
    return (int(m.group(1)), int(m.group(2))) if m else ()


def mark_wrapper_breaks(findings: list[Finding], torch_version: str | None, version: Version | None) -> list[Finding]:
    """The findings with the parallel wrappers' own breaks marked: informational and `expected` (shown apart), or
    re-filed under their own rule (TM113)."""
    out = []
    for f in findings:
        w = wrapper_break(f, version)
        if w is None:
            out.append(f)
        elif w.rule is not None:
            rule = rules.BY_CODE[w.rule]
            out.append(replace(f, rule=rule.code, title=rule.title))
        else:
            out.append(replace(f, severity=Severity.INFO, expected=expected_text(w, torch_version)))
    return out
