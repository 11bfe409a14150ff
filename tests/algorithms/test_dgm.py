"""DGM on the routing set, offline: a scripted model diagnoses failed tickets and edits routing programs."""

from __future__ import annotations

import json
import math
import random
import re
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest

from agentgrad.algorithms.adas import START
from agentgrad.algorithms.adas_code import SandboxSolver
from agentgrad.algorithms.dgm import DGMAgent, apply_edits, choose_parent, dgm, weights
from agentgrad.errors import ConfigError, InvalidProposalError
from agentgrad.providers.base import Message
from agentgrad.providers.callable import CallableProvider
from agentgrad.runtime.budget import Budget
from agentgrad.sandbox import Sandbox
from agentgrad.testing import routing_standin as routing
from tests.algorithms.test_adas_support import FAST, entry, known, program, small_splits

_RULE = re.compile(r"- (.+) tickets go to ([A-Z]{3}-\d)")
_PARENT = re.compile(r"```python\n(.*?)```", re.DOTALL)
CRASHING = "def run(task_input: str) -> str:\n    raise RuntimeError('boom')\n"


class Improver:
    """A scripted DGM model: the diagnosis names the queues of the failed ticket it is shown, the edit adds them
    to the parent's table. State: every prompt, and the parent code of every edit it wrote."""

    def __init__(self) -> None:
        self.parents: list[str] = []
        self.prompts: list[str] = []

    def __call__(self, messages: Sequence[Message], **params: Any) -> str:
        prompt = messages[-1].content
        self.prompts.append(prompt)
        if "# Run log" in prompt:
            rules = "\n".join(routing.lessons(prompt)) or "- nothing to learn"
            return "```json\n" + json.dumps({"log_summarization": "it did not know the queue",
                                             "potential_improvements": "know more queues",
                                             "improvement_proposal": "teach the queue of this ticket",
                                             "implementation_suggestion": "Add table entries:\n" + rules,
                                             "problem_description": "The agent lacks queues."}) + "\n```"
        parent = _PARENT.findall(prompt)[0]
        self.parents.append(parent)
        table = known(parent)
        new = {m.group(1).replace(" ", "_"): m.group(2) for m in _RULE.finditer(prompt)}
        new = {q: c for q, c in new.items() if q not in table}
        if "TABLE = {" not in parent:
            return f"<<<<<<< SEARCH\n{parent.rstrip()}\n=======\n{program(new).rstrip()}\n>>>>>>> REPLACE"
        added = "".join(entry(q, c) for q, c in sorted(new.items()))
        return f"<<<<<<< SEARCH\nTABLE = {{\n=======\nTABLE = {{\n{added.rstrip()}\n>>>>>>> REPLACE"


def _agent(improver: Improver, **options: Any) -> DGMAgent:
    return DGMAgent(SandboxSolver(Sandbox(FAST)), CallableProvider(improver), seed=0, **options)


def _variant(id_: str, parent: str | None, code: str, score: float, n: int = 4) -> dict[str, Any]:
    return {"id": id_, "parent": parent, "code": code, "score": score, "n": n, "entry": "", "outcome": "accepted"}


def _traced(agent: DGMAgent, code: str, count: int, *, skip: int = 0) -> None:
    async def go() -> None:
        for task in routing.tasks()[:count][skip:]:
            agent.reward(routing.score)(task, await agent.run(code, task))
    anyio.run(go)


def test_parents_are_drawn_by_score_and_by_having_few_children() -> None:
    archive = [_variant("a", None, "a", 0.9), _variant("b", None, "b", 0.9), _variant("c", None, "c", 0.1),
               *(_variant(f"b{i}", "b", f"b{i}", 0.0) for i in range(3))]
    sigmoid = 1 / (1 + math.exp(-10 * (0.9 - 0.5)))
    assert weights(archive)[:2] == [pytest.approx(sigmoid), pytest.approx(sigmoid / 4)]
    rng = random.Random(0)
    drawn = Counter(choose_parent(archive, rng)["id"] for _ in range(4000))
    assert 3.0 < drawn["a"] / drawn["b"] < 5.0 and drawn["c"] < drawn["b"] / 5
    assert weights(archive, "latest")[-1] == 1.0 and weights(archive, "best")[0] == 1.0
    with pytest.raises(ConfigError, match="parent selection"):
        weights(archive, "greedy")


def test_a_child_is_an_edit_of_the_parent_it_was_drawn_from_even_when_that_is_not_the_head() -> None:
    improver = Improver()
    agent = _agent(improver)
    head, other = program({"billing": "KTR-4"}), program({"delivery": "MZV-2"})
    agent.archive = [_variant("initial", None, START, 0.0), _variant("c1", "initial", head, 0.6, n=10),
                     _variant("c2", "initial", other, 0.0, n=0),
                     *(_variant(f"c1-{i}", "c1", f"# {i}\n" + head, 0.0) for i in range(6))]
    _traced(agent, other, 3, skip=1)  # a billing ticket it fails, a delivery ticket it routes: 0.5 < 0.6
    child = anyio.run(agent.propose, head, routing.tasks()[0], "unknown", 0.0).text
    assert agent.archive[2]["score"] == pytest.approx(0.5) and [p.strip() for p in improver.parents] == [other.strip()]
    assert all(line in child.splitlines() for line in other.splitlines())
    assert known(child) == {"billing": "KTR-4", "delivery": "MZV-2"}
    assert next(iter(agent.drafts.values()))["parent"] == "c2"


def test_only_children_that_ran_without_crashing_join_the_archive() -> None:
    agent = _agent(Improver())
    agent.archive = [_variant("initial", None, START, 0.0)]
    good = program({"billing": "KTR-4"})
    for number, code in enumerate((CRASHING, good), 1):
        agent.draft(code, {"parent": "initial", "entry": "route-000", "id": f"c{number}"})
        _traced(agent, code, 3)
        agent.observe("proposal", {"diff": {"id": f"p{number}", "ops": [{"action": "replace", "new": code}]}})
        agent.observe("decision", {"diff_id": f"p{number}", "outcome": "rejected"})
    assert [e["id"] for e in agent.archive] == ["initial", "c2"] and agent.children("initial") == 1
    assert agent.archive[1]["score"] == pytest.approx(2 / 3) and agent.archive[1]["outcome"] == "rejected"


def test_a_parent_that_crashes_often_is_sometimes_diagnosed_for_its_crashes() -> None:
    improver = Improver()
    agent = _agent(improver, crash_chance=1.0)
    _traced(agent, CRASHING, 2)
    child = anyio.run(agent.propose, CRASHING, routing.tasks()[0], "", 0.0).text
    assert next(iter(agent.drafts.values()))["entry"] == "crashes" and "RuntimeError: boom" in improver.prompts[0]
    assert "crashed (or broke a limit" in improver.prompts[0] and "raise RuntimeError" not in child


def test_edits_must_match_the_parent_and_change_it() -> None:
    code = program({"billing": "KTR-4"})
    assert apply_edits(code, "<<<<<<< SEARCH\nTABLE = {\n=======\nTABLE = {  # routes\n>>>>>>> REPLACE") != code
    with pytest.raises(InvalidProposalError, match="does not match"):
        apply_edits(code, "<<<<<<< SEARCH\nnot there\n=======\nx\n>>>>>>> REPLACE")
    agent = _agent(Improver())
    _traced(agent, START, 1)
    agent.archive = [_variant("initial", None, START, 0.0)]
    agent.reflector = CallableProvider(lambda messages, **_: "```json\n{}\n```")
    with pytest.raises(InvalidProposalError, match="no usable diagnosis in 3 attempts"):
        anyio.run(agent.propose, START, routing.tasks()[0], "", 0.0)


@pytest.mark.slow
@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_a_dgm_run_finishes_and_improves_the_held_out_reward(tmp_path: Path, asynchronous: bool) -> None:
    improver = Improver()
    result = dgm(small_splits(), routing.score, reflector=CallableProvider(improver), budget=Budget(calls=80),
                 asynchronous=asynchronous, store=tmp_path / "run", seed=1, sandbox=Sandbox(FAST), stage=6,
                 eval_tasks=12, examples=4)
    assert result.ok, result.error
    assert result.test_reward is not None and result.baseline_test_reward is not None
    assert result.test_reward > result.baseline_test_reward + 0.3
    assert len(improver.parents) >= 3


def test_the_agent_state_round_trips_through_json() -> None:
    agent = _agent(Improver())
    _traced(agent, START, 2)
    child = anyio.run(agent.propose, START, routing.tasks()[0], "unknown", 0.0).text
    _traced(agent, child, 2)
    agent.observe("proposal", {"diff": {"id": "p1", "ops": [{"action": "replace", "new": child}]}})
    agent.observe("decision", {"diff_id": "p1", "outcome": "accepted"})
    state = json.loads(json.dumps(agent.state_dict()))
    other = _agent(Improver())
    other.load_state_dict(state)
    assert other.state_dict() == agent.state_dict() and len(other.archive) == 2
