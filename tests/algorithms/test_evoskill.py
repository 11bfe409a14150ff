"""EvoSkill on the engine: failures become named skill folders that are created and then revised, a top-K frontier
chooses the parent (a non-head parent arrives as the edits that make the head into it), the feedback history
carries each verdict to the next proposer, and runs learn on both runtimes."""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest

from agentgrad.algorithms.evoskill import EvoSkillAgent, evoskill
from agentgrad.algorithms.evoskill_folders import folders
from agentgrad.algorithms.evoskill_frontier import Frontier, Member
from agentgrad.algorithms.traces import TraceLog
from agentgrad.core.artifact import Artifact, Kind, Layer
from agentgrad.core.diff import apply_ops
from agentgrad.data.task import Task
from agentgrad.providers.base import Message
from agentgrad.providers.callable import CallableProvider
from agentgrad.runtime.budget import Budget
from agentgrad.strategies.sections import Sections
from agentgrad.testing import routing_standin as routing

SKILL = "queue-codes"


def _section(prompt: str, title: str) -> str:
    return prompt.split(f"## {title}", 1)[1].split("\n## ", 1)[0]


def model(messages: Sequence[Message], **params: Any) -> str:
    """A scripted reflector in EvoSkill's two roles: the proposer (a JSON create/edit decision from the quoted
    failures) and the skill writer (the folder, keeping the rules it has and adding the proposed ones)."""
    prompt = messages[-1].content
    if "## Failures to explain" in prompt:
        lessons = routing.lessons(_section(prompt, "Failures to explain"))
        edit = f"- {SKILL}:" in _section(prompt, "Skills the agent has now")
        return json.dumps({"action": "edit" if edit else "create", "target_skill": SKILL if edit else None,
                           "proposed_skill": "\n".join(lessons), "justification": "the failed tickets' queues"})
    rules = [line for line in prompt.splitlines() if "tickets go to" in line]
    body = list(dict.fromkeys(rules))
    return "```markdown\n" + "\n".join([f"## {SKILL}", "description: the queue code of each kind of ticket", "",
                                        *body]) + "\n```"


def _tasks(queue: str) -> list[Task]:
    return [t for t in routing.tasks() if t.meta["queue_name"] == queue]


def _agent(**options: Any) -> EvoSkillAgent:
    return EvoSkillAgent(routing.solve, CallableProvider(model), category="queue_name", **options)


def _score(log: TraceLog, text: str, tasks: Sequence[Task]) -> None:
    for task in tasks:
        answer = routing.solve(text, task)
        log.ran(text, task.id, answer)
        log.scored(task.id, answer, routing.score(task, answer))


def test_failures_become_a_named_skill_folder_that_a_later_failure_revises_in_place() -> None:
    agent = _agent()
    billing, delivery = _tasks("billing")[0], _tasks("delivery")[0]
    first = anyio.run(agent.propose, "", billing, "unknown", 0.0)
    (created,) = first.text
    assert created["action"] == "add" and created["content"].startswith(f"## {SKILL}\ndescription:")
    assert routing.rule("billing", "KTR-4") in created["content"]
    head = Sections().ops(first.text, "")[0].new or ""
    assert routing.solve(head, billing) == "KTR-4"
    second = anyio.run(agent.propose, head, delivery, "unknown", 0.0)
    (edit,) = agent.pending[delivery.id]
    assert (edit.proposal.action, edit.proposal.target) == ("edit", SKILL)  # the proposer saw the skill it has
    revised = Sections().ops(second.text, head)
    assert len(revised) == 1 and revised[0].action.value == "replace"  # the same folder, revised: no second one
    new = revised[0].new or ""
    assert routing.rule("billing", "KTR-4") in new and routing.rule("delivery", "MZV-2") in new
    assert list(folders(new)) == [SKILL]


def test_the_proposer_sees_failures_of_several_categories_but_none_the_parent_already_passes() -> None:
    agent = _agent(failures=3)
    billing, returns, delivery = _tasks("billing")[:2], _tasks("returns")[0], _tasks("delivery")[0]
    for task in (delivery, returns, billing[1], billing[0]):
        agent._remember(task, "unknown")
    _score(agent.log, "", [returns])  # the parent fails it: it stays in the batch
    shown = agent._batch("")
    assert [f.task_id for f in shown] == [billing[0].id, returns.id, delivery.id]  # a new category before a repeat
    learned = routing.rule("returns", "HWF-9")
    _score(agent.log, learned, [returns])
    assert returns.id not in [f.task_id for f in agent._batch(learned)]


def test_the_frontier_keeps_the_top_k_and_evicts_only_for_a_better_candidate() -> None:
    frontier = Frontier(size=2)
    assert frontier.admit(Member("a", "A", 0.2)) and frontier.admit(Member("b", "B", 0.5))
    assert not frontier.admit(Member("c", "C", 0.1))  # full, and worse than the worst
    assert frontier.admit(Member("d", "D", 0.3))  # beats the worst, which leaves
    assert [m.label for m in frontier.ranked(lambda member: None)] == ["b", "d"]
    robin = Frontier(size=3, selection="round_robin")
    for label, score in (("x", 0.1), ("y", 0.9), ("z", 0.5)):
        robin.admit(Member(label, label.upper(), score))
    picks = [robin.select(lambda member: None, random.Random(0), turn).label for turn in range(4)]
    assert picks == ["y", "z", "x", "y"]


def test_a_proposal_builds_on_the_best_frontier_member_even_when_it_is_not_the_head() -> None:
    agent = _agent()
    billing, returns = _tasks("billing")[0], _tasks("returns")
    other = f"## returns-desk\ndescription: returns\n\n{routing.rule('returns', 'HWF-9')}"
    head = "## stale-notes\ndescription: old notes\n\nnothing useful"
    _score(agent.log, head, returns[:3])
    _score(agent.log, other, returns[:3])  # a rejected candidate that scored better than the head
    agent.frontier.admit(Member("iter-skill-0", other, 1.0))
    reply = anyio.run(agent.propose, head, billing, "unknown", 0.0)
    text = Sections().ops(reply.text, head)
    built = apply_ops(head, text)
    assert set(folders(built)) == {"returns-desk", SKILL}  # the parent's folders plus the new one; the head's gone
    assert routing.solve(built, returns[0]) == "HWF-9" and routing.solve(built, billing) == "KTR-4"


def _decided() -> tuple[EvoSkillAgent, str]:
    """An agent whose first proposal became diff p1, was scored, and was accepted; and the candidate's text."""
    agent = _agent(frontier=1)
    billing = _tasks("billing")[0]
    reply = anyio.run(agent.propose, "", billing, "unknown", 0.0)
    agent.observe("proposal", {"diff": {"artifact": "skill", "base": 0, "id": "p1", "ops": [
        op.to_dict() for op in Sections().ops(reply.text, "")]}, "task": billing.id})
    candidate = agent.proposed["p1"][1]
    _score(agent.log, candidate, [billing])
    _score(agent.log, "", [billing])
    agent.observe("decision", {"diff_id": "p1", "outcome": "accepted"})
    return agent, candidate


def test_each_verdict_enters_the_feedback_history_the_next_proposer_reads() -> None:
    agent, candidate = _decided()
    assert [(e.label, e.outcome) for e in agent.feedback] == [("iter-skill-1", "improved")]
    assert [m.text for m in agent.frontier.members] == [candidate]  # it beat the head, the only member (K=1)
    prompts: list[str] = []

    def spy(messages: Sequence[Message], **params: Any) -> str:
        prompts.append(messages[-1].content)
        return model(messages, **params)

    agent.reflector = CallableProvider(spy)
    delivery = _tasks("delivery")[0]
    reply = anyio.run(agent.propose, candidate, delivery, "unknown", 0.0)
    history = _section(prompts[0], "Earlier proposals and what became of them")
    assert "iter-skill-1" in history and "IMPROVED" in history and f"create {SKILL}" in history
    agent.observe("proposal", {"diff": {"artifact": "skill", "base": 1, "id": "p2", "ops": [
        op.to_dict() for op in Sections().ops(reply.text, candidate)]}, "task": delivery.id})
    _score(agent.log, agent.proposed["p2"][1], [delivery])
    agent.observe("decision", {"diff_id": "p2", "outcome": "rejected"})  # no better than the full frontier's worst
    assert [e.outcome for e in agent.feedback] == ["improved", "discarded"]
    assert [m.text for m in agent.frontier.members] == [candidate]


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_a_run_learns_the_skill_library_on_both_runtimes(tmp_path: Path, asynchronous: bool) -> None:
    result = evoskill(routing.tasks(), routing.score, run=routing.solve, reflector=CallableProvider(model),
                      budget=Budget(calls=260), asynchronous=asynchronous, store=tmp_path / "run", seed=0,
                      category="queue_name")
    assert result.ok, result.error
    assert result.baseline_test_reward is not None and result.test_reward is not None
    assert result.test_reward >= result.baseline_test_reward + 0.4
    assert list(folders(result.artifact.text)) == [SKILL]


def test_the_agent_state_round_trips_through_json() -> None:
    agent, _ = _decided()
    anyio.run(agent.propose, agent.frontier.members[0].text, _tasks("delivery")[0], "unknown", 0.0)
    state = json.loads(json.dumps(agent.state_dict()))
    other = _agent(frontier=1)
    other.load_state_dict(state)
    assert other.state_dict() == state
    assert other.frontier.members == agent.frontier.members and list(other.feedback) == list(agent.feedback)
    assert other.rng.random() == agent.rng.random()


def test_a_library_run_writes_its_skill_folders_into_the_skills_member_only(tmp_path: Path) -> None:
    policy = Artifact("policy", Kind.PROMPT, "Be polite.", Layer.L0)
    result = evoskill(routing.tasks(), routing.score, run=routing.solve, reflector=CallableProvider(model),
                      artifact={"skills": "", "policy": policy}, budget=Budget(calls=200), store=tmp_path / "run",
                      category="queue_name")
    assert result.ok, result.error
    assert result.artifacts["policy"].text == "Be polite."
    assert list(folders(result.artifacts["skills"].text)) == [SKILL]
    assert result.test_reward is not None and result.baseline_test_reward is not None
    assert result.test_reward > result.baseline_test_reward
