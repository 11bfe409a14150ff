"""Hedged gate calls: a call far past its task's expected time is cut off (a straggler) and started again."""

from __future__ import annotations

import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
import pytest

from agentgrad.data.task import Task
from agentgrad.runtime.budget import Budget
from agentgrad.runtime.calls import Caller, CallOutcome, Slots
from agentgrad.runtime.config import RunConfig
from agentgrad.runtime.gateconfig import GateConfig
from tests.runtime.helpers import agent, run


def _timed_call(caller: Caller, fn: Callable[[str, str], Awaitable[str]], patience: float | None) -> CallOutcome:
    async def main() -> CallOutcome:
        with anyio.fail_after(5):
            return await caller.run(fn, "text", "task", slots=Slots(1), patience=patience)
    return anyio.run(main)


def test_a_call_that_answers_within_its_patience_is_an_ordinary_outcome() -> None:
    async def quick(rendered: str, task: str) -> str:
        await anyio.sleep(0.001)
        return "done"

    outcome = _timed_call(Caller(threads=2, timeout=5.0, clock=time.monotonic), quick, patience=1.0)
    assert outcome.ok and outcome.value == "done" and not outcome.straggler


def test_a_call_past_its_patience_is_cut_off_as_a_straggler_not_as_evidence() -> None:
    cancelled: list[bool] = []

    async def stuck(rendered: str, task: str) -> str:
        try:
            await anyio.sleep(60)
        except anyio.get_cancelled_exc_class():
            cancelled.append(True)
            raise
        return "never"

    started = time.monotonic()
    outcome = _timed_call(Caller(threads=2, timeout=5.0, clock=time.monotonic), stuck, patience=0.02)
    assert outcome.straggler and not outcome.ok and outcome.error == "no answer after 0.02 s"
    assert cancelled == [True] and time.monotonic() - started < 1.0


def test_patience_longer_than_the_timeout_leaves_an_ordinary_timeout() -> None:
    async def stuck(rendered: str, task: str) -> str:
        await anyio.sleep(60)
        return "never"

    outcome = _timed_call(Caller(threads=2, timeout=0.02, clock=time.monotonic), stuck, patience=1.0)
    assert not outcome.straggler and outcome.error == "timed out after 0.02 s"


def test_a_plain_function_past_its_patience_is_cut_off_too() -> None:
    release = threading.Event()

    def stuck(rendered: str, task: str) -> str:
        release.wait(5)
        return "late"

    async def main() -> CallOutcome:
        caller = Caller(threads=2, timeout=5.0, clock=time.monotonic)
        try:
            return await caller.run(stuck, "text", "task", patience=0.02)
        finally:
            release.set()

    outcome = anyio.run(main)
    assert outcome.straggler and outcome.error == "no answer after 0.02 s"


@pytest.mark.parametrize("split", ["val", "train"])
def test_an_async_run_hedges_a_stuck_call_instead_of_waiting_for_it(tmp_path: Path, split: str) -> None:
    bot = agent(median=0.002, sigma=0.5)
    ids = {t.id for t in getattr(bot.splits(), split)}
    calls = {"n": 0}
    stuck: list[str] = []

    async def run_fn(rendered: str, task: Task) -> str:
        if task.id in ids:
            calls["n"] += 1
            if calls["n"] == 5:  # one gate call or rollout hangs (a stuck request)
                stuck.append("started")
                try:
                    await anyio.sleep(60)
                except anyio.get_cancelled_exc_class():
                    stuck.append("cancelled")
                    raise
        return await bot.run(rendered, task)

    started = time.monotonic()
    # no early stop: only a hedge (not a verdict reached without it) may cut the stuck gate call off
    still = RunConfig(gate=GateConfig(early_stop=False, futility=0.0))
    result = run(tmp_path, bot, run=run_fn, asynchronous=True, config=still,
                 budget=Budget(rollouts=24, proposals=12, gate_evals=400))
    assert result.ok, result.error
    assert time.monotonic() - started < 20  # it did not wait a minute for the stuck call
    assert stuck == ["started", "cancelled"] and result.counts["hedged_calls"] >= 1
    off = run(tmp_path / "off", agent(median=0.002, sigma=0.5), asynchronous=True, config=RunConfig(hedge=None),
              budget=Budget(rollouts=24, proposals=12, gate_evals=400))
    assert off.ok and off.counts.get("hedged_calls", 0) == 0
