"""The score cache: one computation per (text, task), shared by concurrent askers; failures are not cached."""

from __future__ import annotations

import anyio

from agentgrad.runtime.budget import OutOfBudget
from agentgrad.runtime.scorecache import ScoreCache, Scored


def test_cache_deduplicates_concurrent_identical_requests() -> None:
    started = {"n": 0}

    async def compute(text: str, task_id: str) -> Scored:
        started["n"] += 1
        await anyio.sleep(0.01)
        return Scored(0.75)

    cache = ScoreCache(compute)
    results: list[float] = []

    async def ask() -> None:
        results.append(await cache.get("same text", "t1"))

    async def main() -> None:
        async with anyio.create_task_group() as group:
            for _ in range(5):
                group.start_soon(ask)
        results.append(await cache.get("other text", "t1"))

    anyio.run(main)
    assert started["n"] == 2  # one per distinct (text, task)
    assert results == [0.75] * 6
    assert cache.misses == 2 and cache.hits == 4


def test_a_failed_computation_is_not_cached_and_waiters_retry() -> None:
    attempts = {"n": 0}

    async def compute(text: str, task_id: str) -> Scored:
        attempts["n"] += 1
        await anyio.sleep(0.001)
        if attempts["n"] == 1:
            raise OutOfBudget("gate_evals")
        return Scored(0.5)

    cache = ScoreCache(compute)
    outcomes: list[object] = []

    async def ask() -> None:
        try:
            outcomes.append(await cache.get("text", "t1"))
        except OutOfBudget:
            outcomes.append("out")

    async def main() -> None:
        async with anyio.create_task_group() as group:
            group.start_soon(ask)
            group.start_soon(ask)

    anyio.run(main)
    assert sorted(map(str, outcomes)) == ["0.5", "out"]
    assert attempts["n"] == 2


def test_peek_reads_the_cache_without_computing() -> None:
    computed: list[str] = []

    async def compute(text: str, task_id: str) -> Scored:
        computed.append(text)
        return Scored(0.5)

    cache = ScoreCache(compute)
    assert cache.peek("t", "a") is None and cache.hits == 0
    assert anyio.run(cache.get, "t", "a") == 0.5
    assert cache.peek("t", "a") == 0.5 and cache.hits == 1 and computed == ["t"]
