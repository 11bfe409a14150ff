"""FakeClock: time moves only when told to, never backwards, and sleeping takes no real time."""

from __future__ import annotations

import asyncio
import math

import pytest

from agentgrad.testing import FakeClock


def test_the_clock_starts_where_told_and_advances_by_the_given_step() -> None:
    clock = FakeClock(10.0)
    assert clock.now() == 10.0
    clock.advance(2.5)
    clock.advance(0)
    assert clock.now() == 12.5


@pytest.mark.parametrize("step", [-1.0, math.nan, math.inf, "1"])
def test_advance_refuses_going_back_and_non_finite_steps(step: object) -> None:
    clock = FakeClock()
    with pytest.raises(ValueError, match="advance"):
        clock.advance(step)  # type: ignore[arg-type]
    assert clock.now() == 0.0


def test_sleeping_an_hour_advances_the_clock_at_once() -> None:
    clock = FakeClock()
    asyncio.run(clock.sleep(3600))
    assert clock.now() == 3600.0


def test_a_negative_sleep_counts_as_zero() -> None:
    clock = FakeClock(5.0)
    asyncio.run(clock.sleep(-3))
    assert clock.now() == 5.0


def test_sleep_lets_other_tasks_run_in_between() -> None:
    clock = FakeClock()
    order: list[str] = []

    async def worker(name: str) -> None:
        for _ in range(2):
            order.append(name)
            await clock.sleep(1)

    async def main() -> None:
        await asyncio.gather(worker("a"), worker("b"))

    asyncio.run(main())
    assert order == ["a", "b", "a", "b"]
    assert clock.now() == 4.0
