"""GEPA on the engine: the Pareto frontier keeps a candidate best on a single example, reflection reads minibatch
traces, merge takes each component from the side that changed it, and runs learn on both runtimes."""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from agentgrad.algorithms.gepa import GEPAAgent, gepa
from agentgrad.algorithms.pareto import sample_parent, survivors, wins_somewhere
from agentgrad.core.artifact import Artifact, Kind, content_hash
from agentgrad.core.decision import Outcome
from agentgrad.core.diff import Diff
from agentgrad.core.library import Library, pack, unpack
from agentgrad.core.ops import Op
from agentgrad.core.units import Scope
from agentgrad.data.splits import split
from agentgrad.errors import ConfigError, InvalidProposalError
from agentgrad.providers.base import Message
from agentgrad.providers.callable import CallableProvider
from agentgrad.runtime.budget import Budget
from agentgrad.testing import routing_standin as routing


def reflect(messages: Sequence[Message], **params: Any) -> str:
    """A scripted reflector: the current instructions plus the lessons the quoted failures teach."""
    prompt = messages[-1].content
    current = prompt.split("```\n", 1)[1].split("```", 1)[0].strip()
    new = [line for line in routing.lessons(prompt) if line not in current]
    return "Here you go:\n```\n" + "\n".join([current, *new]).strip() + "\n```"


REFLECTOR = CallableProvider(reflect)


def test_the_frontier_keeps_a_candidate_that_wins_on_one_example_only() -> None:
    scores = {"avg": {"t1": 1.0, "t2": 1.0, "t3": 1.0, "t4": 0.0},
              "niche": {"t1": 0.0, "t2": 0.0, "t3": 0.0, "t4": 1.0},
              "worse": {"t1": 1.0, "t2": 0.0, "t3": 0.0, "t4": 0.0}}
    assert survivors(scores) == {"avg", "niche"}
    rng = random.Random(0)
    drawn = [sample_parent(scores, rng) for _ in range(400)]
    assert 0 < drawn.count("niche") < drawn.count("avg")  # weighted by the frontiers each is on: 1 vs 3
    assert "worse" not in drawn
    assert wins_somewhere({"t4": 1.0}, {"avg": scores["avg"]})
    assert not wins_somewhere({"t1": 1.0}, {"avg": scores["avg"]})


def test_a_scored_candidate_that_wins_somewhere_joins_the_frontier_and_gets_built_on() -> None:
    agent = GEPAAgent(routing.solve, REFLECTOR, seed=1)
    tasks = routing.tasks()
    billing = next(t for t in tasks if t.meta["queue_name"] == "billing")
    bulk = next(t for t in tasks if t.meta["queue_name"] == "bulk_order")
    head, niche = routing.rule("billing", "KTR-4"), routing.rule("bulk order", "ZEH-7")
    for text, task, score in ((head, billing, 1.0), (head, bulk, 0.0), (niche, billing, 0.0), (niche, bulk, 1.0)):
        agent.log.ran(text, task.id, "out")
        agent.log.scored(task.id, "out", score)
    agent.pending = {content_hash(niche): None}  # the niche candidate was proposed and scored ...
    parents = {agent.parent(head) for _ in range(60)}
    assert content_hash(niche) in agent.kept  # ... and, best on one example, joined the frontier
    assert parents == {content_hash(head), content_hash(niche)}


def test_reflection_sees_the_failure_and_the_parents_other_failed_traces() -> None:
    agent = GEPAAgent(routing.solve, REFLECTOR, minibatch=3)
    tasks = routing.tasks()
    for task in tasks[:6]:
        agent.tasks[task.id] = task
        agent.log.ran("", task.id, "unknown")
        agent.log.scored(task.id, "unknown", 0.0)
    text = agent.examples("", (tasks[10], "unknown", 0.0))
    assert text.count("# Example") == 3
    assert tasks[10].input in text.split("# Example 2")[0]  # the failure at hand first
    assert f"the expected answer is {tasks[10].expected}" in text


def test_merge_takes_each_component_from_the_side_that_changed_it() -> None:
    agent = GEPAAgent(routing.solve, REFLECTOR)
    base = pack({"style": "s0", "tips": "t0"})
    left, right = pack({"style": "s1", "tips": "t0"}), pack({"style": "s0", "tips": "t1"})
    root = agent.keep(base, None)
    agent.keep(left, root)
    agent.keep(right, root)
    reply = agent.merge(base)
    assert reply is not None and reply.text == {"style": "s1", "tips": "t1"}


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_gepa_learns_the_routing_codes_on_both_runtimes(tmp_path: Path, asynchronous: bool) -> None:
    result = gepa(routing.tasks(), routing.score, run=routing.solve, reflector=REFLECTOR, artifact="Route tickets.",
                  budget=Budget(calls=240), asynchronous=asynchronous, workers=4, store=tmp_path / "run", seed=3)
    assert result.ok, result.error
    assert result.test_reward is not None and result.baseline_test_reward is not None
    assert result.test_reward >= result.baseline_test_reward + 0.3
    assert "tickets go to" in result.artifact.text


def test_gepa_rewrites_library_components_in_turn(tmp_path: Path) -> None:
    library = Library.of([Artifact("style", Kind.PROMPT, "Be brief."), Artifact("codes", Kind.SKILL, "")])
    result = gepa(routing.tasks(), routing.score, run=routing.solve, reflector=REFLECTOR, artifact=library,
                  budget=Budget(calls=240), workers=4, store=tmp_path / "run", seed=3, merge_every=4)
    assert result.ok, result.error
    learned = unpack(result.artifact.text)
    assert "tickets go to" in learned["codes"] + learned["style"]
    assert result.test_reward is not None and result.test_reward > (result.baseline_test_reward or 0.0)


def test_the_agent_state_round_trips_through_json() -> None:
    agent = GEPAAgent(routing.solve, REFLECTOR, seed=5)
    agent.keep("a", None)
    agent.pending["x"] = None
    agent.log.ran("a", "t1", "o")
    agent.log.scored("t1", "o", 1.0)
    copy = GEPAAgent(routing.solve, REFLECTOR)
    copy.load_state_dict(json.loads(json.dumps(agent.state_dict())))
    assert copy.kept == agent.kept and copy.pending == agent.pending and copy.log.scores("a") == {"t1": 1.0}
    assert copy.rng.random() == agent.rng.random()


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_the_published_admission_screens_on_a_minibatch_then_serves_a_higher_validation_mean(
        tmp_path: Path, asynchronous: bool) -> None:
    result = gepa(routing.tasks(), routing.score, run=routing.solve, reflector=REFLECTOR, artifact="Route tickets.",
                  budget=Budget(calls=240), asynchronous=asynchronous, workers=4, store=tmp_path / "run", seed=3)
    assert result.ok, result.error
    n_val = len(split(routing.tasks(), seed=3).val)
    accepted = [d for d in result.decisions if d.outcome is Outcome.ACCEPTED]
    assert accepted and all(d.numbers["n"] == n_val and d.numbers["mean_gain"] > 0 for d in accepted)
    assert all("better than the head: mean gain" in d.reason for d in accepted)
    screened = [d for d in result.decisions if "screened out" in d.reason]
    assert all("minibatch of 3 training tasks" in d.reason and d.numbers["n"] == 3 for d in screened)


def test_the_engine_admission_commits_on_the_sign_test(tmp_path: Path) -> None:
    result = gepa(routing.tasks(), routing.score, run=routing.solve, reflector=REFLECTOR, artifact="Route tickets.",
                  budget=Budget(calls=240), workers=4, store=tmp_path / "run", seed=3, admission="engine")
    accepted = [d for d in result.decisions if d.outcome is Outcome.ACCEPTED]
    assert result.ok and accepted and all(d.reason.startswith("significant") for d in accepted)
    with pytest.raises(ConfigError, match="admission"):
        gepa(routing.tasks(), routing.score, run=routing.solve, reflector=REFLECTOR, admission="lenient")


def test_a_stale_child_is_carried_over_whole_to_the_new_head() -> None:
    agent = GEPAAgent(routing.solve, REFLECTOR)
    diff = Diff("prompt", 0, (Op.replace(Scope.TEXT, "old text", "child text"),))
    assert agent.repair(diff.to_dict(), "the new head") == "child text"
    member = Diff("lib", 0, (Op.replace(Scope.TEXT, "a", "child codes").within("codes"),))
    head = pack({"codes": "new codes", "style": "new style"})
    assert agent.repair(member.to_dict(), head) == {"codes": "child codes"}


@pytest.mark.parametrize("diff", [{}, {"ops": "x"}, {"ops": [{"member": None}]}])
def test_a_malformed_stale_diff_is_a_clear_error(diff: dict[str, Any]) -> None:
    with pytest.raises(InvalidProposalError, match="cannot read the stale diff"):
        GEPAAgent(routing.solve, REFLECTOR).repair(diff, "head")
