"""Known hot spots inside libraries, and what to change on the user's side so they stop costing.

torchmend never edits a library; for a finding inside one it can say what the user's code can do instead.
Each entry names the library releases it was read from (the code moves between releases); a finding gets
the advice only when the run's release is in that range. Pure: no torch.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from torchmend.model import Finding, Where


def parse_version(text: str | None) -> tuple[int, ...] | None:
    """ "4.46.3" -> (4, 46, 3); "2.13.0+cpu" -> (2, 13, 0); None when unreadable."""
    m = re.match(r"(\d+(?:\.\d+)*)", text or "")
    return tuple(int(p) for p in m.group(1).split(".")) if m else None


@dataclass(frozen=True)
class HotSpot:
    library: str  # the distribution, as importlib.metadata names it
    since: tuple[int, ...]  # first release the entry was read from
    until: tuple[int, ...] | None  # first release it no longer holds for (None: still current)
    file: str  # regex on the finding's path, inside the library
    rules: tuple[str, ...]  # the findings it explains
    pattern: str  # regex on "function\nreason\nguard\nvariable"
    advice: str

    def matches(self, f: Finding, versions: dict[str, str]) -> bool:
        version = parse_version(versions.get(self.library))
        if version is None or version < self.since or (self.until is not None and version >= self.until):
            return False
        text = f"{f.function}\n{f.reason}\n{f.guard or ''}\n{f.variable or ''}"
        return f.rule in self.rules and bool(re.search(self.file, f.path)) and bool(re.search(self.pattern, text))


HOT_SPOTS: tuple[HotSpot, ...] = (
    # PreTrainedModel.loss_function warns (logger.warning_once) when the model has no known loss_type.
    HotSpot(
        "transformers",
        (4, 46),
        None,
        r"transformers/modeling_utils\.py$",
        ("TM102",),
        r"^loss_function\n",
        "transformers warns here when the model has no recognised `loss_type`: set it before compiling "
        '(e.g. model.loss_type = "ForCausalLM"), and the logging break goes away',
    ),
    # *ForSequenceClassification.forward sets config.problem_type on its first call with labels.
    HotSpot(
        "transformers",
        (4, 0),
        None,
        r"transformers/models/[^/]+/modeling_[^/]+\.py$",
        ("TM201", "TM209", "TM299", "TM902"),
        r"problem_type",
        "the model sets `config.problem_type` on its first call with labels, which recompiles: set it "
        'before compiling (model.config.problem_type = "single_label_classification", "regression" or '
        '"multi_label_classification")',
    ),
    # nn.TransformerEncoder/Decoder compare the mask with a causal one (`.all()` -> bool) unless told.
    HotSpot(
        "torch",
        (2, 1),
        None,
        r"torch/nn/modules/transformer\.py$",
        ("TM104", "TM103"),
        r"^_detect_is_causal_mask\n|item|bool",
        "nn.Transformer* checks whether the mask is causal with a Python bool; pass is_causal=True with the "
        "causal mask (e.g. encoder(x, mask=causal, is_causal=True)) and the check is skipped",
    ),
)


def advice_for(f: Finding, versions: dict[str, str]) -> str | None:
    """The user-side remedy for a known library hot spot, when the run's release is one the entry covers."""
    return next((h.advice for h in HOT_SPOTS if h.matches(f, versions)), None)


def with_library_advice(f: Finding, versions: dict[str, str]) -> Finding:
    """The finding, with the remedy of a known hot spot added to its reason when it is one."""
    advice = advice_for(f, versions) if f.where == Where.LIBRARY else None
    return replace(f, reason=f"{f.reason} (known library hot spot: {advice})") if advice else f
