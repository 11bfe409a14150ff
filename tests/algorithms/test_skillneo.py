"""SkillNEO on the routing set, offline: a scripted model rewrites the skill it is shown, adding the rules a good
model would draw from the failed tickets in the prompt."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from agentgrad.algorithms.skillneo import SkillNeoAgent, recipe, skillneo
from agentgrad.providers.base import Message
from agentgrad.providers.callable import CallableProvider
from agentgrad.runtime.budget import Budget
from agentgrad.testing import routing_standin as routing


def section(prompt: str, name: str) -> str:
    """One `## name` section of the improvement prompt."""
    return prompt.split(f"## {name}\n", 1)[1].split("\n## ", 1)[0].split("\nRewrite the skill")[0].strip()


class Writer:
    """A scripted model: the skill it is shown plus up to `per_call` new rules from the failed tickets.
    State: the skill each prompt showed."""

    def __init__(self, per_call: int = 8) -> None:
        self.per_call = per_call
        self.bases: list[str] = []

    def __call__(self, messages: Sequence[Message], **params: Any) -> str:
        prompt = messages[-1].content
        skill = section(prompt, "Skill")
        self.bases.append(skill)
        lines = [] if skill == "(empty)" else skill.splitlines()
        new = [r for r in routing.lessons(section(prompt, "Failed tasks")) if r not in lines][:self.per_call]
        return "Here is the new skill:\n```\n" + "\n".join(lines + new) + "\n```"


class Verdicts:
    """A callback: each proposed candidate's text and each verdict. State: both, by diff id."""

    def __init__(self) -> None:
        self.texts: dict[str, str] = {}
        self.outcomes: dict[str, str] = {}

    def __call__(self, kind: str, payload: Mapping[str, Any]) -> None:
        if kind == "proposal":
            self.texts[payload["diff"]["id"]] = str(payload["diff"]["ops"][0]["new"]).strip()
        elif kind == "decision":
            self.outcomes[payload["diff_id"]] = payload["outcome"]


def _run(tmp_path: Path, *, asynchronous: bool, writer: Writer, calls: int = 250) -> Any:
    return skillneo(routing.tasks(), routing.score, run=routing.solve, reflector=CallableProvider(writer),
                    budget=Budget(calls=calls), asynchronous=asynchronous, store=tmp_path / "run", seed=3)


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_a_skillneo_run_finishes_and_improves_the_held_out_reward(tmp_path: Path, asynchronous: bool) -> None:
    result = _run(tmp_path, asynchronous=asynchronous, writer=Writer())
    assert result.ok, result.error
    assert result.test_reward is not None and result.baseline_test_reward is not None
    assert result.test_reward > result.baseline_test_reward + 0.3


def test_proposals_build_on_a_lineage_member_that_lost_to_the_use_version(tmp_path: Path) -> None:
    writer, verdicts = Writer(per_call=1), Verdicts()
    rec = recipe(run=routing.solve, reflector=CallableProvider(writer), seed=3)
    result = rec.evolve(routing.tasks(), routing.score, budget=Budget(calls=250), store=tmp_path / "run", seed=3,
                        callbacks=[verdicts])
    assert result.ok, result.error
    lost = {verdicts.texts[d] for d, o in verdicts.outcomes.items() if o in ("rejected", "conflict")}
    assert lost & set(writer.bases), "some proposal should build on a candidate that did not beat the head"
    served = {verdicts.texts[d] for d, o in verdicts.outcomes.items() if o == "accepted"}
    assert result.artifact.text.strip() in served  # the use version moved only to a candidate that beat it


def test_the_use_version_moves_only_on_acceptance_and_the_lineage_restarts_after_patience() -> None:
    writer = Writer()
    agent = SkillNeoAgent(routing.solve, CallableProvider(writer), patience=2)
    task = routing.tasks()[0]
    asyncio.run(agent.propose("- start", task, "unknown", 0.0))
    assert writer.bases[-1] == "- start"
    for i, (text, outcome) in enumerate([("- a", "accepted"), ("- a\n- b", "rejected")]):
        agent.observe("proposal", {"diff": {"id": f"p{i}", "ops": [{"new": text}]}})
        agent.observe("decision", {"diff_id": f"p{i}", "outcome": outcome})
    assert agent.served == "- a" and agent.tip == "- a\n- b"
    asyncio.run(agent.propose("- a", task, "unknown", 0.0))
    assert writer.bases[-1] == "- a\n- b"  # built on the member that lost, not on the use version
    agent.observe("proposal", {"diff": {"id": "p2", "ops": [{"new": "- a\n- c"}]}})
    agent.observe("decision", {"diff_id": "p2", "outcome": "conflict"})
    assert agent.tip == "- a" and agent.streak == 0  # two losses in a row: back to the use version
    assert agent.repair({"ops": [{"new": "- a\n- c"}]}, "- z") == "- a\n- c"


def test_the_agent_state_round_trips_through_json(tmp_path: Path) -> None:
    writer = Writer()
    rec = recipe(run=routing.solve, reflector=CallableProvider(writer), seed=3)
    result = rec.evolve(routing.tasks(), routing.score, budget=Budget(calls=150), store=tmp_path / "run", seed=3)
    assert result.ok, result.error
    agent = rec.agent
    assert isinstance(agent, SkillNeoAgent) and agent.tip is not None
    state = json.loads(json.dumps(agent.state_dict()))
    twin = SkillNeoAgent(routing.solve, CallableProvider(writer), seed=9)
    twin.load_state_dict(state)
    assert twin.state_dict() == agent.state_dict()
    task = routing.tasks()[2]
    assert twin.prompt(result.artifact.text, task) == agent.prompt(result.artifact.text, task)
