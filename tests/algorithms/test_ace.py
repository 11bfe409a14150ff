"""ACE on the engine, offline on the shipped routing set: the stand-in solver and a scripted reflector / curator."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest

from agentgrad.algorithms.ace import AceAgent, ace, recipe
from agentgrad.algorithms.ace_playbook import bullets
from agentgrad.data.task import Task
from agentgrad.errors import InvalidProposalError
from agentgrad.providers.base import Message
from agentgrad.providers.callable import CallableProvider
from agentgrad.runtime.budget import Budget
from agentgrad.testing import routing_standin

_SHOWN = re.compile(r"^\[(\S+)\] helpful=\d+ harmful=\d+ :: (.*)$", re.MULTILINE)


def _tags(prompt: str, rules: Sequence[str]) -> list[dict[str, str]]:
    """A good reflector's tags: a bullet that states a lesson is helpful, one giving its queue another code harmful."""
    tags = []
    for bullet_id, content in _SHOWN.findall(prompt):
        for rule in (r.removeprefix("- ") for r in rules):
            queue = rule.rsplit(" go to ", 1)[0]
            if content == rule:
                tags.append({"id": bullet_id, "tag": "helpful"})
            elif content.startswith(queue + " "):
                tags.append({"id": bullet_id, "tag": "harmful"})
    return tags


def scripted(messages: Sequence[Message], **params: Any) -> str:
    """The reflector and the curator as a good model would answer, in ACE's JSON formats."""
    prompt = messages[-1].content
    rules = routing_standin.lessons(prompt)
    if '"bullet_tags"' in prompt:
        return json.dumps({"reasoning": "the playbook lacks this queue's code", "error_identification": "wrong code",
                           "root_cause_analysis": "no bullet names the queue", "correct_approach": "look it up",
                           "key_insight": "; ".join(rules) or "none", "bullet_tags": _tags(prompt, rules)})
    assert '"operations"' in prompt, prompt[:200]
    return json.dumps({"reasoning": "add the missing code",
                       "operations": [{"type": "ADD", "section": "strategies_and_insights",
                                       "content": r.removeprefix("- ")} for r in rules]})


def _agent(**options: Any) -> AceAgent:
    return AceAgent(routing_standin.solve, CallableProvider(scripted), **options)


def _task(queue: str) -> Task:
    return next(t for t in routing_standin.tasks() if t.meta["queue_name"] == queue)


def _propose(agent: AceAgent, playbook: str, task: Task) -> Any:
    output = routing_standin.solve(playbook, task)
    return anyio.run(agent.propose, playbook, task, output, routing_standin.score(task, output)).text


def test_ace_counters_change_after_reflector_tags_and_gate_feedback_and_a_harmful_bullet_is_pruned() -> None:
    agent = _agent(prune_at=2)
    playbook = "- strat-00001: billing tickets go to ZEH-7\n"
    first = _propose(agent, playbook, _task("billing"))
    assert agent.counters.get("strat-00001").harmful == 1  # the reflector's tag moved the counter
    assert first == {"strat-00002": "billing tickets go to KTR-4"}  # a new bullet with a fresh id
    agent.observe("proposal", {"diff": {"id": "p1", "ops": [{"action": "add", "new": "- strat-00002: x"}]}})
    agent.observe("decision", {"diff_id": "p1", "outcome": "accepted", "numbers": {"wins": 4.0, "losses": 1.0}})
    assert (agent.counters.get("strat-00002").helpful, agent.counters.get("strat-00002").harmful) == (4, 1)
    second = _propose(agent, playbook + "- strat-00002: billing tickets go to KTR-4\n", _task("billing"))
    assert agent.counters.get("strat-00001").harmful == 2 and agent.counters.get("strat-00002").helpful == 5
    assert second == {"strat-00001": None}  # harmful twice, never helpful: deleted; the lesson is not re-added


def test_ace_drops_an_addition_that_repeats_a_bullet() -> None:
    agent = _agent()
    with pytest.raises(InvalidProposalError, match="nothing new"):
        _propose(agent, "- misc-00009: Billing tickets go to KTR-4.\n", _task("billing"))
    assert agent.next_id == 10  # past the ids in use, and none spent on the duplicate


def test_ace_keeps_the_playbook_within_its_token_budget() -> None:
    agent = _agent(token_budget=25)
    playbook = "- strat-00001: delivery tickets go to MZV-2\n- strat-00002: returns tickets go to HWF-9\n"
    agent.counters.tag("strat-00002", "helpful")
    delta = _propose(agent, playbook, _task("billing"))
    assert delta == {"strat-00003": "billing tickets go to KTR-4", "strat-00001": None}
    assert "strat-00002" not in delta  # the helpful bullet stays; the unproven one makes room


def test_ace_in_json_mode_asks_each_role_for_a_schema_naming_every_field_its_parser_reads() -> None:
    formats: list[Any] = []

    def recording(messages: Sequence[Message], **params: Any) -> str:
        formats.append(params.get("response_format"))
        reply = scripted(messages)
        schema = params["response_format"]["json_schema"]["schema"]
        assert sorted(json.loads(reply)) == sorted(schema["required"])  # the scripted replies fit the schema
        return reply

    agent = AceAgent(routing_standin.solve, CallableProvider(recording), json_mode=True, params={"temperature": 0})
    _propose(agent, "", _task("billing"))
    reflection, curation = (f["json_schema"]["schema"] for f in formats)
    assert "bullet_tags" in reflection["required"] and "key_insight" in reflection["required"]
    assert curation["required"] == ["reasoning", "operations"]
    assert curation["properties"]["operations"]["items"]["required"] == ["type", "section", "content"]


def test_ace_without_json_mode_sends_no_response_format_as_the_released_default() -> None:
    seen: list[dict[str, Any]] = []

    def recording(messages: Sequence[Message], **params: Any) -> str:
        seen.append(params)
        return scripted(messages)

    _propose(AceAgent(routing_standin.solve, CallableProvider(recording), params={"max_tokens": 9}), "",
             _task("billing"))
    assert seen == [{"max_tokens": 9}, {"max_tokens": 9}]


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_an_ace_run_finishes_and_improves_the_held_out_reward(tmp_path: Path, asynchronous: bool) -> None:
    result = ace(routing_standin.tasks(), routing_standin.score, run=routing_standin.solve,
                 reflector=CallableProvider(scripted), budget=Budget(calls=200), asynchronous=asynchronous,
                 store=tmp_path / "run", seed=0, epochs=2)
    assert result.ok, result.error
    assert result.test_reward is not None and result.baseline_test_reward is not None
    assert result.test_reward > result.baseline_test_reward + 0.2
    ids = [b.id for b in bullets(result.artifact.text)]
    assert ids and len(ids) == len(set(ids)) and all(re.fullmatch(r"[a-z]+-\d{5}", i) for i in ids)
    saved = json.loads((tmp_path / "run" / "ace_state.json").read_text())
    assert any(helpful > 0 for helpful, _ in saved["counters"].values())  # accepted deltas credited their bullets


def test_an_online_ace_run_takes_one_pass_one_task_at_a_time(tmp_path: Path) -> None:
    result = ace(routing_standin.tasks(), routing_standin.score, run=routing_standin.solve,
                 reflector=CallableProvider(scripted), store=tmp_path / "run", seed=0, mode="online")
    assert result.ok, result.error
    assert result.usage.rollouts <= 46
    assert result.test_reward is not None and result.baseline_test_reward is not None
    assert result.test_reward > result.baseline_test_reward


def test_the_ace_agent_state_round_trips() -> None:
    agent = _agent()
    _propose(agent, "- strat-00001: billing tickets go to ZEH-7\n", _task("billing"))
    task = _task("billing")
    assert agent.pending == {f"task:{task.id}": {"strat-00002": "billing tickets go to KTR-4"}}
    agent.observe("proposal", {"task": task.id, "diff": {"id": "p7", "ops": [{"action": "add",
                                                                               "new": "- strat-00002: y"}]}})
    state = json.loads(json.dumps(agent.state_dict()))
    again = _agent()
    again.load_state_dict(state)
    assert again.state_dict() == agent.state_dict()
    assert again.counters.get("strat-00001").harmful == 1 and again.pending == {"p7": {"strat-00002": "y"}}
    assert recipe(run=routing_standin.solve, reflector=CallableProvider(scripted), samples=46).budget.rollouts == 230
