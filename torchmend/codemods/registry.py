"""The codemod registry: every Codemod subclass in torchmend/codemods/fixes/, keyed by the rules it fixes.

Discovered by importing each module of that package and of its subpackages (in the order of their dotted names, which
is the order last resorts are asked in), so adding a fix is adding a file.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from functools import lru_cache

from torchmend.codemods.base import Codemod


@lru_cache(maxsize=1)
def codemods() -> tuple[Codemod, ...]:
    from torchmend.codemods import fixes

    found: list[Codemod] = []
    names = sorted(info.name for info in pkgutil.walk_packages(fixes.__path__, f"{fixes.__name__}."))
    for name in names:
        module = importlib.import_module(name)
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if (
                issubclass(cls, Codemod)
                and cls is not Codemod
                and cls.__module__ == module.__name__
                and (cls.rules or cls.gb_ids or cls.last_resort)
            ):
                found.append(cls())
    return tuple(found)


@lru_cache(maxsize=1)
def by_rule() -> dict[str, Codemod]:
    table: dict[str, Codemod] = {}
    for cm in codemods():
        for code in cm.rules:
            if code in table:
                raise RuntimeError(
                    f"rule {code} has two codemods: {type(table[code]).__name__} and {type(cm).__name__}"
                )
            table[code] = cm
    return table


@lru_cache(maxsize=1)
def by_cause() -> dict[str, Codemod]:
    return {code: cm for cm in codemods() for code in cm.causes}


@lru_cache(maxsize=1)
def by_gb_id() -> dict[str, Codemod]:
    return {gb: cm for cm in codemods() for gb in cm.gb_ids}


@lru_cache(maxsize=1)
def last_resorts() -> tuple[Codemod, ...]:
    """The codemods asked when a finding's own has no fix (Codemod.last_resort), in the order they are asked."""
    return tuple(sorted((cm for cm in codemods() if cm.last_resort), key=lambda cm: cm.last_resort_order))


def codemod_for(code: str) -> Codemod | None:
    return by_rule().get(code)


def codemod_for_finding(rule: str, cause: str | None, gb_id: str | None = None) -> Codemod | None:
    """The codemod for a finding: the one that fixes its cause when there is one, else its rule's, else (a rule
    without a codemod) the one that fixes its graph-break id."""
    return (
        (by_cause().get(cause) if cause else None) or by_rule().get(rule) or (by_gb_id().get(gb_id) if gb_id else None)
    )
