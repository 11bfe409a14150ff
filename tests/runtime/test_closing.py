"""Closing looks: a candidate stranded when the run winds down (no fresh context left for the replication test) is
decided on the contexts it has, with no call for its origin task, instead of being left undecided."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from agentgrad.core.decision import Outcome
from agentgrad.core.diff import Diff
from agentgrad.core.evidence import Evidence, Row
from agentgrad.core.ops import Op
from agentgrad.optim.base import Candidate
from agentgrad.runtime.budget import Budget
from agentgrad.runtime.engine import Engine
from agentgrad.runtime.evolve import evolve
from agentgrad.runtime.parking import replica_id
from agentgrad.runtime.policy import SYNC
from agentgrad.runtime.stale import closing_looks, recheck, release_parked
from agentgrad.testing import drawn
from agentgrad.testing.agents import WorldAgent
from agentgrad.testing.clock import FakeClock
from agentgrad.testing.world import ReferenceWorld
from tests.runtime import helpers


def _stranded(engine: Engine, origin: str) -> Candidate:
    """A candidate born on the head with three full wins, in contexts named after texts the run never makes."""
    diff = Diff(helpers.WORLD.artifact.id, 0, (Op.add("key", "- p1: use method 1"),), id="p1")
    marks = tuple(replica_id(origin, f"context {k}") for k in range(3))
    rows = (Row(engine.val[0], 1.0, 1.0), *(Row(m, 0.0, 1.0) for m in marks))
    candidate = Candidate(diff, Evidence(rows, base_version=0, replicas=marks), looks=2, origin=origin,
                          replicate=True)
    engine.hold_open([diff])
    engine.parking.park(candidate)
    return candidate


def test_only_candidates_stranded_while_winding_down_are_taken_for_a_closing_look(tmp_path: Path) -> None:
    async def body(engine: Engine, bot: WorldAgent) -> None:
        candidate = _stranded(engine, engine.train[0])
        assert closing_looks(engine) == [] and len(engine.parking) == 1  # a later head may still come for it
        assert release_parked(engine, winding_down=True) == []  # born on the head, no earlier version
        assert engine.parking.stranded == {candidate.diff.id}
        ((closing, outcome),) = closing_looks(engine)
        assert outcome is Outcome.EXTEND and closing == replace(candidate, closing=True)
        assert len(engine.parking) == 0 and engine.journal.counts["closing_looks"] == 1
        assert closing_looks(engine) == []

    helpers.on_engine(tmp_path / "run", body)


def test_a_closing_look_scores_no_new_context_and_is_decided_on_the_ones_it_has(tmp_path: Path) -> None:
    async def body(engine: Engine, bot: WorldAgent) -> None:
        engine.policy = SYNC
        candidate = replace(_stranded(engine, engine.train[0]), closing=True)
        calls = engine.journal.calls
        again = await recheck(engine, candidate, Outcome.EXTEND)
        assert again is not None and again.closing and again.evidence.replicas == candidate.evidence.replicas
        assert len(again.evidence.rows) > len(candidate.evidence.rows)  # topped up for the no-harm check
        assert engine.journal.counts["replications"] == 0 and engine.journal.calls > calls

    helpers.on_engine(tmp_path / "run", body)


@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_rare_rule_with_no_context_left_is_committed_by_its_closing_look(asynchronous: bool) -> None:
    # Held-out family, drawn5: algebra has one training task and no validation task. Its rule won the three
    # contexts the run could make; the run stopped for lack of proposals with it undecided and over half of its 220
    # calls unused (three right rules). Its closing look commits it.
    world = ReferenceWorld(drawn.drawn(5, drawn.HELD_OUT))
    clock = FakeClock()
    bot = WorldAgent(world, median=0.001, sleep=clock.sleep)
    reasons: list[str] = []

    def listen(kind: str, payload: Mapping[str, Any]) -> None:
        if kind == "decision" and payload["outcome"] == "accepted":
            reasons.append(str(payload["reason"]))
    result = evolve(bot.splits(), bot.reward, agent=bot, strategy=world.strategy, artifact=world.artifact,
                    budget=Budget(calls=220), workers=4, asynchronous=asynchronous, seed=0, clock=clock.now,
                    callbacks=[listen])
    assert result.ok, result.error
    assert world.right_rule("algebra") in result.artifact.text
    assert world.audit(result.artifact.text) == {"right": 4, "wrong": 0, "junk": 0}
    assert result.counts["closing_looks"] >= 1
    assert asynchronous or any("all the run had (a closing look" in r for r in reasons)  # async: the order varies
