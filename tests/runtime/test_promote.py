"""Promotion dev → stable: after every K accepted commits, once the validation split confirms it."""

from __future__ import annotations

from pathlib import Path

from agentgrad.runtime.budget import Budget
from agentgrad.runtime.config import RunConfig
from agentgrad.runtime.evolve import evolve
from agentgrad.store.events import EventLog
from agentgrad.store.sqlite import SQLiteStore
from agentgrad.testing.agents import WorldAgent
from agentgrad.testing.world import ReferenceWorld, WorldConfig


def _run(tmp_path: Path, every: int) -> tuple[int, int, list[dict[str, object]]]:
    world = ReferenceWorld(WorldConfig(seed=1, n_categories=4, tasks_per_category=40, noise=0.0))
    agent = WorldAgent(world)
    result = evolve(agent.splits(), agent.reward, agent=agent, strategy=world.strategy, artifact=world.artifact,
                    budget=Budget(rollouts=160), workers=4, asynchronous=False, store=tmp_path / "run",
                    config=RunConfig(promote_every=every))
    assert result.ok, result.error
    events = EventLog(tmp_path / "run")
    checks = [dict(e.payload) for e in events.read(["promotion"])]
    events.close()
    with SQLiteStore(tmp_path / "run", git=False) as store:
        return store.head(world.artifact.id).number, store.head(world.artifact.id, "stable").number, checks


def test_stable_follows_dev_after_every_k_accepted_commits_that_validation_confirms(tmp_path: Path) -> None:
    dev, stable, checks = _run(tmp_path, every=1)
    assert dev >= 2
    assert checks and all(c["outcome"] == "promoted" for c in checks)
    assert stable == max(int(str(c["dev"])) for c in checks) and stable >= dev - 1


def test_promotion_can_be_switched_off(tmp_path: Path) -> None:
    dev, stable, checks = _run(tmp_path, every=0)
    assert dev >= 1 and stable == 0 and checks == []


def test_async_checks_promote_the_version_they_checked_while_dev_moves_on(tmp_path: Path) -> None:
    world = ReferenceWorld(WorldConfig(seed=1, n_categories=4, tasks_per_category=40, noise=0.0))
    agent = WorldAgent(world, median=0.002, sigma=1.0)
    result = evolve(agent.splits(), agent.reward, agent=agent, strategy=world.strategy, artifact=world.artifact,
                    budget=Budget(rollouts=160), workers=8, asynchronous=True, store=tmp_path / "run",
                    config=RunConfig(promote_every=1))
    assert result.ok, result.error
    events = EventLog(tmp_path / "run")
    checks = [dict(e.payload) for e in events.read(["promotion"])]
    events.close()
    promoted = [int(str(c["dev"])) for c in checks if c["outcome"] == "promoted"]
    assert promoted and promoted == sorted(promoted)
    with SQLiteStore(tmp_path / "run", git=False) as store:
        assert store.head(world.artifact.id, "stable").number == promoted[-1] <= store.head(world.artifact.id).number
