"""ADAS on the routing set, offline: a scripted meta agent writes routing programs, the sandbox runs them."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest

from agentgrad.algorithms.adas import START, ADASAgent, adas, parse_agent
from agentgrad.algorithms.adas_code import SandboxSolver
from agentgrad.errors import InvalidProposalError
from agentgrad.providers.base import Message
from agentgrad.providers.callable import CallableProvider
from agentgrad.runtime.budget import Budget
from agentgrad.sandbox import Sandbox
from agentgrad.testing import routing_standin as routing
from tests.algorithms.test_adas_support import FAST, conversation, known, learned, program, small_splits

BROKEN = "def run(task_input: str) -> str:\n    return None\n"


class MetaAgent:
    """A scripted meta agent: its agent knows every queue a program in the archive knows, plus those it learns
    from the failures quoted; its first `broken` replies are an agent that crashes. State: every conversation."""

    def __init__(self, broken: int = 0) -> None:
        self.broken = broken
        self.conversations: list[list[Message]] = []

    def __call__(self, messages: Sequence[Message], **params: Any) -> str:
        last = messages[-1].content
        if "# The archive" in last:
            self.conversations.append(list(messages))
        else:
            self.conversations[-1] = list(messages)
        text = conversation(messages)
        table = {**known(text), **learned(text)}
        if self.broken > 0:
            self.broken -= 1
            return json.dumps({"thought": "t", "name": "broken", "code": BROKEN})
        return json.dumps({"reflection": "checked", "thought": f"route {len(table)} queues",
                           "name": f"router-{len(table)}", "code": program(table)})


def _agent(meta: MetaAgent, **options: Any) -> ADASAgent:
    return ADASAgent(SandboxSolver(Sandbox(FAST)), CallableProvider(meta), **options)


def _failed(agent: ADASAgent, code: str, count: int) -> None:
    """Run `code` on the first `count` routing tasks through the agent (traced and scored)."""
    async def go() -> None:
        for task in routing.tasks()[:count]:
            agent.reward(routing.score)(task, await agent.run(code, task))
    anyio.run(go)


def _propose(agent: ADASAgent, code: str) -> Any:
    return anyio.run(agent.propose, code, routing.tasks()[0], "unknown", 0.0)


def _decide(agent: ADASAgent, code: str, diff_id: str, outcome: str) -> None:
    agent.observe("proposal", {"diff": {"id": diff_id, "ops": [{"action": "replace", "old": START, "new": code}]}})
    agent.observe("decision", {"diff_id": diff_id, "outcome": outcome})


def test_each_generation_reads_the_whole_archive_with_the_fitness_of_rejected_agents_too() -> None:
    meta = MetaAgent()
    agent = _agent(meta, reflections=0)
    _failed(agent, START, 2)
    first = _propose(agent, START).text
    _failed(agent, first, 3)
    _decide(agent, first, "p1", "rejected")
    _propose(agent, START)
    prompt = meta.conversations[-1][1].content
    shown = json.loads(prompt.split("# The archive")[1].split("\n\n", 2)[2].split("\n\n#")[0])
    assert [e["name"] for e in shown] == ["initial agent", parse_agent(json.dumps({"code": first, "name": "router-1"}))
                                          ["name"]]
    assert shown[1]["code"] == first and "on 3 tasks" in shown[1]["fitness"] and "mean" in shown[1]["fitness"]
    assert agent.archive[1]["outcome"] == "rejected" and agent.archive[1]["generation"] == 1


def test_each_draft_is_reflected_on_twice_in_one_conversation() -> None:
    meta = MetaAgent()
    agent = _agent(meta)
    _failed(agent, START, 1)
    _propose(agent, START)
    turns = meta.conversations[-1]
    assert [m.role for m in turns] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert "Novelty" in turns[3].content and "list of mistakes" in turns[5].content and agent.asked == 3


def test_a_draft_that_crashes_in_the_sandbox_is_debugged_with_the_sandbox_error() -> None:
    meta = MetaAgent(broken=1)
    agent = _agent(meta, reflections=0)
    _failed(agent, START, 1)
    proposal = _propose(agent, START).text
    debug = meta.conversations[-1][-1].content
    assert "returned NoneType, not str" in debug and proposal != BROKEN and "TABLE" in proposal
    assert agent.asked == 2


def test_an_agent_that_still_crashes_after_debug_max_rounds_is_not_proposed() -> None:
    agent = _agent(MetaAgent(broken=5), reflections=0, debug_max=1)
    with pytest.raises(InvalidProposalError, match="after 1 rounds of debugging"):
        _propose(agent, START)
    assert agent.asked == 2 and not agent.drafts


def test_a_reply_whose_one_function_has_another_name_still_defines_run() -> None:
    agent = parse_agent('Here:\n```python\ndef forward(x):\n    return x\n```')
    assert agent["code"].endswith("run = forward\n")
    assert parse_agent(json.dumps({"code": START}))["code"] == START
    with pytest.raises(InvalidProposalError, match="holds no agent"):
        parse_agent("I cannot help with that.")


def test_adas_in_json_mode_asks_each_turn_for_the_fields_of_its_prompt_and_without_it_for_none() -> None:
    formats: list[Any] = []
    meta = MetaAgent(broken=2)  # the draft and its reflection crash: one round of debugging

    def recording(messages: Sequence[Message], **params: Any) -> str:
        formats.append(params.get("response_format"))
        return meta(messages, **params)

    agent = ADASAgent(SandboxSolver(Sandbox(FAST)), CallableProvider(recording), reflections=1, json_mode=True)
    _failed(agent, START, 1)
    _propose(agent, START)
    names = [f["json_schema"]["name"] for f in formats]
    assert names == ["adas_agent", "adas_reflection", "adas_debug"]  # draft, reflection, debugging the crash
    fields = [f["json_schema"]["schema"]["required"] for f in formats]
    assert all({"thought", "name", "code"} <= set(f) for f in fields)
    assert "reflection" in fields[1] and "debug_thought" in fields[2]
    assert all(f["json_schema"]["schema"]["properties"]["code"]["maxLength"] > 0 for f in formats)
    formats.clear()
    plain = ADASAgent(SandboxSolver(Sandbox(FAST)), CallableProvider(recording), reflections=1)
    _failed(plain, START, 1)
    _propose(plain, START)
    assert formats == [None, None]


@pytest.mark.slow
@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_an_adas_run_finishes_and_improves_the_held_out_reward(tmp_path: Path, asynchronous: bool) -> None:
    meta = MetaAgent()
    agents: list[Mapping[str, Any]] = []
    result = adas(small_splits(), routing.score, reflector=CallableProvider(meta), budget=Budget(calls=60),
                  asynchronous=asynchronous, store=tmp_path / "run", seed=1, sandbox=Sandbox(FAST), eval_tasks=12,
                  reflections=1, examples=8,
                  callbacks=[lambda kind, payload: agents.append(payload) if kind == "commit" else None])
    assert result.ok, result.error
    assert result.test_reward is not None and result.baseline_test_reward is not None
    assert result.test_reward > result.baseline_test_reward + 0.3
    assert len(meta.conversations) >= 2 and agents


def test_the_agent_state_round_trips_through_json() -> None:
    agent = _agent(MetaAgent(), reflections=0)
    _failed(agent, START, 2)
    first = _propose(agent, START).text
    _failed(agent, first, 2)
    _decide(agent, first, "p1", "accepted")
    state = json.loads(json.dumps(agent.state_dict()))
    other = _agent(MetaAgent())
    other.load_state_dict(state)
    assert other.state_dict() == agent.state_dict() and other.archive == agent.archive
