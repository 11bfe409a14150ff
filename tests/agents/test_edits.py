"""Structured edits from a model's reply are found, validated, and refused with a reason when malformed."""

from __future__ import annotations

import pytest

from agentgrad.agents.edits import parse_edits
from agentgrad.errors import InvalidProposalError


def test_edits_are_read_from_plain_or_fenced_json() -> None:
    plain = '{"edits": [{"action": "add", "content": "Answer in one word."}]}'
    fenced = 'Here you go:\n```json\n' + plain + '\n```\nDone.'
    assert parse_edits(plain) == parse_edits(fenced) == [{"action": "add", "content": "Answer in one word."}]


def test_replace_and_delete_carry_their_target() -> None:
    edits = parse_edits('{"edits": [{"action": "replace", "content": "new", "target": "old"},'
                        ' {"action": "delete", "content": "x", "target": "x"}]}')
    assert [e["target"] for e in edits] == ["old", "x"]


@pytest.mark.parametrize(("reply", "reason"), [
    ("no json at all", "no JSON"),
    ('{"changes": []}', '"edits" list'),
    ('{"edits": ["add a rule"]}', "must be an object"),
    ('{"edits": [{"action": "paste", "content": "x"}]}', "action must be one of"),
    ('{"edits": [{"action": "add", "content": ""}]}', "non-empty"),
    ('{"edits": [{"action": "add", "content": "two\\nlines"}]}', "one non-empty line"),
    ('{"edits": [{"action": "replace", "content": "x"}]}', "target"),
    ('{"edits": [' + ",".join(['{"action": "add", "content": "r"}'] * 4) + "]}", "at most 3"),
])
def test_malformed_replies_are_refused_with_the_reason(reply: str, reason: str) -> None:
    with pytest.raises(InvalidProposalError, match=reason):
        parse_edits(reply)
