"""Every stateful collaborator of a run round-trips through its state dict (as JSON), after a real run; the engine
holds its collaborators (none is a base class), and the calls of `run` know nothing of the score cache."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agentgrad.optim.aggregator import Aggregator
from agentgrad.optim.noise import NoiseEstimate
from agentgrad.runtime.budget import Ledger
from agentgrad.runtime.engine import Engine
from agentgrad.runtime.evaluator import Evaluator
from agentgrad.runtime.evolve import _aggregator
from agentgrad.runtime.opendiffs import OpenDiffs
from agentgrad.runtime.pacing import Pacing
from agentgrad.runtime.resume import restore
from agentgrad.runtime.scheduler import DurationEstimator
from agentgrad.runtime.scorecache import ScoreCache
from agentgrad.store.promotion import Promotion
from agentgrad.testing.agents import WorldAgent
from tests.runtime.helpers import BUDGET, WORLD, agent, on_engine, run


def _json(state: Any) -> Any:
    return json.loads(json.dumps(state))  # what a checkpoint holds: plain JSON, never live objects


def test_each_collaborator_of_a_resumed_run_round_trips_through_json(tmp_path: Path) -> None:
    run(tmp_path, agent(), asynchronous=False)

    async def check(engine: Engine, bot: WorldAgent) -> None:
        restore(engine)  # the run's real state: budgets spent, optimizer state, estimates, promotion, noise
        assert engine.journal.steps > 0 and engine.accounts.meter.used["rollouts"] > 0
        pairs: list[tuple[Any, Any]] = [
            (engine.accounts.meter, Ledger(BUDGET)), (engine.estimator, DurationEstimator()),
            (engine.promotion, Promotion(max(1, engine.config.promote_every))),
            (engine.aggregator, Aggregator(_aggregator(engine.config, WORLD.strategy).pipeline)),
            (engine.open, OpenDiffs()),
        ]
        for live, fresh in pairs:
            fresh.load_state_dict(_json(live.state_dict()))
            assert fresh.state_dict() == live.state_dict(), type(live).__name__
        assert NoiseEstimate.load(_json(engine.noise.to_dict())) == engine.noise
        state = _json(engine.state_dict())
        assert state["aggregator"] == engine.aggregator.state_dict()

    on_engine(tmp_path, check, budget=BUDGET)


def test_the_engine_holds_its_collaborators_and_the_calls_of_run_know_no_cache(tmp_path: Path) -> None:
    async def check(engine: Engine, bot: WorldAgent) -> None:
        assert Engine.__mro__ == (Engine, object)  # composed, not inherited
        assert isinstance(engine.pacing, Pacing) and isinstance(engine.evaluator, Evaluator)
        assert not any(isinstance(v, ScoreCache) for v in vars(engine.evaluator).values())  # no cache <-> loader cycle
        task = engine.train[0]
        score = await engine.cache.get(engine.head.text, task)  # a miss: one call of run, through the evaluator
        assert bot.runs == 1 and engine.cache.reusable(engine.head.text, task) is not None  # its output was kept
        assert await engine.cache.get(engine.head.text, task) == score and bot.runs == 1

    on_engine(tmp_path, check, budget=BUDGET)
