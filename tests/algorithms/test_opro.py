"""OPRO on the routing set, offline: a scripted optimizer model answers the meta-prompt as a good one would."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from agentgrad.algorithms.opro import OproAgent, instruction_of, opro, recipe
from agentgrad.data.task import Task
from agentgrad.providers.base import Message
from agentgrad.providers.callable import CallableProvider
from agentgrad.runtime.budget import Budget
from agentgrad.testing import routing_standin as routing

_ENTRY = re.compile(r"<INS>\n(.*?)\n</INS>\nscore: (\d+)", re.DOTALL)


def history_of(prompt: str) -> list[tuple[str, int]]:
    """The (instruction, score) pairs a meta-prompt lists, in its order."""
    head = prompt.split("The instruction is used on tasks")[0]
    return [(text, int(score)) for text, score in _ENTRY.findall(head)]


class Optimizer:
    """A scripted optimizer model: it starts from the best-scored instruction (the last one listed) and adds the
    lessons of the exemplars it is shown. State: every meta-prompt it was sent."""

    def __init__(self) -> None:
        self.prompts: list[str] = []

    def __call__(self, messages: Sequence[Message], **params: Any) -> str:
        prompt = messages[-1].content
        self.prompts.append(prompt)
        listed = history_of(prompt)
        best = [line for line in (listed[-1][0] if listed else "").splitlines() if line.strip()]
        new = [rule for rule in routing.lessons(prompt) if rule not in best]
        return "Here is a better one.\n<INS>\n" + "\n".join(best + new) + "\n</INS>"


def _run(tmp_path: Path, *, asynchronous: bool, optimizer: Optimizer, calls: int = 260) -> Any:
    return opro(routing.tasks(), routing.score, run=routing.solve, reflector=CallableProvider(optimizer),
                budget=Budget(calls=calls), asynchronous=asynchronous, store=tmp_path / "run", seed=3, candidates=4)


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_an_opro_run_finishes_and_improves_the_held_out_reward(tmp_path: Path, asynchronous: bool) -> None:
    result = _run(tmp_path, asynchronous=asynchronous, optimizer=Optimizer())
    assert result.ok, result.error
    assert result.test_reward is not None and result.baseline_test_reward is not None
    assert result.test_reward > result.baseline_test_reward + 0.2


def test_the_meta_prompt_lists_the_scored_history_ascending_with_the_best_last(tmp_path: Path) -> None:
    optimizer = Optimizer()
    result = _run(tmp_path, asynchronous=False, optimizer=optimizer)
    assert result.ok, result.error
    listings = [history_of(p) for p in optimizer.prompts]
    long = [entries for entries in listings if len(entries) >= 3]
    assert long, "candidates judged earlier should join the history"
    for entries in listings:
        scores = [score for _, score in entries]
        assert scores == sorted(scores) and len(entries) <= 20
    assert any(max(s for _, s in entries) > min(s for _, s in entries) for entries in long)


def test_one_synchronous_round_samples_several_candidates_before_any_verdict(tmp_path: Path) -> None:
    kinds: list[str] = []
    rec = recipe(run=routing.solve, reflector=CallableProvider(Optimizer()), seed=3, candidates=4)

    def watch(kind: str, payload: Mapping[str, Any]) -> None:
        kinds.append(kind)

    result = rec.evolve(routing.tasks(), routing.score, budget=Budget(calls=120), store=tmp_path / "run", seed=3,
                        callbacks=[watch])
    assert result.ok, result.error
    first_verdict = kinds.index("decision")
    assert kinds[:first_verdict].count("proposal") >= 3  # one step: several candidates, then the gate


def test_the_history_keeps_rejected_candidates_with_their_scores() -> None:
    agent = OproAgent(routing.solve, CallableProvider(Optimizer()), seed=0)
    task = routing.tasks()[0]
    bad = "- billing tickets go to ZZZ-0"
    asyncio.run(agent.run(bad, task))
    agent.reward(routing.score)(task, routing.solve(bad, task))
    agent.observe("proposal", {"diff": {"id": "p1", "ops": [{"action": "replace", "old": "", "new": bad}]}})
    agent.observe("decision", {"diff_id": "p1", "outcome": "rejected"})
    assert agent.ranked() == [(bad, 0.0)]
    prompt = agent.meta_prompt(task)
    assert history_of(prompt) == [(bad, 0)] and task.input in prompt


def test_the_reply_parser_takes_the_last_tagged_instruction() -> None:
    assert instruction_of("<INS>a</INS> then <INS> b </INS>") == "b"
    assert instruction_of("```\nc\n```") == "c"


def test_the_agent_state_round_trips_through_json(tmp_path: Path) -> None:
    optimizer = Optimizer()
    rec = recipe(run=routing.solve, reflector=CallableProvider(optimizer), seed=3, candidates=4)
    result = rec.evolve(routing.tasks(), routing.score, budget=Budget(calls=100), store=tmp_path / "run", seed=3)
    assert result.ok, result.error
    agent = rec.agent
    assert isinstance(agent, OproAgent)
    state = json.loads(json.dumps(agent.state_dict()))
    twin = OproAgent(routing.solve, CallableProvider(optimizer), seed=9)
    twin.load_state_dict(state)
    assert twin.state_dict() == agent.state_dict()
    task: Task = routing.tasks()[5]
    assert twin.ranked() == agent.ranked() and twin.meta_prompt(task) == agent.meta_prompt(task)
