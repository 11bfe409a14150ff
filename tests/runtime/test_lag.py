"""The lag budget of the asynchronous runtime: with `Staleness(async_ratio=k)`, every rollout starts (its `run`
slot granted) on a snapshot at most k versions behind the head at that moment, and the bound is tight (workers do
lag up to it). The check is made when the slot is granted, not at dispatch: a rollout may wait for a slot (gate
calls go first) while the head moves on.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from agentgrad.data.task import Task
from agentgrad.runtime.async_loop import run_async
from agentgrad.runtime.budget import Budget
from agentgrad.runtime.config import RunConfig, Staleness, StalePolicy, Workers
from agentgrad.runtime.engine import Engine
from agentgrad.runtime.evaluator import UserFunctions
from agentgrad.runtime.evolve import _aggregator, _open_run
from agentgrad.runtime.records import Rollout, Snapshot
from agentgrad.testing.agents import WorldAgent
from agentgrad.testing.clock import FakeClock
from tests.runtime.helpers import WORLD, agent

ROLLOUTS = 96
BUDGET = Budget(rollouts=ROLLOUTS, proposals=96, gate_evals=3000)
ROLLOUT_TURNS = 40


class _Watched(Engine):
    """The engine, noting (head version, snapshot version) as each rollout's `run` slot is granted (the moment
    the runtime's lag check `refresh` runs, right before the user's `run` is called)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.dispatched: list[tuple[int, int]] = []

    async def rollout(self, worker: str, snapshot: Snapshot, task_id: str,
                      refresh: Callable[[Snapshot], Snapshot] | None = None) -> Rollout:
        def watched(current: Snapshot) -> Snapshot:
            chosen = refresh(current) if refresh is not None else current
            self.dispatched.append((self.head.version, chosen.version))
            return chosen
        return await super().rollout(worker, snapshot, task_id, refresh=watched)


def _lags(store: Path, async_ratio: int) -> tuple[list[int], int]:
    """An asynchronous run on a fake clock; the lag of every rollout at dispatch, and the last version."""
    clock = FakeClock()
    bot: WorldAgent = agent()
    train = {t.id for t in bot.splits().train}

    async def run(rendered: str, task: Task) -> str:
        # a rollout takes many turns of the event loop, a gate call one: the gate keeps up and commits land while
        # rollouts go on (no real time passes)
        for _ in range(ROLLOUT_TURNS if task.id in train else 1):
            await clock.sleep(0.001)
        return await bot.run(rendered, task)

    async def reward(task: Task, output: str) -> float:  # async: no worker threads, so the run is repeatable
        return bot.reward(task, output)

    # KEEP: stale diffs are still rebased and committed, so commits keep coming whatever the lag; 3 slots for 12
    # workers: rollouts wait for a slot while gate calls go first and the head moves on
    config = RunConfig(workers=Workers(rollout=8, propose=4, gate=4, slots=3), fuse_wait=0.0, seed=1,
                       staleness=Staleness(async_ratio=async_ratio, policy=StalePolicy.KEEP))
    splits = bot.splits()

    async def main() -> tuple[list[int], int]:
        lib, _ = _open_run(store, WORLD.artifact, splits, config, BUDGET, time.time)
        engine = _Watched(tasks={t.id: t for t in (*splits.train, *splits.val, *splits.test)},
                          train=[t.id for t in splits.train], val=[t.id for t in splits.val],
                          artifact=WORLD.artifact, strategy=WORLD.strategy,
                          user=UserFunctions(run, bot.propose, reward), config=config, budget=BUDGET,
                          store=lib, aggregator=_aggregator(config, WORLD.strategy), clock=clock.now)
        try:
            async with engine.journal.group_commit():
                await run_async(engine)
            return [head - snapshot for head, snapshot in engine.dispatched], engine.head.version
        finally:
            lib.close()

    return anyio.run(main)


def test_with_no_lag_allowed_every_rollout_starts_on_the_head(tmp_path: Path) -> None:
    lags, last = _lags(tmp_path, 0)
    assert last >= 3  # commits happened while rollouts went on
    assert len(lags) >= ROLLOUTS  # every dispatch (the last few find the budget spent)
    assert set(lags) == {0}


@pytest.mark.parametrize("k", [1, 2])
def test_a_lag_budget_is_never_exceeded_and_is_used(tmp_path: Path, k: int) -> None:
    lags, last = _lags(tmp_path, k)
    assert last > k
    assert max(lags) == k  # some workers did run k versions behind: the refresh is not eager


def test_without_a_refresh_workers_fall_behind_by_more_than_one_version(tmp_path: Path) -> None:
    lags, last = _lags(tmp_path, 10_000)
    assert last >= 3
    assert max(lags) >= 3  # what the bound prevents: a removed refresh fails the two tests above
