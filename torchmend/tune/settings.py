"""The compile settings tune compares: eager (no compile), the inductor modes, and dynamic=None/True/False.

A setting is applied to every torch.compile call of the script by the child (profiler/collector.override_compile),
so the script is measured as written, one setting at a time. Names on the command line and in reports:
`eager`, a mode (`default`, `reduce-overhead`, `max-autotune-no-cudagraphs`, `max-autotune`), or a mode with a
dynamic setting (`max-autotune:dynamic=True`; `dynamic=True` alone is `default:dynamic=True`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

EAGER = "eager"
DEFAULT = "default"
MODES = ("default", "reduce-overhead", "max-autotune-no-cudagraphs", "max-autotune")
DYNAMIC = {"None": None, "True": True, "False": False}
INDUCTOR = "inductor"


class SettingError(ValueError):
    pass


@dataclass(frozen=True)
class Setting:
    mode: str | None  # None: eager (no compile at all)
    dynamic: str | None = None  # "None" | "True" | "False"; None: the script's own
    backend: str = INDUCTOR

    @property
    def eager(self) -> bool:
        return self.mode is None

    @property
    def name(self) -> str:
        if self.eager:
            return EAGER
        if self.dynamic is None:
            return self.mode or DEFAULT
        return f"dynamic={self.dynamic}" if self.mode == DEFAULT else f"{self.mode}:dynamic={self.dynamic}"

    def override(self) -> tuple[tuple[str, Any], ...]:
        """The child's settings (RunSpec.compile) for this arm."""
        if self.eager:
            return (("eager", True),)
        fields: list[tuple[str, Any]] = []
        if self.backend == INDUCTOR:
            fields.append(("mode", self.mode))
        if self.dynamic is not None:
            fields.append(("dynamic", DYNAMIC[self.dynamic]))
        return tuple(fields)


def parse(text: str, backend: str = INDUCTOR) -> Setting:
    """One setting from its name: `eager`, `MODE`, `dynamic=X` or `MODE:dynamic=X`."""
    text = text.strip()
    if text == EAGER:
        return Setting(None, backend=backend)
    mode, _, dynamic = text.partition(":")
    if mode.startswith("dynamic="):
        mode, dynamic = DEFAULT, mode
    if mode not in MODES:
        raise SettingError(f"unknown setting {text!r}: give eager, one of {', '.join(MODES)}, or MODE:dynamic=X")
    value = None
    if dynamic:
        key, _, value = dynamic.partition("=")
        if key != "dynamic" or value not in DYNAMIC:
            raise SettingError(f"unknown setting {text!r}: the part after the mode is dynamic=None|True|False")
    if backend != INDUCTOR and mode != DEFAULT:
        raise SettingError(f"{text}: modes are inductor's; with --backend {backend} give default or dynamic=X")
    return Setting(mode, value, backend)


def parse_all(texts: list[str], backend: str = INDUCTOR) -> list[Setting]:
    """Settings from repeated and/or comma-separated names, eager first (the baseline always runs), no repeats."""
    chosen: list[Setting] = [Setting(None, backend=backend)]
    for part in (p for t in texts for p in t.split(",") if p.strip()):
        setting = parse(part, backend)
        if setting not in chosen:
            chosen.append(setting)
    return chosen


def base_settings(backend: str = INDUCTOR) -> list[Setting]:
    """What the default list starts with, before tune knows the device: eager and default (the probe runs)."""
    return [Setting(None, backend=backend), Setting(DEFAULT, backend=backend)]


def more_settings(cuda: bool, shapes_vary: bool, own_dynamic: set[str], backend: str = INDUCTOR) -> list[Setting]:
    """The default list's other settings once the first eager and default runs have shown the device and whether
    shapes vary. `own_dynamic`: the dynamic values the script's own torch.compile calls pass."""
    extra: list[Setting] = []
    if backend == INDUCTOR:
        modes = MODES[1:] if cuda else ("max-autotune",)
        extra += [Setting(m) for m in modes]
    if shapes_vary:
        values = ["True", "False"] + (["None"] if own_dynamic - {"None"} else [])
        extra += [Setting(DEFAULT, v, backend) for v in values]
    return extra


def skipped(cuda: bool, backend: str = INDUCTOR) -> dict[str, str]:
    """The settings the default list leaves out, with the reason."""
    if backend != INDUCTOR:
        return {m: f"modes are inductor's; --backend {backend} compiles without one" for m in MODES[1:]}
    if cuda:
        return {}
    return {
        "reduce-overhead": "no CUDA graphs on a CPU: it compiles as default does (name it in --settings to run it)",
        "max-autotune-no-cudagraphs": "no CUDA graphs on a CPU: it is max-autotune there (name it in --settings "
        "to run it)",
    }


def cpu_note(setting: Setting, cuda: bool) -> str:
    """A note for a setting run where part of it does not exist (asked for by name)."""
    if cuda or setting.eager or setting.mode not in ("reduce-overhead", "max-autotune"):
        return ""
    return "no CUDA graphs on a CPU"
