"""Each codemod's inline examples: INVALID sources are rewritten to their expected text (and the rewrite
proposes nothing more: idempotent); VALID sources get no proposal."""

from __future__ import annotations

import pytest

from torchmend.codemods.examples import fix_text, proposals
from torchmend.codemods.registry import codemods

INVALID = [
    pytest.param(ex.code, ex.expected, id=f"{type(cm).__name__}-{i}")
    for cm in codemods()
    for i, ex in enumerate(cm.INVALID)
]
VALID = [pytest.param(ex.code, id=f"{type(cm).__name__}-{i}") for cm in codemods() for i, ex in enumerate(cm.VALID)]


@pytest.mark.parametrize("source, expected", INVALID)
def test_invalid_example_is_rewritten(source: str, expected: str) -> None:
    text, results = fix_text(source)
    assert proposals(results), [getattr(r, "reason", r) for r in results]
    assert text == expected
    again, results = fix_text(text)
    assert not proposals(results), "a rewrite must not propose anything more"
    assert again == text


@pytest.mark.parametrize("source", VALID)
def test_valid_example_is_left_alone(source: str) -> None:
    text, results = fix_text(source)
    assert not proposals(results)
    assert text == source


def test_every_codemod_has_examples() -> None:
    for cm in codemods():
        assert cm.INVALID, f"{type(cm).__name__} has no INVALID examples"
