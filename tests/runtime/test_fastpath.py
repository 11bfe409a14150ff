"""The fast path: a plain reward that proves fast runs on the event loop; one that turns slow goes back to threads."""

from __future__ import annotations

import threading

import anyio
import pytest

from agentgrad.errors import RewardError
from agentgrad.runtime.calls import Caller
from agentgrad.runtime.fastpath import INLINE, PROBE, THREADS, FastPath
from agentgrad.testing.clock import FakeClock


def test_enough_fast_calls_in_a_row_move_a_function_inline() -> None:
    path = FastPath(probes=3, fast=0.001)
    for seconds in (0.0005, 0.0005, 0.002, 0.0005, 0.0005):
        path.observe(seconds)
        assert path.mode == PROBE  # the slow one restarted the count
    path.observe(0.0001)
    assert path.mode == INLINE and path.inline


def test_one_slow_inline_call_sends_it_back_to_threads_for_good() -> None:
    path = FastPath(probes=1, fast=0.001, slow=0.01)
    path.observe(0.0)
    assert path.inline
    path.observe(0.02)
    assert path.mode == THREADS
    for _ in range(100):
        path.observe(0.0)
    assert path.mode == THREADS


def test_a_disabled_fast_path_keeps_every_call_in_a_thread() -> None:
    path = FastPath(enabled=False)
    path.observe(0.0)
    assert path.mode == THREADS


def _where_rewards_ran(caller: Caller, clock: FakeClock, slow_at: int, calls: int) -> list[bool]:
    """For each reward call, whether it ran on the event loop's thread; call `slow_at` takes 10 ms."""
    on_loop: list[bool] = []
    loop_thread: list[int] = []

    def reward(task: str, output: str) -> float:
        on_loop.append(threading.get_ident() == loop_thread[0])
        if len(on_loop) == slow_at:
            clock.advance(0.01)
        return 1.0

    async def main() -> None:
        loop_thread.append(threading.get_ident())
        for i in range(calls):
            assert await caller.reward(reward, "task", f"t{i}", "out") == 1.0

    anyio.run(main)
    return on_loop


def test_a_caller_runs_a_fast_reward_inline_until_one_call_is_slow() -> None:
    clock = FakeClock()
    on_loop = _where_rewards_ran(Caller(threads=4, timeout=5.0, clock=clock.now), clock, slow_at=20, calls=30)
    assert on_loop[:16] == [False] * 16  # probed in threads
    assert on_loop[16:20] == [True] * 4  # then inline, the 20th included (it is the slow one)
    assert on_loop[20:] == [False] * 10  # back in threads for good


def test_inline_reward_off_keeps_rewards_in_threads() -> None:
    clock = FakeClock()
    caller = Caller(threads=4, timeout=5.0, clock=clock.now, inline_reward=False)
    assert not any(_where_rewards_ran(caller, clock, slow_at=-1, calls=30))


def test_a_reward_that_raises_inline_is_still_a_reward_error_naming_the_task() -> None:
    caller = Caller(threads=4, timeout=5.0, clock=FakeClock().now)
    calls = {"n": 0}

    def reward(task: str, output: str) -> float:
        calls["n"] += 1
        if calls["n"] > 20:
            raise KeyError("label")
        return 0.5

    async def main() -> None:
        for i in range(20):
            await caller.reward(reward, "task", f"t{i}", "out")
        assert caller.reward_path.inline
        with pytest.raises(RewardError, match=r"reward raised on task 't20'.*KeyError"):
            await caller.reward(reward, "task", "t20", "out")

    anyio.run(main)
