"""A mask's data-dependent fast path (`if not mask.any(): mask = None`) is skipped under compile, through TM103's
dispatch (codemods/fixes/mask_fast_path.py): its examples, rewritten and left alone."""

from __future__ import annotations

import textwrap

import pytest

from torchmend.codemods.base import NoFix
from torchmend.codemods.examples import fix_text, proposals
from torchmend.codemods.fixes.mask_fast_path import INVALID, VALID


@pytest.mark.parametrize("source, expected", INVALID, ids=[f"invalid-{i}" for i in range(len(INVALID))])
def test_fast_path_is_skipped_under_compile(source: str, expected: str) -> None:
    text, results = fix_text(textwrap.dedent(source))
    assert text == textwrap.dedent(expected)
    (proposal,) = proposals(results)
    assert proposal.safety == "unsafe" and "general path" in proposal.why
    again, results = fix_text(text)
    assert again == text and not proposals(results)


@pytest.mark.parametrize("source", VALID, ids=[f"valid-{i}" for i in range(len(VALID))])
def test_not_a_fast_path_or_already_gated_is_left_alone(source: str) -> None:
    text, results = fix_text(textwrap.dedent(source))
    assert text == textwrap.dedent(source)
    assert not proposals(results)


def test_another_name_dropped_is_not_taken_for_a_fast_path() -> None:
    """`if not mask.any(): bias = None` is a plain data-dependent branch: torch.where cannot set None either."""
    _, results = fix_text(textwrap.dedent(VALID[2]))
    (why,) = [r for r in results if isinstance(r, NoFix)]
    assert "is_compiling" not in why.reason
