"""Calling user functions: sync and async, failures as outcomes, timeouts, slots, and reward validation."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.to_thread
import pytest

from agentgrad.errors import RewardError
from agentgrad.runtime.calls import MAX_OUTPUT_CHARS, CallCost, Caller, CallOutcome, Slots, ThreadBound
from tests.runtime.helpers import Occupancy


def _caller(timeout: float = 5.0) -> Caller:
    return Caller(threads=4, timeout=timeout, clock=time.monotonic)


def _run(fn: Callable[..., Any], *, timeout: float = 5.0, slots: Slots | None = None) -> CallOutcome:
    async def main() -> CallOutcome:
        return await _caller(timeout).run(fn, "skill text", "task", slots=slots)
    return anyio.run(main)


def _sync_echo(rendered: str, task: str) -> str:
    return f"{task}: {rendered}"


async def _async_echo(rendered: str, task: str) -> str:
    await anyio.sleep(0)
    return f"{task}: {rendered}"


@pytest.mark.parametrize("fn", [_sync_echo, _async_echo])
def test_sync_and_async_run_functions_both_give_their_text(fn: Callable[..., Any]) -> None:
    outcome = _run(fn)
    assert outcome.ok and outcome.value == "task: skill text"


def test_sync_run_runs_in_a_worker_thread() -> None:
    seen: list[int] = []

    def run(rendered: str, task: str) -> str:
        seen.append(threading.get_ident())
        return "ok"

    assert _run(run).ok
    assert seen and seen[0] != threading.get_ident()


def test_a_raising_run_is_an_outcome_with_its_error() -> None:
    def run(rendered: str, task: str) -> str:
        raise KeyError("no such tool")

    outcome = _run(run)
    assert not outcome.ok and outcome.value is None
    assert outcome.error is not None and "KeyError" in outcome.error and "no such tool" in outcome.error


@pytest.mark.parametrize(("value", "kind"), [(None, "None"), (42, "int"), (b"bytes", "bytes"), (["a"], "list")])
def test_run_returning_none_or_a_non_string_is_recorded(value: Any, kind: str) -> None:
    outcome = _run(lambda rendered, task: value)
    assert not outcome.ok
    assert outcome.error == f"run returned {kind}, expected a string"


def test_run_may_return_an_object_with_text_and_usage() -> None:
    @dataclass
    class Tokens:
        input_tokens: int
        output_tokens: int
        cost: float

    @dataclass
    class Completion:
        text: str
        usage: Tokens

    outcome = _run(lambda rendered, task: Completion("answer", Tokens(10, 5, 0.25)))
    assert outcome.ok and outcome.value == "answer"
    assert outcome.usage == CallCost(15, 0.25)


@pytest.mark.parametrize("usage", [{"tokens": -1}, {"cost": math.nan}, {"tokens": "many"}])
def test_invalid_usage_is_an_error_outcome_not_a_crash(usage: dict[str, Any]) -> None:
    @dataclass
    class Completion:
        text: str
        usage: Any

    class Bad:
        def __init__(self, **fields: Any) -> None:
            self.__dict__.update(fields)

    outcome = _run(lambda rendered, task: Completion("answer", Bad(**usage)))
    assert not outcome.ok and outcome.error is not None and "invalid usage" in outcome.error


def test_huge_output_is_recorded_and_the_limit_itself_is_allowed() -> None:
    too_big = _run(lambda rendered, task: "x" * (MAX_OUTPUT_CHARS + 1))
    assert not too_big.ok and too_big.error is not None and str(MAX_OUTPUT_CHARS + 1) in too_big.error
    at_limit = _run(lambda rendered, task: "x" * MAX_OUTPUT_CHARS)
    assert at_limit.ok


def test_hanging_async_run_times_out_and_is_cancelled_cleanly() -> None:
    state = {"running": 0, "cleaned": 0}

    async def run(rendered: str, task: str) -> str:
        state["running"] += 1
        try:
            await anyio.sleep(30)
            return "never"
        finally:
            state["running"] -= 1
            state["cleaned"] += 1

    start = time.monotonic()
    outcome = _run(run, timeout=0.05)
    assert time.monotonic() - start < 2.0
    assert not outcome.ok and outcome.error == "timed out after 0.05 s"
    assert state == {"running": 0, "cleaned": 1}


def test_a_timed_out_sync_run_keeps_its_slot_until_it_really_returns() -> None:
    release = threading.Event()
    calls: list[str] = []
    running = Occupancy()

    def run(rendered: str, task: str) -> str:
        with running.inside():
            calls.append(task)
            if task == "hang":
                release.wait(10)
            return "done"

    async def main() -> tuple[CallOutcome, CallOutcome, CallOutcome]:
        caller, slots = _caller(timeout=0.05), Slots(1)
        hung = await caller.run(run, "text", "hang", slots=slots)
        queued = await caller.run(run, "text", "queued", slots=slots)  # the hung thread still holds the slot
        release.set()
        await anyio.sleep(0.05)
        later = await caller.run(run, "text", "later", slots=slots)
        return hung, queued, later

    hung, queued, later = anyio.run(main)
    assert hung.error == "timed out after 0.05 s"
    assert queued.error == "timed out after 0.05 s"
    assert later.ok
    assert calls == ["hang", "later"]  # the queued call gave up without ever starting
    assert running.peak == 1


def test_slots_bound_concurrent_async_calls() -> None:
    state = {"now": 0, "max": 0}

    async def run(rendered: str, task: str) -> str:
        state["now"] += 1
        state["max"] = max(state["max"], state["now"])
        await anyio.sleep(0.001)
        state["now"] -= 1
        return "ok"

    async def main() -> None:
        caller, slots = _caller(), Slots(3)

        async def one() -> None:
            await caller.run(run, "text", "task", slots=slots)

        async with anyio.create_task_group() as group:
            for _ in range(20):
                group.start_soon(one)

    anyio.run(main)
    assert state["max"] == 3


def test_error_text_with_a_lone_surrogate_is_made_storable() -> None:
    def run(rendered: str, task: str) -> str:
        raise ValueError("bad \ud800 char")

    outcome = _run(run)
    assert outcome.error is not None
    outcome.error.encode("utf-8")  # would raise on a lone surrogate


def _reward(fn: Callable[..., Any], *, timeout: float = 5.0) -> float:
    async def main() -> float:
        return await _caller(timeout).reward(fn, "task", "t0042", "output")
    return anyio.run(main)


@pytest.mark.parametrize("value", [math.nan, -0.1, 1.5, "x", None, True, math.inf, 10**400])
def test_a_reward_that_is_not_a_number_in_0_1_is_a_reward_error_naming_the_task(value: Any) -> None:
    with pytest.raises(RewardError, match="t0042"):
        _reward(lambda task, output: value)


def test_a_raising_reward_is_a_reward_error_naming_the_task() -> None:
    def reward(task: str, output: str) -> float:
        raise KeyError("expected")

    with pytest.raises(RewardError, match=r"t0042.*KeyError"):
        _reward(reward)


def test_a_hanging_reward_is_a_reward_error() -> None:
    async def reward(task: str, output: str) -> float:
        await anyio.sleep(30)
        return 1.0

    with pytest.raises(RewardError, match=r"timed out.*t0042"):
        _reward(reward, timeout=0.05)


@pytest.mark.parametrize("value", [0, 1, 0.5, 0.0, 1.0])
def test_valid_rewards_are_returned_as_floats(value: float) -> None:
    assert _reward(lambda task, output: value) == float(value)


def test_an_async_reward_is_awaited() -> None:
    async def reward(task: str, output: str) -> float:
        await anyio.sleep(0)
        return 0.25

    assert _reward(reward) == 0.25


def test_waiting_for_a_worker_thread_is_not_part_of_the_timeout() -> None:
    def run(rendered: str, task: str) -> str:
        time.sleep(0.06)
        return "ok"

    async def main() -> list[CallOutcome]:
        caller = Caller(threads=1, timeout=0.1, clock=time.monotonic)
        outcomes: list[CallOutcome] = []

        async def one() -> None:
            outcomes.append(await caller.run(run, "text", "task"))

        async with anyio.create_task_group() as group:
            group.start_soon(one)
            group.start_soon(one)
        return outcomes

    outcomes = anyio.run(main)
    assert [o.ok for o in outcomes] == [True, True]  # the second waited 0.06 s for the thread, then ran 0.06 s


def _wait_for(condition: Callable[[], bool]) -> None:
    """Block (briefly) until `condition()` holds; fail after a second."""
    deadline = time.monotonic() + 1.0
    while not condition():
        assert time.monotonic() < deadline, "condition not reached within a second"
        time.sleep(0.001)


def test_a_timed_out_sync_call_keeps_its_thread_until_it_really_returns() -> None:
    release = threading.Event()
    started: list[str] = []
    inside = Occupancy()

    def work(name: str) -> str:
        with inside.inside():
            started.append(name)
            if name == "hang":
                release.wait(10)
            return "done"

    async def main() -> tuple[CallOutcome, CallOutcome, CallOutcome]:
        caller = Caller(threads=1, timeout=0.05, clock=time.monotonic)
        hung = await caller.call(work, "hang")
        other = await caller.call(work, "other")  # no slots here: only the thread bound stands in its way
        held_while_hung = caller.busy.held
        release.set()
        await anyio.to_thread.run_sync(_wait_for, lambda: caller.busy.held == 0)
        later = await caller.call(work, "later")
        assert held_while_hung == 1
        return hung, other, later

    hung, other, later = anyio.run(main)
    assert hung.error == other.error == "timed out after 0.05 s"
    assert later.ok
    assert started == ["hang", "later"]  # the second call gave up without starting: one thread was allowed
    assert inside.peak == 1


def test_a_thread_waiting_for_a_place_gives_up_as_soon_as_its_caller_does() -> None:
    bound = ThreadBound(1)
    holder, waiter = threading.Event(), threading.Event()
    assert bound.enter(holder)
    outcome: list[bool] = []
    thread = threading.Thread(target=lambda: outcome.append(bound.enter(waiter)))
    thread.start()
    time.sleep(0.005)
    assert thread.is_alive() and not outcome  # waiting: the only place is taken
    waiter.set()
    bound.wake()
    thread.join(timeout=1.0)
    assert not thread.is_alive() and outcome == [False]
    assert bound.held == 1  # it took nothing
    bound.leave()
    assert bound.enter(threading.Event()) and bound.held == 1
    bound.leave()
    with pytest.raises(RuntimeError, match="more often"):
        bound.leave()


def test_the_thread_bound_caps_sync_calls_below_the_slots() -> None:
    inside = Occupancy()

    def run(rendered: str, task: str) -> str:
        with inside.inside():
            time.sleep(0.002)
        return "ok"

    async def main() -> None:
        caller, slots = Caller(threads=2, timeout=5.0, clock=time.monotonic), Slots(5)

        async def one() -> None:
            assert (await caller.run(run, "text", "task", slots=slots)).ok

        async with anyio.create_task_group() as group:
            for _ in range(12):
                group.start_soon(one)

    anyio.run(main)
    assert inside.peak == 2
