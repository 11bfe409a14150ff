"""SkillOpt on the routing set, offline: a scripted optimizer model answers the reflection prompt in SkillOpt's
JSON edit format, with the rules a good model would draw from the failed tickets it is shown."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from agentgrad.algorithms.skillopt import Cosine, SkillOptAgent, edits_of, recipe, skillopt
from agentgrad.errors import InvalidProposalError
from agentgrad.providers.base import Message
from agentgrad.providers.callable import CallableProvider
from agentgrad.runtime.budget import Budget
from agentgrad.testing import routing_standin as routing


def section(prompt: str, name: str) -> str:
    """One `## name` section of the reflection prompt."""
    return prompt.split(f"## {name}\n", 1)[1].split("\n## ", 1)[0]


class Optimizer:
    """A scripted optimizer: one "append" per lesson of the failed tasks shown, plus `extra` filler edits (to
    test clipping). State: every prompt it was sent."""

    def __init__(self, extra: int = 0) -> None:
        self.extra = extra
        self.prompts: list[str] = []

    def __call__(self, messages: Sequence[Message], **params: Any) -> str:
        prompt = messages[-1].content
        self.prompts.append(prompt)
        skill = section(prompt, "Current skill")
        rules = [r for r in routing.lessons(section(prompt, "Failed tasks")) if r not in skill]
        rules += [f"- filler note {i}" for i in range(self.extra)]
        return json.dumps({"reasoning": "shared failures", "edits": [{"op": "append", "content": r} for r in rules]})


def _run(tmp_path: Path, *, asynchronous: bool, calls: int = 250) -> Any:
    return skillopt(routing.tasks(), routing.score, run=routing.solve, reflector=CallableProvider(Optimizer()),
                    budget=Budget(calls=calls), asynchronous=asynchronous, store=tmp_path / "run", seed=3)


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_a_skillopt_run_finishes_and_improves_the_held_out_reward(tmp_path: Path, asynchronous: bool) -> None:
    result = _run(tmp_path, asynchronous=asynchronous)
    assert result.ok, result.error
    assert result.test_reward is not None and result.baseline_test_reward is not None
    assert result.test_reward > result.baseline_test_reward + 0.3


def test_the_edit_budget_decays_on_its_schedule_and_clips_every_proposal() -> None:
    agent = SkillOptAgent(routing.solve, CallableProvider(Optimizer(extra=6)), budget=Cosine(4, 2, steps=4))
    task = routing.tasks()[0]
    first = asyncio.run(agent.propose("", task, "unknown", 0.0))
    assert agent.learning_rate() == 4 and len(first.text) == 4
    for i in range(4):
        agent.observe("proposal", {"diff": {"id": f"p{i}", "ops": [{"new": "- x"}]}})
        agent.observe("decision", {"diff_id": f"p{i}", "outcome": "rejected"})
    later = asyncio.run(agent.propose("", task, "unknown", 0.0))
    assert agent.step == 4 and agent.learning_rate() == 2 and len(later.text) == 2
    assert [Cosine(4, 2, 4)(s) for s in (0, 2, 4, 9)] == [4.0, 3.0, 2.0, 2.0]


def test_rejected_edits_are_shown_to_every_later_reflection() -> None:
    optimizer = Optimizer()
    agent = SkillOptAgent(routing.solve, CallableProvider(optimizer))
    agent.observe("proposal", {"diff": {"id": "p1", "ops": [{"new": "- billing tickets go to ZZZ-0"}]}})
    agent.observe("decision", {"diff_id": "p1", "outcome": "held"})  # not final: no step, no buffer
    assert agent.step == 0 and agent.rejected == []
    agent.observe("decision", {"diff_id": "p1", "outcome": "rejected"})
    asyncio.run(agent.propose("", routing.tasks()[0], "unknown", 0.0))
    assert "- billing tickets go to ZZZ-0" in section(optimizer.prompts[-1], "Rejected edits")


def test_a_commit_follows_a_strict_check_on_the_whole_validation_split(tmp_path: Path) -> None:
    result = _run(tmp_path, asynchronous=False)
    assert result.ok, result.error
    judged = [d for d in result.decisions if d.outcome.value in ("accepted", "rejected")]
    assert judged and all(d.numbers["n"] == 23 and d.numbers["margin"] == 0.0 for d in judged)
    assert result.counts.get("screened_out", 0) == 0
    assert any(d.outcome.value == "rejected" and d.numbers["wins"] > 0 for d in judged)  # a gain is not enough


def test_the_reply_parser_maps_skillopt_ops_and_refuses_non_json() -> None:
    reply = '{"edits": [{"op": "insert_after", "target": "- a", "content": "- b"}, {"op": "delete", "target": "- c"}]}'
    assert edits_of(reply) == [{"action": "add", "content": "- b", "target": "- a"},
                               {"action": "delete", "target": "- c"}]
    with pytest.raises(InvalidProposalError):
        edits_of("no edits here")


def test_the_agent_state_round_trips_through_json(tmp_path: Path) -> None:
    optimizer = Optimizer()
    rec = recipe(run=routing.solve, reflector=CallableProvider(optimizer), seed=3)
    result = rec.evolve(routing.tasks(), routing.score, budget=Budget(calls=150), store=tmp_path / "run", seed=3)
    assert result.ok, result.error
    agent = rec.agent
    assert isinstance(agent, SkillOptAgent) and agent.step > 0
    state = json.loads(json.dumps(agent.state_dict()))
    twin = SkillOptAgent(routing.solve, CallableProvider(optimizer), seed=9)
    twin.load_state_dict(state)
    assert twin.state_dict() == agent.state_dict()
    task = routing.tasks()[1]
    assert twin.prompt(result.artifact.text, task, 3) == agent.prompt(result.artifact.text, task, 3)
