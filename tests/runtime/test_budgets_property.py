"""A run never overshoots a budget, whatever the budgets, the concurrency and the runtime (a property test)."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentgrad.data.task import Task
from agentgrad.runtime.budget import Budget
from agentgrad.runtime.config import Workers
from agentgrad.runtime.resume import used_from_events
from agentgrad.store.events import EventLog
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
    assert len(events(store, ["done"])) == sum(logged.values())  # every dispatched call was settled


@settings(max_examples=12, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(budget=_budgets(), workers=_workers(), asynchronous=st.booleans())
def test_no_budget_is_ever_exceeded(budget: Budget, workers: Workers, asynchronous: bool) -> None:
    bot = agent(median=0.0005, sigma=1.0)
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


def test_a_wall_time_budget_stops_the_run_and_settles_every_call(tmp_path: Path) -> None:
    bot = agent(median=0.01, sigma=0.5)
    result = run(tmp_path, bot, budget=Budget(wall_time=0.3))
    assert result.ok, result.error
    assert 0.25 <= result.usage.wall_time <= 1.0
    logged = dispatched(tmp_path)
    done = [p for _, p in events(tmp_path, ["done"])]
    assert len(done) == sum(logged.values())
    cancelled = [p for p in done if p["error"] == "cancelled"]
    assert all(p["actual"][p["kind"]] == 1.0 for p in cancelled)  # a cancelled call is charged
