"""Reflexion on the engine, offline on the shipped routing set: the stand-in solver and a scripted self-reflector."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest

from agentgrad.algorithms.reflexion import Episode, ReflexionAgent, reflexion
from agentgrad.data.task import Task
from agentgrad.errors import InvalidProposalError
from agentgrad.providers.base import Message
from agentgrad.providers.callable import CallableProvider
from agentgrad.runtime.budget import Budget
from agentgrad.testing import routing_standin


def scripted(messages: Sequence[Message], **params: Any) -> str:
    """A good self-reflector: the plan names the code of the ticket's queue, after "Plan:"."""
    prompt = messages[-1].content
    assert "Plan:" in prompt and "## The task" in prompt, prompt[:200]
    rules = [r.removeprefix("- ") for r in routing_standin.lessons(prompt.split("## The task", 1)[1])]
    return "The answer named no queue code.\nPlan: " + ("; ".join(rules) or "read the ticket again")


def useless(messages: Sequence[Message], **params: Any) -> str:
    return "Plan: read the ticket more carefully"


def _task(queue: str) -> Task:
    return next(t for t in routing_standin.tasks() if t.meta["queue_name"] == queue)


def _agent(task: Task, fn: Any = scripted, **options: Any) -> ReflexionAgent:
    agent = ReflexionAgent(routing_standin.solve, CallableProvider(fn), train=[task.id], **options)
    agent.reward(routing_standin.score)  # what Recipe.evolve does: the reward is the episodes' evaluator
    return agent


def test_reflexion_reflects_on_a_failure_retries_with_the_reflection_and_keeps_every_attempt() -> None:
    task = _task("billing")
    agent = _agent(task)
    episode = anyio.run(agent.run, "", task)
    assert isinstance(episode, Episode)
    first, second = episode.attempts
    assert (first.answer, first.passed, first.reflection) == ("unknown", False, "billing tickets go to KTR-4")
    assert (second.answer, second.passed, second.trial) == ("KTR-4", True, 2)
    assert episode.text == "unknown"  # scored: what the lessons alone gave, not the label-guided retry
    assert list(agent.attempts) == [first, second] and agent.asked == 1
    lesson = anyio.run(agent.propose, "", task, episode.text, 0.0).text
    assert lesson == "billing tickets go to KTR-4"  # the verified reflection becomes the lesson


def test_reflexion_stops_after_n_trials_and_shows_only_the_last_window_of_reflections() -> None:
    task, seen = _task("delivery"), []

    def solver(rendered: str, t: Task) -> str:
        seen.append(rendered.count("\n- "))
        return routing_standin.solve(rendered, t)

    agent = _agent(task, useless, trials=4, window=2)
    agent.solver = solver
    episode = anyio.run(agent.run, "", task)
    assert isinstance(episode, Episode)
    assert [a.passed for a in episode.attempts] == [False] * 4 and agent.asked == 3
    assert seen == [0, 1, 2, 2]  # the reflections in context: none, then at most `window`
    with pytest.raises(InvalidProposalError, match="no reflection"):
        anyio.run(agent.propose, "", task, episode.text, 0.0)


def test_a_task_outside_training_gets_one_try_and_never_a_label() -> None:
    agent = _agent(_task("billing"))
    other = _task("returns")
    assert anyio.run(agent.run, "", other) == "unknown"
    assert agent.asked == 0 and not agent.attempts


def test_a_label_free_evaluator_runs_reflexion_at_test_time_and_answers_with_the_last_try() -> None:
    task = _task("returns")
    agent = ReflexionAgent(routing_standin.solve, CallableProvider(scripted), evaluator=lambda t, a: a != "unknown")
    episode = anyio.run(agent.run, "", task)
    assert isinstance(episode, Episode) and episode.text == "HWF-9" and len(episode.attempts) == 2


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_a_reflexion_run_finishes_and_improves_the_held_out_reward(tmp_path: Path, asynchronous: bool) -> None:
    result = reflexion(routing_standin.tasks(), routing_standin.score, run=routing_standin.solve,
                       reflector=CallableProvider(scripted), budget=Budget(calls=200), asynchronous=asynchronous,
                       store=tmp_path / "run", seed=0)
    assert result.ok, result.error
    assert result.test_reward is not None and result.baseline_test_reward is not None
    assert result.test_reward > result.baseline_test_reward + 0.2
    rows = json.loads((tmp_path / "run" / "reflexion_attempts.json").read_text())
    assert rows and {r["trial"] for r in rows} >= {1, 2}  # every attempt of every episode is on disk


def test_the_reflexion_agent_state_round_trips() -> None:
    task = _task("billing")
    agent = _agent(task)
    anyio.run(agent.run, "", task)
    state = json.loads(json.dumps(agent.state_dict()))
    again = _agent(task)
    again.load_state_dict(state)
    assert again.state_dict() == agent.state_dict() and list(again.attempts) == list(agent.attempts)
    assert anyio.run(again.propose, "", task, "unknown", 0.0).text == "billing tickets go to KTR-4"
