"""Which rule a graph break is, by its id: PyTorch's graph-break registry numbers every kind of break (GB0170,
data-dependent branching) and prints the number in the break's docs link.

Classification reads the id first and the break's texts only where there is no id (records older than the
registry) or one this table does not know (a release newer than the ones read). The ids are read from the registry
each torch wheel ships (`torch/_dynamo/graph_break_registry.json`): 2.11.0 (the H100 machine's), 2.13.0, 2.14.1 and
2.15.0. What they show is in docs/graph-break-ids.md; in short, ids are never renumbered (GB0060 was removed in
2.14, nothing reused), texts are edited under the same id, and a new kind of break gets a new number, so an id
means one thing in every release that has it.

Versioned like the hot-spot table (hotspots.py): each entry names the first release it was read from, and holds
from there on. `python scripts/gb_ids.py --check` checks the table against the installed torch's registry (the
tests run it), `--write` rewrites the block of registry ids from the wheels' registries. Pure: no torch.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from torchmend.model import Where

Version = tuple[int, ...]


@dataclass(frozen=True)
class IdRule:
    gb_id: str
    rule: str
    gb_type: str  # the registry's type for the id, as read (the check compares it with the registry's)
    since: Version  # first release it was read from
    until: Version | None = None  # first release it no longer holds for (None: still current)
    detail: str = ""  # regex on "type\nexplanation" when one id covers several calls (GB0059: any builtin)
    where: Where | None = None  # only for breaks there (a library's own graph_break() is informational)

    def applies(self, version: Version | None) -> bool:
        if version is None:
            return self.until is None
        return version >= self.since and (self.until is None or version < self.until)


V2_11, V2_13, V2_14, V2_15 = (2, 11), (2, 13), (2, 14), (2, 15)  # the releases read

# A call dynamo refuses to trace names the function in its explanation: print, logging and a host random draw keep
# their own rules (`random.random()` up to 2.13 is "the builtin `<unknown module>.Random.random.`", GB0007).
_PRINT = r"`print`"
_LOGGING = r"(?i:logging)|Logger"
_HOST_RANDOM = r"\bRandom\.\w+|\b(?:np|numpy)\.random\.\w+"


def _skipped_call(gb_id: str, gb_type: str, since: Version) -> tuple[IdRule, ...]:
    return (
        IdRule(gb_id, "TM101", gb_type, since, detail=_PRINT),
        IdRule(gb_id, "TM102", gb_type, since, detail=_LOGGING),
        IdRule(gb_id, "TM110", gb_type, since, detail=_HOST_RANDOM),
        IdRule(gb_id, "TM105", gb_type, since),
    )


ID_RULES: tuple[IdRule, ...] = (
    # print(): dynamo has no model of the builtin; the id covers every builtin it cannot trace.
    IdRule("GB0059", "TM101", "Failed to trace builtin operator", V2_11, detail=_PRINT),
    IdRule("GB0291", "TM102", "logging.Logger method not supported for non-export cases", V2_11),
    IdRule("GB0170", "TM103", "Data-dependent branching", V2_11),
    IdRule("GB0035", "TM103", "Data-dependent branching with non-constant __bool__", V2_11),
    IdRule("GB0124", "TM104", "Unsupported Tensor.item() call with capture_scalar_outputs=False", V2_11),
    IdRule("GB0109", "TM104", "Tensor.tolist() with non-integer tensor", V2_11),
    # Calls torch.compile skips: a torch.compiler.disable'd function, a skip-listed one (time.time() up to 2.14,
    # warnings.warn), one dynamo has no model for.
    *_skipped_call("GB0007", "Attempted to call function marked as skipped", V2_11),
    *_skipped_call("GB0008", "Attempted to inline function marked as skipped", V2_11),
    *_skipped_call("GB0009", "Attempted to inline function marked as skipped (SkipFunctionVariable)", V2_11),
    *_skipped_call("GB0098", "Skip calling `torch.compiler.disable()`d function", V2_11),
    *_skipped_call("GB0099", "Skip inlining `torch.compiler.disable()`d function", V2_11),
    IdRule("GB4297", "TM105", "Call to `torch._dynamo.skip_frame()`", V2_11),
    IdRule("GB9741", "TM105", "skip frame due to being in functorch mode", V2_11),
    IdRule("GB7151", "TM105", "generator function over a skipped function", V2_14),
    # `torch.compiler.disable(fn)` / `torch._dynamo.disable(fn)` *called* inside the compiled region: ids of their
    # own from 2.14 (2.11 and 2.13 report `disable` itself as a skipped function, GB0007); torch's remedy is to
    # apply it where fn is defined. The call of fn that follows is GB0098 on every release.
    IdRule("GB0376", "TM105", "Call to `torch._dynamo.disable()`", V2_14),
    IdRule("GB0377", "TM105", "Call to `torch.compiler.disable()`", V2_14),
    # time.time() / time.perf_counter() in compiled code: GB0007 (skipped) up to 2.14, an id of its own from 2.15.
    IdRule("GB9193", "TM105", "Call to a time function", V2_15),
    IdRule("GB0125", "TM109", "Unsupported Tensor.requires_grad_() call", V2_11),
    IdRule("GB0206", "TM109", "setattr() on Tensor.requires_grad", V2_11),
    IdRule("GB0225", "TM109", "Attempted to use tensor creation function with requires_grad=True", V2_11),
    IdRule("GB0237", "TM109", "non-constant `requires_grad` argument to `torch.nn.Parameter`", V2_11),
    IdRule("GB7324", "TM109", "returning intermediate with requires_grad_()", V2_13),
    IdRule("GB8985", "TM109", "requires_grad_() intermediate leaked as output", V2_13),
    # Host random generators: a `random.Random(...)` dynamo cannot build, NumPy's generator when dynamo is told to
    # trace it with its own stream.
    IdRule("GB0297", "TM110", "random.Random() with improper arguments", V2_11),
    IdRule(
        "GB0298",
        "TM110",
        "attempted to trace torch._numpy.random function with config.use_numpy_random_stream=True",
        V2_11,
    ),
    # Operators whose output depends on the data: a config switch may trace them (codemods/fixes/compile_config).
    IdRule("GB0033", "TM111", "Data dependent operator", V2_11),
    IdRule("GB0036", "TM111", "Dynamic shape operator", V2_11),
    IdRule("GB0037", "TM111", "Dynamic shape operator (no meta kernel)", V2_11),
    # torch._dynamo.graph_break(): deliberate in a library (the optimizers' step); in your code, yours to remove.
    IdRule("GB0025", "TM901", "Call to `torch._dynamo.graph_break()`", V2_11, where=Where.LIBRARY),
)

# The ids each registry holds: the first release read, then what each later one added and removed.
# generated:registries (python scripts/gb_ids.py --write REGISTRY.json ...)
REGISTRY_FIRST: tuple[Version, str] = (
    (2, 11),
    "GB0000-0374 GB0442 GB1042 GB1177 GB1297 GB1381 GB1501 GB1739 GB2078 GB2533 GB2549 GB2669 GB2922 GB3326 GB3840 "
    "GB4026 GB4197 GB4271 GB4297 GB4315 GB4636 GB4778 GB4927 GB5696 GB5748 GB6017 GB6210 GB6276 GB6663 GB6735 GB7000 "
    "GB7054 GB7312 GB7425 GB7596 GB7685 GB8335 GB8656 GB8843 GB9186 GB9198 GB9528 GB9567 GB9625 GB9672 GB9741 GB9898",
)
REGISTRY_CHANGES: dict[Version, tuple[str, str]] = {  # release -> (ids added, ids removed)
    (2, 13): (
        "GB0459 GB0467 GB0569 GB0682 GB0755 GB0781 GB0808 GB0811 GB0871 GB1140 GB1220 GB1275 GB1319 GB1380 GB1584 "
        "GB1724 GB1750 GB1752 GB2019 GB2404 GB2464 GB2483 GB2520 GB2544 GB2696 GB2852 GB2861 GB2977 GB3006 GB3241 "
        "GB3343 GB3383 GB3697 GB3775 GB3934 GB4198 GB4240 GB4347 GB4372 GB4393 GB4411 GB4413 GB4501 GB4608 GB4695 "
        "GB4749 GB4841 GB4880 GB5173 GB5195 GB5380 GB5458 GB5565 GB5849 GB5904 GB5976 GB6012 GB6025 GB6053 GB6215 "
        "GB6270 GB6297 GB6604 GB6622 GB6890 GB6999 GB7230 GB7286 GB7299 GB7324 GB7444 GB7489 GB7502 GB7510 GB7637 "
        "GB7650 GB7786 GB7906 GB7968 GB8315 GB8435 GB8887 GB8977 GB8985 GB9137 GB9158 GB9277 GB9300 GB9316 GB9458 "
        "GB9522 GB9548 GB9561 GB9648 GB9840 GB9860",
        "",
    ),
    (2, 14): (
        "GB0375-0377 GB0998 GB1075 GB1273 GB1576 GB1824 GB2069 GB2412 GB2444 GB2473 GB2736 GB3069 GB4234 GB4307 "
        "GB4399 GB4774 GB4818 GB4996 GB5017 GB5282 GB5491 GB5687 GB5884 GB6066 GB6183 GB6441 GB6815 GB7020 GB7072 "
        "GB7151 GB7694 GB7905 GB8165 GB8206 GB8587 GB8593 GB8949 GB9192 GB9203 GB9493 GB9509 GB9760 GB9899",
        "GB0060",
    ),
    (2, 15): (
        "GB0507 GB1157 GB1350 GB1354 GB1392 GB1472 GB1583 GB1618 GB1940 GB2582 GB2710 GB3003 GB3780 GB3837 GB5210 "
        "GB5460 GB5821 GB6404 GB6602 GB6956 GB7168 GB7935 GB8982 GB9118 GB9182 GB9193 GB9211 GB9352 GB9368 GB9890 "
        "GB9958",
        "",
    ),
}
# generated:end


def expand(ids: str) -> frozenset[str]:
    """ "GB0001-0003 GB0170" -> {GB0001, GB0002, GB0003, GB0170}."""
    out: set[str] = set()
    for part in ids.split():
        m = re.fullmatch(r"GB(\d{4})(?:-(\d{4}))?", part)
        if m is None:
            raise ValueError(f"not a graph-break id or range: {part!r}")
        first, last = int(m[1]), int(m[2] or m[1])
        out.update(f"GB{n:04d}" for n in range(first, last + 1))
    return frozenset(out)


def compress(ids: frozenset[str] | set[str]) -> str:
    """The inverse of expand: runs of consecutive ids as ranges."""
    nums = sorted(int(i[2:]) for i in ids)
    runs: list[tuple[int, int]] = []
    for n in nums:
        if runs and n == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], n)
        else:
            runs.append((n, n))
    return " ".join(f"GB{a:04d}" if a == b else f"GB{a:04d}-{b:04d}" for a, b in runs)


def _registries() -> dict[Version, frozenset[str]]:
    current = expand(REGISTRY_FIRST[1])
    sets = {REGISTRY_FIRST[0]: current}
    for release in sorted(REGISTRY_CHANGES):
        added, removed = REGISTRY_CHANGES[release]
        current = (current - expand(removed)) | expand(added)
        sets[release] = current
    return sets


REGISTRIES = _registries()  # release -> the ids its registry holds
READ = tuple(sorted(REGISTRIES))  # the releases read


def known_ids(version: Version | None) -> frozenset[str]:
    """The ids the registry of this release holds, as far as the releases read tell: a release before the first
    read is taken to have the first's ids (ids are never renumbered: one it has that the first lacks is unknown),
    one after the last read, or an unknown release, the last's."""
    if version is None:
        return REGISTRIES[READ[-1]]
    return REGISTRIES[max((r for r in READ if r <= version[:2]), default=READ[0])]


def rule_for_id(gb_id: str | None, gb_text: str, where: str, version: Version | None) -> str | None:
    """The rule of a break with this id on this release; None where the table cannot say (no id, an id the
    release's registry is not known to hold, or an entry read only from later releases): the texts decide then.
    `gb_text` is "type\\nexplanation", for the ids that cover several calls."""
    if not gb_id or gb_id not in known_ids(version):
        return None
    entries = [e for e in ID_RULES if e.gb_id == gb_id]
    if entries and not any(e.applies(version) for e in entries):
        return None
    for e in entries:
        if e.applies(version) and (e.where is None or e.where == where):
            if not e.detail or re.search(e.detail, gb_text):
                return e.rule
    return "TM199"
