"""What every strategy refuses before any op is made: bad Unicode and control characters (but tab and newline)."""

from __future__ import annotations

import pytest

from agentgrad.errors import InvalidProposalError
from agentgrad.strategies.base import check_proposal


@pytest.mark.parametrize("text", ["- a: use\x00 method 1", "- tip: \x1b[31mred", "- b\x7f", "- c\x0b"])
def test_a_proposal_with_a_control_character_is_refused_naming_it(text: str) -> None:
    with pytest.raises(InvalidProposalError, match=r"control character \(U\+00(00|1B|7F|0B) at index"):
        check_proposal(text, 10_000, "rules")
    with pytest.raises(InvalidProposalError, match="control character"):
        check_proposal([{"action": "add", "content": text}], 10_000, "rules")


def test_tabs_newlines_and_returns_are_text() -> None:
    text = "- a:\tuse method 1\r\n- b: use method 2\n"
    assert check_proposal(text, 10_000, "rules") == text
