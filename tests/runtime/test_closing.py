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
from agentgrad.runtime.budget import Budget, OutOfBudget
from agentgrad.runtime.engine import Engine
from agentgrad.runtime.evolve import evolve
from agentgrad.runtime.parking import replica_id
from agentgrad.runtime.policy import SYNC
from agentgrad.runtime.replicate import MIN_ROWS
from agentgrad.runtime.result import Result
from agentgrad.runtime.stale import calls_spent, closing_looks, recheck, release_parked
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


def test_once_the_calls_are_spent_every_candidate_with_contexts_enough_to_pass_gets_its_closing_look(
        tmp_path: Path) -> None:
    async def body(engine: Engine, bot: WorldAgent) -> None:
        three = _stranded(engine, engine.train[0])
        two = replace(three, diff=replace(three.diff, id="p2"),
                      evidence=replace(three.evidence, replicas=three.evidence.replicas[:2]))
        engine.hold_open([two.diff])
        engine.parking.park(two)
        assert closing_looks(engine) == [] and not engine.parking.stranded  # not winding down: a head may come
        meter = engine.accounts.meter
        meter.settle({}, {"calls": meter.remaining("calls")})
        assert calls_spent(engine)
        assert closing_looks(engine) == [(replace(three, closing=True), Outcome.EXTEND)]
        assert list(engine.parking.waiting) == ["p2"]  # two contexts can never pass: left undecided

    helpers.on_engine(tmp_path / "run", body)


def test_a_closing_look_that_needs_a_call_once_the_calls_are_spent_makes_none(tmp_path: Path) -> None:
    async def body(engine: Engine, bot: WorldAgent) -> None:
        engine.policy = SYNC
        candidate = replace(_stranded(engine, engine.train[0]), closing=True)  # one plain row: a top-up is due
        meter = engine.accounts.meter
        meter.settle({}, {"calls": meter.remaining("calls")})
        calls = engine.journal.calls
        with pytest.raises(OutOfBudget):  # the loops leave it undecided (open), as any work the budget cut short
            await recheck(engine, candidate, Outcome.EXTEND)
        assert engine.journal.calls == calls and meter.remaining("calls") == 0

    helpers.on_engine(tmp_path / "run", body)


def test_a_replicating_candidate_rechecked_when_no_context_can_be_paid_for_takes_its_closing_look(
        tmp_path: Path) -> None:
    async def body(engine: Engine, bot: WorldAgent) -> None:
        engine.policy = SYNC
        held = _stranded(engine, engine.train[0])
        plain = [t for t in [*engine.val, *engine.train] if t != held.origin][:MIN_ROWS]
        marks = held.evidence.replicas
        rows = (*(Row(t, 1.0, 1.0) for t in plain), *(r for r in held.evidence.rows if r.task_id in marks))
        held = replace(held, evidence=replace(held.evidence, rows=rows))
        meter = engine.accounts.meter
        meter.settle({}, {"calls": meter.remaining("calls") - 1})  # one call left: a context costs two
        calls = engine.journal.calls
        again = await recheck(engine, held, Outcome.EXTEND)
        assert again is not None and again.closing and again.evidence.replicas == held.evidence.replicas
        assert engine.journal.calls == calls and engine.journal.counts["replications"] == 0

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


def _run(world: ReferenceWorld, store: Path, *, calls: int, workers: int,
         asynchronous: bool) -> tuple[Result, list[str]]:
    """`evolve` on `world` on a fake clock; the result and the reasons of the accepted verdicts."""
    clock = FakeClock()
    bot = WorldAgent(world, median=0.001, sleep=clock.sleep)
    reasons: list[str] = []

    def listen(kind: str, payload: Mapping[str, Any]) -> None:
        if kind == "decision" and payload["outcome"] == "accepted":
            reasons.append(str(payload["reason"]))
    result = evolve(bot.splits(), bot.reward, agent=bot, strategy=world.strategy, artifact=world.artifact,
                    budget=Budget(calls=calls), workers=workers, asynchronous=asynchronous, seed=0, clock=clock.now,
                    callbacks=[listen], store=store)
    assert result.ok, result.error
    return result, reasons


@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_rare_rule_with_no_context_left_is_committed_by_its_closing_look(asynchronous: bool, tmp_path: Path) -> None:
    # Held-out family, drawn5: algebra has one training task and no validation task. Its rule won the three
    # contexts the run could make; the run stopped for lack of proposals with it undecided and over half of its 220
    # calls unused (three right rules). With closing looks it is committed: by its own closing look at first, and
    # since a held candidate keeps the version it was proposed on out of its contexts (`OpenDiffs.drop`), in a
    # change fused with another replicating rule, their replicas pooled.
    world = ReferenceWorld(drawn.drawn(5, drawn.HELD_OUT))
    result, reasons = _run(world, tmp_path / "run", calls=220, workers=4, asynchronous=asynchronous)
    assert world.right_rule("algebra") in result.artifact.text
    assert world.audit(result.artifact.text) == {"right": 4, "wrong": 0, "junk": 0}
    assert result.counts["closing_looks"] >= 1
    assert any("replication of its origin task" in r for r in reasons)


def test_a_rule_whose_contexts_the_budget_cut_short_is_committed_by_its_closing_look_at_the_end(
        tmp_path: Path) -> None:
    # Family 4242, drawn1, at 88 calls and one worker: four right rules each won the four contexts the budget paid
    # for (5 by design), and the run ended with none decided and nothing committed. Two pass their closing looks in
    # the last step, and are fused into one change (one change per artifact is committed a step).
    world = ReferenceWorld(drawn.drawn(1, 4242))
    result, reasons = _run(world, tmp_path / "run", calls=88, workers=1, asynchronous=False)
    assert world.audit(result.artifact.text) == {"right": 2, "wrong": 0, "junk": 0}
    assert result.usage.rollouts + result.usage.gate_evals <= 88
    assert len(reasons) == 1 and "in 8 (fused changes, 5 each by design) fresh contexts: 8 wins" in reasons[0]
