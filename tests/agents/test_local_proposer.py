"""The one-rule scaffold against a real llama.cpp server: the json_schema parameter reaches the server's grammar,
so every reply is ``{"rule": "..."}``, and a seed makes a sampled proposal repeatable.

Uses SmolLM2-135M (tiny: it exercises the plumbing, not the quality of the rules). Skipped, with the reason, when
xllamacpp or the weights package is not installed.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

import anyio
import pytest

from agentgrad.agents.skill import make_agent
from agentgrad.data.task import Task
from agentgrad.errors import InvalidProposalError
from agentgrad.providers.base import Completion, Message
from agentgrad.providers.local import LocalModel, local
from agentgrad.providers.weights import LocalUnavailableError

TASK = Task("t1", "The blender started leaking after a week of use.", "negative")


class Taped:
    """The local model, with every reply text kept."""

    def __init__(self, model: LocalModel) -> None:
        self.model, self.name, self.replies = model, model.name, list[str]()

    async def complete(self, messages: Sequence[Message], **params: Any) -> Completion:
        completion = await self.model.complete(messages, **params)
        self.replies.append(completion.text)
        return completion


@pytest.fixture(scope="module")
def smol() -> Iterator[LocalModel]:
    try:
        model = local("smollm2-135m", n_parallel=1, n_ctx=2048, threads=1)
    except LocalUnavailableError as exc:
        pytest.skip(f"the local model is unavailable: {exc}")
    yield model
    model.close()


def propose(agent: Any) -> str | None:
    try:
        return str(anyio.run(agent.propose, "", TASK, "It sounds like the blender has a leak. Here is what to do", 0.0)
                   .text)
    except InvalidProposalError:
        return None  # a rule the checks refuse is a recorded failure, not a crash


def test_every_reply_of_the_local_proposer_is_a_rule_object(smol: LocalModel) -> None:
    taped = Taped(smol)
    agent = make_agent(taped, local=True, seed=11)
    rules = [propose(agent) for _ in range(2)]
    assert len(taped.replies) == 2
    for reply in taped.replies:
        data = json.loads(reply)  # the grammar allows nothing else
        assert list(data) == ["rule"] and isinstance(data["rule"], str) and 8 <= len(data["rule"]) <= 200
    kept = {json.loads(reply)["rule"].strip().strip("-*•\"'` ").strip() for reply in taped.replies}
    assert all(rule is None or rule in kept for rule in rules)


def test_the_same_seed_gives_the_same_sampled_proposal(smol: LocalModel) -> None:
    first, second = Taped(smol), Taped(smol)
    propose(make_agent(first, local=True, seed=5))
    propose(make_agent(second, local=True, seed=5))
    assert first.replies == second.replies and json.loads(first.replies[0])["rule"]
