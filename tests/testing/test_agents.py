"""`WorldAgent`: seeded lognormal latency, the world's solver and proposer, failures and concurrency tracking."""

from __future__ import annotations

import math
import statistics

import anyio
import pytest

from agentgrad.data.task import Task
from agentgrad.testing.agents import WorldAgent
from agentgrad.testing.clock import FakeClock
from agentgrad.testing.world import ReferenceWorld, WorldConfig

WORLD = ReferenceWorld(WorldConfig(n_categories=3, tasks_per_category=8))


def _task(index: int = 0) -> Task:
    task_id = WORLD.train[index]
    return Task(task_id, WORLD.tasks[task_id].prompt)


def test_latency_is_a_pure_function_of_seed_task_text_and_call_count() -> None:
    one, two = WorldAgent(WORLD, median=0.01), WorldAgent(WORLD, median=0.01)
    first = [one.latency("t0001", "text") for _ in range(3)]
    assert first == [two.latency("t0001", "text") for _ in range(3)]
    assert len(set(first)) == 3  # each repeated call draws anew
    assert one.latency("t0002", "text") != two.latency("t0001", "other text")


def test_latency_is_lognormal_around_the_median() -> None:
    bot = WorldAgent(WORLD, median=0.02, sigma=0.5)
    draws = [bot.latency(f"t{i:04d}", "text") for i in range(2000)]
    assert all(d > 0 for d in draws)
    assert statistics.median(draws) == pytest.approx(0.02, rel=0.1)
    logs = [math.log(d) for d in draws]
    assert statistics.stdev(logs) == pytest.approx(0.5, rel=0.1)


def test_zero_median_means_no_latency() -> None:
    assert WorldAgent(WORLD).latency("t0001", "text") == 0.0


def test_run_answers_like_the_world_and_waits_its_latency_on_the_injected_clock() -> None:
    clock = FakeClock()
    bot = WorldAgent(WORLD, median=0.05, sleep=clock.sleep)
    task = _task()
    good = WORLD.optimal_text()

    async def main() -> tuple[str, str]:
        return await bot.run(good, task), await bot.run(WORLD.artifact.text, task)

    solved, plain = anyio.run(main)
    assert solved == ("solved" if WORLD.solve(good, task.id) >= 1.0 else "failed")
    assert plain == ("solved" if WORLD.solve(WORLD.artifact.text, task.id) >= 1.0 else "failed")
    assert clock.now() > 0  # the latency went to the fake clock, not to real time
    assert bot.runs == 2 and bot.in_flight == 0


def test_reward_is_one_for_solved_only() -> None:
    assert WorldAgent.reward(_task(), "solved") == 1.0
    assert WorldAgent.reward(_task(), "failed") == 0.0
    assert WorldAgent.reward(_task(), "SOLVED") == 0.0


def test_fail_every_raises_on_every_nth_run_and_keeps_counting() -> None:
    bot = WorldAgent(WORLD, fail_every=3)
    results: list[str] = []

    async def main() -> None:
        for _ in range(6):
            try:
                results.append(await bot.run("text", _task()))
            except RuntimeError as exc:
                results.append(str(exc))

    anyio.run(main)
    assert results[2] == "simulated failure of call 3" and results[5] == "simulated failure of call 6"
    assert all(r in ("solved", "failed") for i, r in enumerate(results) if i not in (2, 5))
    assert bot.in_flight == 0


def test_propose_draws_anew_each_time_the_same_pair_asks() -> None:
    bot = WorldAgent(WORLD)
    task = _task(1)

    async def main() -> list[str]:
        return [await bot.propose(WORLD.artifact.text, task, "failed", 0.0) for _ in range(6)]

    texts = anyio.run(main)
    assert texts == [WORLD.propose(WORLD.artifact.text, task.id, draw).text for draw in range(1, 7)]
    assert bot.proposals == 6


def test_concurrency_of_run_and_propose_is_tracked() -> None:
    bot = WorldAgent(WORLD, median=0.002, sigma=0.1)

    async def main() -> None:
        async with anyio.create_task_group() as group:
            for i in range(5):
                group.start_soon(bot.run, "text", _task(i))
            for i in range(3):
                group.start_soon(bot.propose, "text", _task(i), "failed", 0.0)

    anyio.run(main)
    assert bot.max_in_flight == 5 and bot.max_propose_in_flight == 3
    assert bot.in_flight == 0 and bot.propose_in_flight == 0


def test_repair_reproposes_the_new_units_of_a_diff() -> None:
    bot = WorldAgent(WORLD)
    diff = {"id": "p000001", "ops": [{"action": "add", "scope": "key", "old": None, "new": "- dates: use method 3"},
                                     {"action": "delete", "scope": "key", "old": "- units: x", "new": None}]}
    text = anyio.run(bot.repair, diff, "# head\n")
    assert text == "dates: use method 3"
    assert bot.repairs == [("p000001", "# head\n")]


def test_splits_are_the_worlds_splits_as_tasks() -> None:
    splits = WorldAgent(WORLD).splits()
    assert tuple(t.id for t in splits.train) == WORLD.train
    assert tuple(t.id for t in splits.val) == WORLD.val
    assert tuple(t.id for t in splits.test) == WORLD.test
    assert all(t.input == WORLD.tasks[t.id].prompt for t in (*splits.train, *splits.val, *splits.test))
