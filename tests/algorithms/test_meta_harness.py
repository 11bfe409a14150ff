"""Meta-Harness on the engine: the proposer reads earlier harnesses in full with their scores and raw training
traces, a harness built on an older candidate replaces the head as a whole, the harness is L1 (one change in
flight, a full check before it lands), and runs learn on both runtimes."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest

from agentgrad.algorithms.meta_harness import MetaHarnessAgent, meta_harness, parse_reply
from agentgrad.core.artifact import Artifact, Kind, Layer
from agentgrad.data.task import Task
from agentgrad.errors import InvalidProposalError
from agentgrad.providers.base import Message
from agentgrad.providers.callable import CallableProvider
from agentgrad.runtime.budget import Budget
from agentgrad.testing import routing_standin as routing


def model(messages: Sequence[Message], **params: Any) -> str:
    """A scripted proposer: it copies the best-scored harness shown and adds the lessons its traces teach."""
    prompt = messages[-1].content.split("\n## Reply", 1)[0]
    best, base, code = -2.0, "", ""
    for block in prompt.split("\n### ")[1:]:
        found = re.search(r"score ([0-9.]+)", block.split("\n", 1)[0])
        score = float(found.group(1)) if found else -1.0
        if score > best:
            best, base = score, block.split(":", 1)[0]
            code = block.split("```harness\n", 1)[1].split("\n```", 1)[0].replace("(empty)", "")
    new = [line for line in routing.lessons(prompt) if line not in code]
    return (f"HYPOTHESIS: naming the codes of the queues that fail in the traces fixes them\nBASE: {base}\n"
            "```harness\n" + "\n".join([code, *new]).strip() + "\n```")


def _tasks(queue: str) -> list[Task]:
    return [t for t in routing.tasks() if t.meta["queue_name"] == queue]


def _run(agent: MetaHarnessAgent, text: str, tasks: Sequence[Task]) -> None:
    for task in tasks:
        answer = routing.solve(text, task)
        agent.log.ran(text, task.id, answer)
        agent.log.scored(task.id, answer, routing.score(task, answer))


def _spied(agent: MetaHarnessAgent) -> list[str]:
    prompts: list[str] = []

    def spy(messages: Sequence[Message], **params: Any) -> str:
        prompts.append(messages[-1].content)
        return model(messages, **params)

    agent.reflector = CallableProvider(spy)
    return prompts


def _world() -> tuple[MetaHarnessAgent, str, str, dict[str, Task]]:
    """An agent whose archive holds the head and a rejected candidate that scored better, both with traces."""
    agent = MetaHarnessAgent(routing.solve, CallableProvider(model))
    tasks = {"billing": _tasks("billing")[0], "returns": _tasks("returns")[0], "val": _tasks("delivery")[0]}
    head, older = "Answer with the queue code.", routing.rule("returns", "HWF-9")
    for task in (tasks["billing"], tasks["returns"]):
        agent.tasks[task.id] = (str(task.input), str(task.expected))  # training tasks proposals were made for
    agent.remember(head)
    agent.remember(older, hypothesis="returns need their code", base="h0", outcome="rejected")
    _run(agent, head, [tasks["billing"], tasks["returns"]])
    _run(agent, older, [tasks["billing"], tasks["returns"], tasks["val"]])
    return agent, head, older, tasks


def test_the_proposer_reads_earlier_harnesses_in_full_with_scores_and_raw_training_traces() -> None:
    agent, head, older, tasks = _world()
    prompts = _spied(agent)
    anyio.run(agent.propose, head, tasks["billing"], "unknown", 0.0)
    prompt = prompts[0]
    assert head in prompt and older in prompt  # every shown harness in full
    assert "h0: score 0.000 on 2 tasks; verdict: head (current)" in prompt
    assert "h1: score 0.333 on 3 tasks; verdict: rejected; built on h0; hypothesis: returns need" in prompt
    assert str(tasks["billing"].input) in prompt and "output: unknown" in prompt and "expected: KTR-4" in prompt
    assert "output: HWF-9" in prompt  # successes are shown too, after the failures
    assert str(tasks["val"].input) not in prompt  # a task no proposal was made for: its traces stay hidden


def test_a_harness_built_on_an_older_candidate_replaces_the_head_as_a_whole() -> None:
    agent, head, older, tasks = _world()
    reply = anyio.run(agent.propose, head, tasks["billing"], "unknown", 0.0)
    written = str(reply.text)
    assert written.startswith(older) and routing.rule("billing", "KTR-4") in written  # h1, the better, copied
    assert head not in written
    ((proposal, base),) = agent.pending[tasks["billing"].id]
    assert proposal.base == "h1" and base == head
    agent.observe("proposal", {"diff": {"artifact": "harness", "base": 0, "id": "p1", "ops": [
        {"action": "replace", "scope": "text", "old": head, "new": written, "at": None}]},
        "task": tasks["billing"].id})
    agent.observe("decision", {"diff_id": "p1", "outcome": "full_check"})
    assert agent.remember(written).outcome == "full_check" and agent.remember(written).base == "h1"


def test_parse_reply_reads_the_hypothesis_the_base_and_the_last_block() -> None:
    written = parse_reply("HYPOTHESIS: fewer words\nBASE: h3\n```harness\nline one\nline two\n```")
    assert (written.hypothesis, written.base, written.code) == ("fewer words", "h3", "line one\nline two")


def _outcomes(tmp_path: Path, asynchronous: bool) -> tuple[Any, list[Mapping[str, Any]]]:
    decisions: list[Mapping[str, Any]] = []

    def record(kind: str, payload: Mapping[str, Any]) -> None:
        if kind == "decision":
            decisions.append(dict(payload))

    result = meta_harness(routing.tasks(), routing.score, run=routing.solve, reflector=CallableProvider(model),
                          budget=Budget(calls=300), asynchronous=asynchronous, store=tmp_path / "run", seed=0,
                          callbacks=[record])
    return result, decisions


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_a_run_improves_the_harness_on_both_runtimes(tmp_path: Path, asynchronous: bool) -> None:
    result, _ = _outcomes(tmp_path, asynchronous)
    assert result.ok, result.error
    assert result.baseline_test_reward is not None and result.test_reward is not None
    assert result.test_reward >= result.baseline_test_reward + 0.3  # L1: one change at a time, each fully checked


def test_the_harness_is_l1_one_change_in_flight_each_landing_after_a_full_check(tmp_path: Path) -> None:
    result, decisions = _outcomes(tmp_path, asynchronous=True)
    assert result.ok, result.error
    checking: set[str] = set()
    checked: set[str] = set()
    for decision in decisions:
        diff, outcome = decision["diff_id"], decision["outcome"]
        if outcome == "full_check":
            checking.add(diff)
            checked.add(diff)
            assert len(checking) == 1, "a second L1 change went out while one was in its full check"
        elif outcome not in ("recheck", "deferred", "extend"):
            checking.discard(diff)
        if outcome == "accepted":
            assert diff in checked
    assert any(d["outcome"] == "accepted" for d in decisions)


def test_the_agent_state_round_trips_through_json() -> None:
    agent, head, _, tasks = _world()
    anyio.run(agent.propose, head, tasks["billing"], "unknown", 0.0)
    state = json.loads(json.dumps(agent.state_dict()))
    other = MetaHarnessAgent(routing.solve, CallableProvider(model))
    other.load_state_dict(state)
    assert other.state_dict() == state
    assert other.archive == agent.archive and other.tasks == agent.tasks


def test_a_library_run_rewrites_the_harness_member_and_leaves_the_others(tmp_path: Path) -> None:
    artifacts = {"harness": Artifact("harness", Kind.HARNESS, ""),
                 "policy": Artifact("policy", Kind.PROMPT, "Be polite.", Layer.L0)}
    result = meta_harness(routing.tasks(), routing.score, run=routing.solve, reflector=CallableProvider(model),
                          artifact=artifacts, budget=Budget(calls=300), store=tmp_path / "run")
    assert result.ok, result.error
    assert result.artifacts["policy"].text == "Be polite."
    assert result.test_reward is not None and result.baseline_test_reward is not None
    assert result.test_reward > result.baseline_test_reward


def test_a_reply_without_a_fence_is_the_harness_after_its_fields_and_one_without_a_harness_is_refused() -> None:
    written = parse_reply("HYPOTHESIS: name the codes\nBASE: h0\n- billing tickets go to KTR-4")
    assert (written.base, written.code) == ("h0", "- billing tickets go to KTR-4")
    with pytest.raises(InvalidProposalError, match="no harness"):
        parse_reply("HYPOTHESIS: something\nBASE: h0")


def test_in_json_mode_the_proposer_asks_for_one_object_and_reads_its_fields_and_without_it_asks_for_none() -> None:
    agent, head, older, tasks = _world()
    seen: list[tuple[str, Any]] = []

    def json_model(messages: Sequence[Message], **params: Any) -> str:
        seen.append((messages[-1].content, params.get("response_format")))
        fenced = parse_reply(model(messages, **params))
        return json.dumps({"hypothesis": fenced.hypothesis, "base": fenced.base, "harness": fenced.code})

    agent.reflector, agent.json_mode = CallableProvider(json_model), True
    reply = anyio.run(agent.propose, head, tasks["billing"], "unknown", 0.0)
    prompt, shape = seen[0]
    assert shape["json_schema"]["schema"]["required"] == ["hypothesis", "base", "harness"]
    assert '"harness": "<the whole new harness' in prompt and "```harness\n<the whole" not in prompt
    assert str(reply.text).startswith(older)
    ((written, _),) = agent.pending[tasks["billing"].id]
    assert written.base == "h1" and written.hypothesis.startswith("naming the codes")
    agent.json_mode = False
    anyio.run(agent.propose, head, tasks["returns"], "unknown", 0.0)
    assert seen[1][1] is None and "## Reply in exactly this shape" in seen[1][0]
    with pytest.raises(InvalidProposalError, match="object holds no harness"):
        parse_reply(json.dumps({"hypothesis": "h", "base": "h0", "harness": " "}))
