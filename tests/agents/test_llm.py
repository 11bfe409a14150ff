"""LLMAgent: the skill goes in the system message; proposals are validated, repaired once, then refused."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import anyio
import pytest

from agentgrad.agents.llm import LLMAgent, load_prompt
from agentgrad.data.task import Task
from agentgrad.errors import InvalidProposalError
from agentgrad.providers.base import Completion, Message, Usage
from agentgrad.providers.callable import CallableProvider

TASK = Task("t1", "Great film, loved it.", "positive")


class Script:
    """A fake model that answers from a list of replies and records every conversation it saw."""

    def __init__(self, *replies: str) -> None:
        self.replies = list(replies)
        self.seen: list[list[Message]] = []

    def __call__(self, messages: Sequence[Message], **params: Any) -> str:
        self.seen.append(list(messages))
        return self.replies.pop(0)


def test_run_puts_the_skill_in_the_system_message_and_the_task_in_the_user_message() -> None:
    model = Script("positive")
    agent = LLMAgent(CallableProvider(model))
    completion = anyio.run(agent.run, "Reply with one word.", TASK)
    assert completion.text == "positive"
    assert [(m.role, m.content) for m in model.seen[0]] == [("system", "Reply with one word."),
                                                            ("user", TASK.input)]


def test_an_empty_skill_sends_no_system_message() -> None:
    model = Script("ok")
    anyio.run(LLMAgent(CallableProvider(model)).run, "  ", TASK)
    assert [m.role for m in model.seen[0]] == ["user"]


def test_propose_shows_the_failure_and_returns_validated_edits() -> None:
    model = Script('{"edits": [{"action": "add", "content": "Answer with one lowercase word."}]}')
    edits = anyio.run(LLMAgent(CallableProvider(model)).propose, "", TASK, "It is a positive review!", 0.0).text
    assert edits == [{"action": "add", "content": "Answer with one lowercase word."}]
    prompt = model.seen[0][0].content
    assert TASK.input in prompt and "It is a positive review!" in prompt and "positive" in prompt


def test_a_malformed_proposal_gets_one_repair_attempt() -> None:
    model = Script("I think you should add a rule.", '{"edits": [{"action": "add", "content": "Be brief."}]}')
    edits = anyio.run(LLMAgent(CallableProvider(model)).propose, "", TASK, "x", 0.0).text
    assert edits == [{"action": "add", "content": "Be brief."}]
    assert len(model.seen) == 2 and "could not be used" in model.seen[1][-1].content


def test_a_proposal_malformed_twice_is_a_recorded_failure() -> None:
    model = Script("nope", "still nope")
    with pytest.raises(InvalidProposalError, match="twice"):
        anyio.run(LLMAgent(CallableProvider(model)).propose, "", TASK, "x", 0.0)
    assert len(model.seen) == 2


def test_repair_shows_the_current_skill_and_the_stale_edit() -> None:
    model = Script('{"edits": []}')
    diff = {"ops": [{"action": "add", "new": "- be brief", "old": None}]}
    assert anyio.run(LLMAgent(CallableProvider(model)).repair, diff, "- cite sources").text == []
    assert "- cite sources" in model.seen[0][0].content and "be brief" in model.seen[0][0].content


def test_prompts_live_in_files() -> None:
    assert "{skill}" in load_prompt("reflect") and "{edit}" in load_prompt("repair")


def test_unstructured_proposals_are_one_clean_rule_line() -> None:
    model = Script('\n- "Answer with one lowercase word."\nExtra chatter.')
    agent = LLMAgent(CallableProvider(model), structured=False)
    assert anyio.run(agent.propose, "", TASK, "x", 0.0).text == "Answer with one lowercase word."


def test_an_empty_unstructured_proposal_is_a_recorded_failure() -> None:
    agent = LLMAgent(CallableProvider(Script("  \n ")), structured=False)
    with pytest.raises(InvalidProposalError, match="no rule"):
        anyio.run(agent.propose, "", TASK, "x", 0.0)


def test_proposal_usage_covers_the_repair_attempt_too() -> None:
    replies = iter([Completion("not json", Usage(10, 5, 0.01), 0.0, "m"),
                    Completion('{"edits": [{"action": "add", "content": "Be brief."}]}', Usage(20, 7, 0.02), 0.0, "m")])

    def model(messages: Sequence[Message], **params: Any) -> Completion:
        return next(replies)

    proposal = anyio.run(LLMAgent(CallableProvider(model)).propose, "", TASK, "x", 0.0)
    assert (proposal.usage.input_tokens, proposal.usage.output_tokens) == (30, 12)
    assert proposal.usage.cost == pytest.approx(0.03)
