"""The `evolve()` contract: its signature, held-out honesty, per-example run failures, no leaked threads or tasks,
and the bound on threads inside the user's `run`."""

from __future__ import annotations

import asyncio
import inspect
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from agentgrad.data.task import Task
from agentgrad.runtime.budget import Budget
from agentgrad.runtime.config import RunConfig, Workers
from agentgrad.runtime.evolve import evolve
from agentgrad.testing.agents import WorldAgent
from tests.runtime.helpers import WORLD, Occupancy, agent, events, run

SMALL = Budget(rollouts=24, proposals=12, gate_evals=200)


def test_evolve_takes_tasks_and_reward_by_position_and_everything_else_by_keyword() -> None:
    params = list(inspect.signature(evolve).parameters.values())
    assert [p.name for p in params[:2]] == ["tasks", "reward"]
    assert all(p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD for p in params[:2])
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params[2:])
    assert len(params) <= 16
    bot = agent()
    with pytest.raises(TypeError):
        evolve(bot.splits(), bot.reward, bot.run, budget=SMALL)  # type: ignore[call-arg]


class _Tracer:
    """Notes, in one sequence, every task the user's functions see and every event the callbacks get."""

    def __init__(self, bot: WorldAgent) -> None:
        self.bot = bot
        self.trace: list[tuple[str, str]] = []

    async def run(self, rendered: str, task: Task) -> str:
        self.trace.append(("run", task.id))
        return await self.bot.run(rendered, task)

    async def propose(self, rendered: str, task: Task, output: str, reward: float) -> str:
        self.trace.append(("propose", task.id))
        return await self.bot.propose(rendered, task, output, reward)

    def reward(self, task: Task, output: str) -> float:
        self.trace.append(("reward", task.id))
        return self.bot.reward(task, output)

    def callback(self, kind: str, payload: Any) -> None:
        self.trace.append(("event", kind))


@pytest.mark.parametrize("asynchronous", [False, True])
def test_no_test_task_reaches_a_user_function_before_the_held_out_evaluation(tmp_path: Path,
                                                                             asynchronous: bool) -> None:
    tracer = _Tracer(agent(median=0.001))
    result = run(tmp_path, tracer.bot, run=tracer.run, propose=tracer.propose, reward=tracer.reward,
                 callbacks=[tracer.callback], asynchronous=asynchronous, budget=SMALL)
    assert result.ok, result.error
    test_ids = {t.id for t in tracer.bot.splits().test}
    held_out = tracer.trace.index(("event", "held_out"))
    before, after = tracer.trace[:held_out], tracer.trace[held_out:]
    assert any(kind == "run" for kind, _ in before)  # the run did its work before
    assert not [(kind, task) for kind, task in before if kind != "event" and task in test_ids]
    assert {task for kind, task in after if kind == "run"} == test_ids  # then, and only then, the test split
    assert result.test_reward is not None


def test_a_run_failing_on_some_tasks_is_recorded_per_example_and_the_run_goes_on(tmp_path: Path) -> None:
    bot = agent()
    ids = sorted(t.id for t in (*bot.splits().train, *bot.splits().val))
    failing = set(ids[::5])

    async def flaky(rendered: str, task: Task) -> str:
        if task.id in failing:
            raise ConnectionError(f"tool server down for {task.id}")
        return await bot.run(rendered, task)

    result = run(tmp_path, bot, run=flaky, asynchronous=False, budget=SMALL)
    assert result.ok, result.error
    assert result.counts["run_errors"] > 0
    done = [p for _, p in events(tmp_path, ["done"]) if p["kind"] in ("rollouts", "gate_evals")]
    errors = [p for p in done if p["error"] is not None]
    assert len(errors) == result.counts["run_errors"]
    assert all(p["task"] in failing and "ConnectionError" in p["error"] and p["task"] in p["error"] for p in errors)
    assert all(p["error"] is None for p in done if p["task"] not in failing)
    first_error = next(i for i, p in enumerate(done) if p["error"] is not None)
    assert sum(1 for p in done[first_error:] if p["error"] is None) > 10  # it kept going after the first error
    used = result.usage
    assert used.rollouts == 24 or used.proposals == 12 or used.gate_evals == 200  # to the end of a budget
    assert result.decisions  # and still decided on proposals


def _new_threads(before: set[int | None]) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.ident not in before and t.is_alive()]


def _wait(condition: Any, seconds: float = 2.0) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.002)
    return True


@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_hung_sync_call_keeps_its_slot_evolve_returns_at_the_deadline_and_the_thread_ends_with_the_call(
        tmp_path: Path, asynchronous: bool) -> None:
    bot = agent()
    release = threading.Event()
    inside = Occupancy()

    def stuck_once(rendered: str, task: Task) -> str:
        with inside.inside() as number:
            if number == 1:
                release.wait(10)  # hangs far past the run's deadline; nothing can kill it
            else:
                time.sleep(0.002)
            return "failed"

    before = {t.ident for t in threading.enumerate()}
    tasks_left: list[int] = []

    def at_the_end(kind: str, payload: Any) -> None:
        if kind == "finished":  # still inside the event loop: every task but the root one must be gone
            tasks_left.append(len(asyncio.all_tasks() - {asyncio.current_task()}))

    started = time.monotonic()
    result = run(tmp_path, bot, run=stuck_once, asynchronous=asynchronous, callbacks=[at_the_end],
                 workers=Workers(rollout=2, propose=1, gate=1, slots=2), config=RunConfig(timeout=30.0),
                 budget=Budget(wall_time=0.2))
    try:
        assert time.monotonic() - started < 5.0  # it did not wait for the hung call
        assert result.ok, result.error
        assert tasks_left == [0]
        assert "cancelled" in [p["error"] for _, p in events(tmp_path, ["done"])]
        assert inside.now == 1  # the hung call is still running ...
        assert inside.entered > 2 and inside.peak == 2  # ... and kept its slot: never more than 2 at once
        assert _wait(lambda: len(_new_threads(before)) == 1)  # only its thread is left
    finally:
        release.set()
    assert _wait(lambda: not _new_threads(before))  # and it ends when the call returns
    assert inside.now == 0


@pytest.mark.parametrize(("asynchronous", "workers", "bound"), [
    (True, Workers(rollout=8, propose=2, gate=4, slots=3), 3),
    (False, Workers(rollout=8, propose=2, gate=4, slots=3), 3),
    (True, Workers(rollout=8, propose=2, gate=4, slots=6, threads=2), 2)])
def test_no_more_threads_run_a_plain_sync_run_at_once_than_allowed(tmp_path: Path, asynchronous: bool,
                                                                  workers: Workers, bound: int) -> None:
    bot = agent()
    inside = Occupancy()

    def plain(rendered: str, task: Task) -> str:
        with inside.inside():
            time.sleep(0.001)
        return "solved" if WORLD.solve(rendered, task.id) >= 1.0 else "failed"

    result = run(tmp_path, bot, run=plain, asynchronous=asynchronous, workers=workers,
                 budget=Budget(rollouts=40, proposals=16, gate_evals=160))
    assert result.ok, result.error
    assert result.usage.rollouts + result.usage.gate_evals > 40
    assert inside.peak == bound  # reached, never exceeded
