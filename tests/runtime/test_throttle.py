"""Adaptive rollout concurrency: one worker fewer while the gate is backlogged, one more when it starves."""

from __future__ import annotations

from pathlib import Path

import anyio

from agentgrad.runtime.budget import Budget
from agentgrad.runtime.config import Workers
from agentgrad.runtime.throttle import Throttle
from tests.runtime.helpers import agent, check_commits, run


def test_the_active_count_moves_one_at_a_time_within_its_bounds() -> None:
    throttle = Throttle(3, minimum=1)
    for _ in range(5):
        throttle.backlogged()
    assert throttle.active == 1 and throttle.lowest == 1
    throttle.starved()
    assert throttle.active == 2
    for _ in range(5):
        throttle.starved()
    assert throttle.active == 3 and throttle.moves == 4  # 3 -> 2 -> 1 -> 2 -> 3


def test_a_disabled_throttle_never_moves() -> None:
    throttle = Throttle(4, enabled=False)
    throttle.backlogged()
    assert throttle.active == 4 and throttle.moves == 0


def test_a_paused_worker_waits_for_its_turn_and_goes_when_the_run_winds_down() -> None:
    resumed: list[int] = []

    async def main() -> None:
        throttle = Throttle(2)
        throttle.backlogged()  # only worker 0 may start now

        async def worker(index: int) -> None:
            await throttle.turn(index)
            resumed.append(index)

        async with anyio.create_task_group() as group:
            group.start_soon(worker, 1)
            group.start_soon(worker, 0)
            await anyio.wait_all_tasks_blocked()
            assert resumed == [0]
            throttle.release_all()

    anyio.run(main)
    assert resumed == [0, 1]


def test_rollout_workers_pause_while_one_gate_worker_is_backlogged(tmp_path: Path) -> None:
    bot = agent(median=0.002)
    result = run(tmp_path, bot, workers=Workers(rollout=8, propose=8, gate=1, slots=9),
                 budget=Budget(rollouts=200, proposals=80, gate_evals=600))
    assert result.ok
    assert result.counts["rollout_workers_lowest"] < 8 and result.counts["rollout_worker_moves"] > 0
    check_commits(tmp_path)
