"""Structured edits from a model's reply are found, validated, and refused with a reason when malformed."""

from __future__ import annotations

import pytest

from agentgrad.agents.edits import RULE_SCHEMA, check_general, parse_edits, parse_rule
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


# --- one rule ------------------------------------------------------------------------------------------------

def test_a_rule_is_read_from_json_or_from_the_first_plain_line() -> None:
    assert parse_rule('{"rule": "Answer with one word."}') == "Answer with one word."
    assert parse_rule('```json\n{"rule": "Answer with one word."}\n```') == "Answer with one word."
    assert parse_rule('\n- "Answer with one word."\nand some chatter') == "Answer with one word."


@pytest.mark.parametrize(("reply", "reason"), [
    ("   \n ", "no rule"),
    ('{"rule": "Answer with one', "cut off"),
    ('{"advice": "Answer with one word."}', '"rule" string'),
    ('{"rule": "Answer\\nwith one word."}', "one line"),
    ('{"rule": "Positive."}', "3 to 40 words"),
    ('{"rule": "' + "word " * 41 + '"}', "3 to 40 words"),
])
def test_malformed_rules_are_refused_with_the_reason(reply: str, reason: str) -> None:
    with pytest.raises(InvalidProposalError, match=reason):
        parse_rule(reply)


def test_a_rule_that_only_echoes_the_prompt_is_refused() -> None:
    echo = "Answer with only one word: fruit or vegetable."
    with pytest.raises(InvalidProposalError, match="only repeats"):
        parse_rule('{"rule": "answer with only one word:  FRUIT or vegetable"}', echoes=[echo])
    assert parse_rule('{"rule": "Answer with only one word: yes or no."}', echoes=[echo]).endswith("yes or no.")


def test_the_rule_schema_asks_for_exactly_one_rule_string() -> None:
    assert RULE_SCHEMA["required"] == ["rule"] and RULE_SCHEMA["additionalProperties"] is False
    assert RULE_SCHEMA["properties"]["rule"]["type"] == "string"


@pytest.mark.parametrize("rule", [
    "Answer with only one word: positive or negative.",
    "Answer with only one word, the sentiment.",
    "Answer positively worded reviews with care.",  # "positive" inside a longer word is not the answer
    "Write the date as YYYY-MM-DD.",
])
def test_general_rules_pass(rule: str) -> None:
    check_general(rule, ["positive", "negative", "neutral"])
    check_general("Answer with only one word: positive.", ["positive", "Positive"])  # one distinct answer only


@pytest.mark.parametrize(("rule", "answers"), [
    ("Answer with only one word: POSITIVE.", ["positive", "negative"]),
    ("Answer with only one word: negative.", ["positive", "negative"]),
    ("Answer 2012-01-03.", ["2012-01-03", "2018-12-02"]),
    ("Answer with only the number: 6790.", ["6790", "53", "648"]),
])
def test_rules_naming_one_of_several_answers_are_refused(rule: str, answers: list[str]) -> None:
    with pytest.raises(InvalidProposalError, match="fits one task, not the kind"):
        check_general(rule, answers)
