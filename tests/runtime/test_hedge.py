"""Hedged calls: a call far past its expected time gets a twin; the first answer wins, the other is cancelled."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

from agentgrad.data.task import Task
from agentgrad.runtime.budget import Budget, OutOfBudget
from agentgrad.runtime.config import RunConfig
from agentgrad.runtime.hedge import first_of
from tests.runtime.helpers import agent, run


class _Attempts:
    """Fake attempts: the n-th takes `seconds[n]` after a `queue` wait; records starts, ends and cancellations."""

    def __init__(self, seconds: list[float], queue: float = 0.0, broke: int | None = None) -> None:
        self.seconds, self.queue, self.broke = seconds, queue, broke
        self.started: list[int] = []
        self.cancelled: list[int] = []

    async def __call__(self, started: Callable[[], None]) -> str:
        number = len(self.started)
        self.started.append(number)
        if number == self.broke:
            raise OutOfBudget("gate_evals")
        await anyio.sleep(self.queue)  # waiting for a slot: not part of the delay
        started()
        try:
            await anyio.sleep(self.seconds[number])
        except anyio.get_cancelled_exc_class():
            self.cancelled.append(number)
            raise
        return f"answer {number}"


def _race(attempts: _Attempts, delay: float) -> tuple[str, bool]:
    async def main() -> tuple[str, bool]:
        with anyio.fail_after(5):
            return await first_of(attempts, delay)
    return anyio.run(main)


def test_a_call_that_answers_in_time_is_not_hedged() -> None:
    attempts = _Attempts([0.001, 0.001])
    assert _race(attempts, delay=0.2) == ("answer 0", False)
    assert attempts.started == [0]


def test_a_straggler_gets_a_twin_whose_answer_wins_and_the_straggler_is_cancelled() -> None:
    attempts = _Attempts([3.0, 0.001])
    assert _race(attempts, delay=0.02) == ("answer 1", True)
    assert attempts.started == [0, 1] and attempts.cancelled == [0]


def test_the_delay_counts_from_the_start_of_the_call_not_from_the_wait_for_a_slot() -> None:
    attempts = _Attempts([0.01, 0.01], queue=0.1)
    assert _race(attempts, delay=0.05) == ("answer 0", False)  # 110 ms in all, but only 10 ms running


def test_a_first_attempt_the_budget_cannot_pay_for_raises_out_of_budget_itself() -> None:
    with pytest.raises(OutOfBudget):
        _race(_Attempts([0.01], broke=0), delay=0.01)


def test_a_twin_the_budget_cannot_pay_for_is_not_made() -> None:
    attempts = _Attempts([0.1, 0.001], broke=1)
    assert _race(attempts, delay=0.01) == ("answer 0", True)
    assert attempts.cancelled == []


def test_an_async_run_hedges_a_stuck_gate_call_instead_of_waiting_for_it(tmp_path: Path) -> None:
    bot = agent(median=0.002, sigma=0.5)
    val = {t.id for t in bot.splits().val}
    gate_calls = {"n": 0}
    stuck: list[str] = []

    async def run_fn(rendered: str, task: Task) -> str:
        if task.id in val:
            gate_calls["n"] += 1
            if gate_calls["n"] == 5:  # one gate call hangs (a stuck request)
                stuck.append("started")
                try:
                    await anyio.sleep(60)
                except anyio.get_cancelled_exc_class():
                    stuck.append("cancelled")
                    raise
        return await bot.run(rendered, task)

    started = time.monotonic()
    result = run(tmp_path, bot, run=run_fn, asynchronous=True, budget=Budget(rollouts=24, proposals=12,
                                                                            gate_evals=400))
    assert result.ok, result.error
    assert time.monotonic() - started < 20  # it did not wait a minute for the stuck call
    assert stuck == ["started", "cancelled"] and result.counts["hedged_calls"] >= 1
    off = run(tmp_path / "off", agent(median=0.002, sigma=0.5), asynchronous=True, config=RunConfig(hedge=None),
              budget=Budget(rollouts=24, proposals=12, gate_evals=400))
    assert off.ok and off.counts.get("hedged_calls", 0) == 0
