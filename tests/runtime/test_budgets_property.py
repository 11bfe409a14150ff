"""A run never overshoots a budget, whatever the budgets, the concurrency and the runtime (a property test)."""

from __future__ import annotations

import gc
import tempfile
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentgrad.data.task import Task
from agentgrad.errors import BudgetOvershotError, ConfigError
from agentgrad.runtime.budget import Budget
from agentgrad.runtime.config import Workers
from agentgrad.runtime.resume import used_from_events
from agentgrad.store.events import EventLog
from agentgrad.testing.agents import WorldAgent
from tests.runtime.helpers import agent, dispatched, events, run

_COUNT_KINDS = ("rollouts", "proposals", "gate_evals")


@st.composite
def _budgets(draw: st.DrawFn) -> Budget:
    limits = {k: draw(st.one_of(st.none(), st.integers(0, 60 if k != "gate_evals" else 300))) for k in _COUNT_KINDS}
    if all(v is None for v in limits.values()):
        limits["gate_evals"] = draw(st.integers(0, 300))
    return Budget(rollouts=limits["rollouts"], proposals=limits["proposals"], gate_evals=limits["gate_evals"])


@st.composite
def _workers(draw: st.DrawFn) -> Workers:
    return Workers(rollout=draw(st.integers(1, 32)), propose=draw(st.integers(1, 16)), gate=draw(st.integers(1, 16)),
                   slots=draw(st.integers(1, 32)))


def _refused(bot: WorldAgent, budget: Budget) -> bool:
    """True (and checked) when `budget` cannot pay for one call: `evolve` refuses it up front, writing nothing."""
    if budget.cannot_pay() is None:
        return False
    with tempfile.TemporaryDirectory() as tmp:
        with pytest.raises(ConfigError, match="cannot pay for a single call"):
            run(Path(tmp) / "run", bot, budget=budget)
        assert not (Path(tmp) / "run").exists()
    return True


def _check(store: Path, budget: Budget) -> None:
    logged = dispatched(store)
    log = EventLog(store)
    try:
        used = used_from_events(log)
    finally:
        log.close()
    for kind in _COUNT_KINDS:
        assert logged[kind] <= budget.limit(kind), (kind, logged[kind], budget)
        assert used[kind] <= budget.limit(kind)
    assert len(events(store, ["done"])) == len(events(store, ["dispatch"]))  # every dispatched call was settled


@settings(max_examples=12, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(budget=_budgets(), workers=_workers(), asynchronous=st.booleans())
def test_no_budget_is_ever_exceeded(budget: Budget, workers: Workers, asynchronous: bool) -> None:
    bot = agent(median=0.0005, sigma=1.0)
    if _refused(bot, budget):
        return
    with tempfile.TemporaryDirectory() as tmp:
        result = run(Path(tmp), bot, budget=budget, workers=workers, asynchronous=asynchronous)
        assert result.ok, result.error
        for kind in _COUNT_KINDS:
            assert getattr(result.usage, kind) <= budget.limit(kind)
        assert bot.max_in_flight <= workers.run_slots
        assert bot.max_propose_in_flight <= workers.propose
        _check(Path(tmp), budget)


@dataclass(frozen=True)
class _Usage:
    tokens: int
    cost: float


@dataclass(frozen=True)
class _Answer:
    text: str
    usage: _Usage


@settings(max_examples=8, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tokens=st.integers(0, 3000), cost=st.floats(0.0, 2.0), asynchronous=st.booleans(),
       slots=st.integers(1, 16))
def test_token_and_cost_budgets_hold_when_calls_stay_within_their_bound(tokens: int, cost: float,
                                                                        asynchronous: bool, slots: int) -> None:
    bot = agent(median=0.0005, sigma=1.0)

    async def metered_run(rendered: str, task: Task) -> _Answer:
        return _Answer(await bot.run(rendered, task), _Usage(90, 0.04))

    budget = Budget(tokens=tokens, cost=cost, tokens_per_call=100, cost_per_call=0.05)
    if _refused(bot, budget):
        return
    with tempfile.TemporaryDirectory() as tmp:
        result = run(Path(tmp), bot, run=metered_run, budget=budget, asynchronous=asynchronous,
                     workers=Workers(rollout=slots, propose=2, gate=2, slots=slots))
        assert result.ok, result.error
        assert result.usage.tokens <= tokens
        assert result.usage.cost <= cost + 1e-9
        log = EventLog(tmp)
        try:
            used = used_from_events(log)
        finally:
            log.close()
        assert used["tokens"] <= tokens and used["cost"] <= cost + 1e-9


@pytest.fixture
def harness_heap_frozen() -> Iterator[None]:
    """Keep the objects the test process already holds (pytest's, hypothesis', earlier tests') out of the garbage
    collector's sight for the test: a full collection over them took 70-90 ms on a loaded two-core machine, longer
    than the loop's stop guard, and one landing in the last moments of a run made the wall-time check fail now and
    then (measured with `gc.callbacks`). The run's own objects are collected as usual."""
    gc.collect()
    gc.freeze()
    yield
    gc.unfreeze()


@pytest.mark.usefixtures("harness_heap_frozen")
@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_wall_time_budget_stops_the_run_within_it_and_settles_every_call(tmp_path: Path,
                                                                         asynchronous: bool) -> None:
    bot = agent(median=0.01, sigma=0.5)
    result = run(tmp_path, bot, budget=Budget(wall_time=1.0), asynchronous=asynchronous)
    assert result.ok, result.error
    # the loop stops 20 ms early (cancelling in flight fits in that); on a loaded machine a late turn of the event
    # loop can end it a little earlier still, never later
    assert 0.8 <= result.usage.wall_time <= 1.0, result.usage
    done = [p for _, p in events(tmp_path, ["done"])]
    assert len(done) == len(events(tmp_path, ["dispatch"]))
    cancelled = [p for p in done if p["error"] == "cancelled"]
    assert all(p["actual"][p["kind"]] == 1.0 for p in cancelled)  # a cancelled call is charged


def _metered(bot: WorldAgent, tokens: int, cost: float) -> Callable[[str, Task], Awaitable[_Answer]]:
    async def metered_run(rendered: str, task: Task) -> _Answer:
        return _Answer(await bot.run(rendered, task), _Usage(tokens, cost))
    return metered_run


def _logged_spend(store: Path) -> tuple[float, int]:
    """The cost the event log's finished calls report, and how many of them were held-out calls."""
    done = [p for _, p in events(store, ["done"])]
    return sum(float(p["actual"].get("cost", 0.0)) for p in done), sum(p["kind"] == "test_evals" for p in done)


def test_held_out_calls_are_charged_to_the_cost_budget_which_sets_them_aside(tmp_path: Path) -> None:
    bot = agent(median=0.0005, sigma=1.0)
    budget = Budget(cost=6.0, cost_per_call=0.05)  # 40 test tasks x 2 texts x 0.05 = 4.0 set aside
    result = run(tmp_path, bot, run=_metered(bot, 90, 0.04), budget=budget, asynchronous=True)
    assert result.ok, result.error
    assert result.test_reward is not None and result.usage.test_evals in (40, 80)
    spent, held_out_calls = _logged_spend(tmp_path)
    assert held_out_calls == result.usage.test_evals
    assert result.usage.cost == pytest.approx(spent) and spent <= 6.0 + 1e-9
    assert spent >= 0.04 * result.usage.test_evals  # the held-out spend is in the total


def test_a_budget_too_small_for_the_held_out_evaluation_says_it_was_not_measured(tmp_path: Path) -> None:
    bot = agent(median=0.0005, sigma=1.0)
    result = run(tmp_path, bot, run=_metered(bot, 90, 0.04), budget=Budget(cost=2.0, cost_per_call=0.05))
    assert result.ok, result.error
    assert result.test_reward is None and result.usage.test_evals == 0
    assert "could not cover the held-out evaluation" in result.protocol
    assert result.usage.cost <= 2.0 + 1e-9


def test_calls_over_their_bound_raise_it_and_an_overshoot_fails_the_run_loudly(tmp_path: Path) -> None:
    bot = agent(median=0.0005, sigma=1.0)
    fine = run(tmp_path / "fine", bot, run=_metered(bot, 150, 0.0), budget=Budget(tokens=10**6, tokens_per_call=100))
    assert fine.ok, fine.error
    # only calls reserved before the first one raised the bound to 150 went over it
    assert 1 <= fine.counts["over_bound_calls"] <= 8 < fine.usage.rollouts + fine.usage.gate_evals
    bot = agent(median=0.0005, sigma=1.0)
    over = run(tmp_path / "over", bot, run=_metered(bot, 500, 0.0), budget=Budget(tokens=20_000, tokens_per_call=100),
               workers=Workers(rollout=8, propose=2, gate=2, slots=8))
    assert not over.ok and isinstance(over.error, BudgetOvershotError)
    assert "tokens_per_call" in str(over.error) and "FAILED" in over.summary()
    assert over.usage.tokens > 20_000  # the overshoot is reported, not hidden


def test_a_resumed_run_with_room_for_the_held_out_evaluation_measures_it(tmp_path: Path) -> None:
    bot = agent(median=0.0005, sigma=1.0)
    first = run(tmp_path, bot, run=_metered(bot, 90, 0.04), budget=Budget(cost=2.0, cost_per_call=0.05))
    assert first.ok and first.test_reward is None
    bot = agent(median=0.0005, sigma=1.0)
    second = run(tmp_path, bot, run=_metered(bot, 90, 0.04), budget=Budget(cost=8.0, cost_per_call=0.05))
    assert second.ok, second.error
    assert second.test_reward is not None and second.usage.cost <= 8.0 + 1e-9


def _run_calls(store: Path) -> int:
    logged = dispatched(store)
    return logged["rollouts"] + logged["gate_evals"]


@settings(max_examples=12, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(calls=st.integers(0, 300), workers=_workers(), asynchronous=st.booleans())
def test_one_budget_of_calls_bounds_rollouts_and_gate_evaluations_together(calls: int, workers: Workers,
                                                                           asynchronous: bool) -> None:
    bot = agent(median=0.0005, sigma=1.0)
    if _refused(bot, Budget(calls=calls)):
        return
    with tempfile.TemporaryDirectory() as tmp:
        result = run(Path(tmp), bot, budget=Budget(calls=calls), workers=workers, asynchronous=asynchronous)
        assert result.ok, result.error
        assert result.usage.rollouts + result.usage.gate_evals <= calls
        assert _run_calls(Path(tmp)) <= calls
        log = EventLog(tmp)
        try:
            used = used_from_events(log)
        finally:
            log.close()
        assert used["calls"] == used["rollouts"] + used["gate_evals"] <= calls
        assert bot.runs - result.usage.test_evals <= calls  # the agent itself saw no more calls than that


@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_budget_of_calls_holds_across_a_resume(tmp_path: Path, asynchronous: bool) -> None:
    first = run(tmp_path, agent(median=0.0005, sigma=1.0), budget=Budget(calls=70), asynchronous=asynchronous)
    assert first.ok, first.error
    second = run(tmp_path, agent(median=0.0005, sigma=1.0), budget=Budget(calls=150), asynchronous=asynchronous)
    assert second.ok, second.error
    assert _run_calls(tmp_path) <= 150
    assert second.usage.rollouts + second.usage.gate_evals <= 150


@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_budget_of_calls_is_spent_on_judging_as_well_as_exploring(tmp_path: Path, asynchronous: bool) -> None:
    result = run(tmp_path, agent(median=0.0005, sigma=1.0), budget=Budget(calls=300), asynchronous=asynchronous)
    assert result.ok, result.error
    used = result.usage.rollouts + result.usage.gate_evals
    assert used >= 0.9 * 300  # the calls are used, not left over
    assert result.usage.gate_evals >= 0.3 * used and result.usage.rollouts >= 20  # both kinds got calls
    assert result.counts["decision_accepted"] >= 1
    assert result.counts.get("unfinished_evaluations", 0) <= 2  # the calls kept back for judging were enough
