"""Budgets: validation of limits, and the meter's reserve / settle / release accounting."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentgrad.errors import BudgetOvershotError, ConfigError, StateDictError
from agentgrad.runtime.budget import KINDS, Budget, Ledger
from tests.runtime.helpers import agent, run


def test_budget_without_any_limit_is_refused() -> None:
    with pytest.raises(ConfigError, match="at least one limit"):
        Budget()


@pytest.mark.parametrize("field", ["rollouts", "proposals", "gate_evals", "tokens", "cost", "wall_time",
                                   "tokens_per_call", "cost_per_call"])
@pytest.mark.parametrize("value", [-1, math.nan, math.inf, True, "10"])
def test_budget_refuses_negative_nan_infinite_and_non_numbers(field: str, value: Any) -> None:
    with pytest.raises(ConfigError, match=field):
        Budget(**{"wall_time": 60.0, field: value})


@pytest.mark.parametrize("field", ["rollouts", "proposals", "gate_evals", "calls", "tokens", "tokens_per_call"])
def test_budget_counts_of_calls_and_tokens_refuse_fractions(field: str) -> None:
    fraction: dict[str, Any] = {"wall_time": 60.0, field: 2.5}
    with pytest.raises(ConfigError, match=rf"^Budget.{field} must be an int >= 0, got 2.5$"):
        Budget(**fraction)
    assert getattr(Budget(**{**fraction, field: 3}), field) == 3


def test_budget_limit_is_infinite_when_unset() -> None:
    budget = Budget(rollouts=3)
    assert budget.limit("rollouts") == 3.0
    assert budget.limit("gate_evals") == math.inf


def test_reservation_is_all_or_nothing() -> None:
    meter = Ledger(Budget(rollouts=5, tokens=100, tokens_per_call=60))
    assert meter.reserve({"rollouts": 1, "tokens": 60})
    assert not meter.reserve({"rollouts": 1, "tokens": 60})  # rollouts fit, tokens do not
    assert meter.reserved["rollouts"] == 1.0 and meter.reserved["tokens"] == 60.0


def test_reserved_amounts_count_against_the_limit_before_they_are_settled() -> None:
    meter = Ledger(Budget(gate_evals=2))
    assert meter.reserve({"gate_evals": 1})
    assert meter.reserve({"gate_evals": 1})
    assert not meter.reserve({"gate_evals": 1})
    assert meter.remaining("gate_evals") == 0.0
    assert meter.exhausted() == []  # nothing is *used* yet


def test_settle_turns_a_reservation_into_the_actual_use() -> None:
    meter = Ledger(Budget(rollouts=3, tokens=1000, tokens_per_call=400))
    meter.reserve({"rollouts": 1, "tokens": 400})
    meter.settle({"rollouts": 1, "tokens": 400}, {"rollouts": 1, "tokens": 123})
    assert meter.used["rollouts"] == 1.0 and meter.used["tokens"] == 123.0
    assert meter.reserved["rollouts"] == 0.0 and meter.reserved["tokens"] == 0.0
    assert meter.remaining("tokens") == 877.0


def test_release_gives_an_unused_reservation_back() -> None:
    meter = Ledger(Budget(proposals=1))
    assert meter.reserve({"proposals": 1})
    meter.release({"proposals": 1})
    assert meter.used["proposals"] == 0.0
    assert meter.reserve({"proposals": 1})


def test_exhausted_lists_the_kinds_whose_limit_is_used_up() -> None:
    meter = Ledger(Budget(rollouts=1, proposals=2))
    meter.reserve({"rollouts": 1})
    meter.settle({"rollouts": 1}, {"rollouts": 1})
    assert meter.exhausted() == ["rollouts"]


@pytest.mark.parametrize("amounts", [{"nonsense": 1.0}, {"rollouts": -1.0}, {"rollouts": math.nan}])
def test_unknown_kinds_and_bad_amounts_are_refused(amounts: dict[str, float]) -> None:
    meter = Ledger(Budget(rollouts=5))
    with pytest.raises(ConfigError):
        meter.reserve(amounts)


def test_state_dict_counts_reservations_in_flight_as_used() -> None:
    meter = Ledger(Budget(rollouts=5))
    meter.reserve({"rollouts": 1})
    meter.reserve({"rollouts": 1})
    meter.settle({"rollouts": 1}, {"rollouts": 1})
    assert meter.state_dict()["used"]["rollouts"] == 2.0


def test_state_dict_round_trips() -> None:
    meter = Ledger(Budget(rollouts=5, cost=1.0))
    meter.reserve({"rollouts": 1, "cost": 0.05})
    meter.settle({"rollouts": 1, "cost": 0.05}, {"rollouts": 1, "cost": 0.01})
    other = Ledger(Budget(rollouts=5, cost=1.0))
    other.load_state_dict(meter.state_dict())
    assert other.used == meter.used
    assert other.reserved == dict.fromkeys(KINDS, 0.0)


@pytest.mark.parametrize("data", [
    {},
    {"used": {"rollouts": 1.0}},
    {"used": {**dict.fromkeys(KINDS, 0.0), "rollouts": -1.0}},
    {"used": {**dict.fromkeys(KINDS, 0.0), "rollouts": math.nan}},
    {"used": {**dict.fromkeys(KINDS, 0.0), "rollouts": "three"}},
    {"used": {**dict.fromkeys(KINDS, 0.0), "extra": 1.0}},
])
def test_load_state_dict_refuses_bad_input_and_changes_nothing(data: dict[str, Any]) -> None:
    meter = Ledger(Budget(rollouts=5))
    meter.reserve({"rollouts": 1})
    meter.settle({"rollouts": 1}, {"rollouts": 1})
    with pytest.raises(StateDictError):
        meter.load_state_dict(data)
    assert meter.used["rollouts"] == 1.0


_OPS = st.lists(st.tuples(st.sampled_from(["reserve", "settle", "release"]), st.integers(0, 3),
                          st.floats(0, 1)), max_size=40)


@settings(max_examples=60, derandomize=True, deadline=None)
@given(limit=st.integers(0, 6), token_limit=st.integers(0, 300), ops=_OPS)
def test_used_plus_reserved_never_exceeds_a_limit(limit: int, token_limit: int,
                                                  ops: list[tuple[str, int, float]]) -> None:
    budget = Budget(gate_evals=limit, tokens=token_limit, tokens_per_call=50)
    meter = Ledger(budget)
    open_calls: list[dict[str, float]] = []
    for op, index, share in ops:
        if op == "reserve":
            amounts = {"gate_evals": 1.0, "tokens": 50.0}
            if meter.reserve(amounts):
                open_calls.append(amounts)
        elif open_calls:
            amounts = open_calls.pop(index % len(open_calls))
            if op == "settle":
                meter.settle(amounts, {"gate_evals": 1.0, "tokens": round(50 * share)})
            else:
                meter.release(amounts)
        for kind in ("gate_evals", "tokens"):
            assert meter.used[kind] + meter.reserved[kind] <= budget.limit(kind) + 1e-9


def test_a_call_above_its_bound_raises_the_bound_for_later_reservations() -> None:
    meter = Ledger(Budget(rollouts=10, tokens=1000, tokens_per_call=100))
    first = meter.per_call("rollouts")
    assert first == {"rollouts": 1.0, "calls": 1.0, "tokens": 100.0}
    meter.reserve(first)
    meter.settle(first, {"rollouts": 1, "tokens": 250})  # over its bound, within the budget: no error
    assert meter.over_bound == 1
    assert meter.per_call("rollouts")["tokens"] == 250.0
    assert meter.remaining("tokens") == 750.0


def test_an_excess_that_passes_the_limit_is_a_loud_overshoot() -> None:
    meter = Ledger(Budget(cost=1.0, cost_per_call=0.5))
    a, b = meter.per_call("rollouts"), meter.per_call("rollouts")
    assert meter.reserve(a) and meter.reserve(b)
    meter.settle(a, {"rollouts": 1, "cost": 0.5})
    with pytest.raises(BudgetOvershotError, match=r"cost_per_call"):
        meter.settle(b, {"rollouts": 1, "cost": 0.75})
    assert meter.used["cost"] == 1.25  # the spend is recorded, not hidden


def test_an_unlimited_kind_has_no_bound_to_break() -> None:
    meter = Ledger(Budget(rollouts=2, tokens_per_call=10))
    amounts = meter.per_call("rollouts")
    assert amounts == {"rollouts": 1.0, "calls": 1.0}
    meter.reserve(amounts)
    meter.settle(amounts, {"rollouts": 1, "tokens": 10_000})
    assert meter.over_bound == 0 and meter.used["tokens"] == 10_000


def test_held_room_is_kept_from_reservations_until_it_is_given_back() -> None:
    meter = Ledger(Budget(rollouts=100, tokens=1000, tokens_per_call=100))
    assert meter.hold(4)  # 400 tokens set aside
    assert meter.remaining("tokens") == 600.0
    taken = [meter.per_call("rollouts") for _ in range(6)]
    assert all(meter.reserve(a) for a in taken)
    assert not meter.reserve(meter.per_call("rollouts"))
    assert meter.unhold(4) == {"tokens": 100.0}  # the bound: the room covers all four
    assert meter.reserve(meter.per_call(None))  # a held-out call draws on tokens only
    assert meter.reserved["rollouts"] == 6.0


def test_a_hold_that_does_not_fit_holds_nothing() -> None:
    meter = Ledger(Budget(tokens=300, tokens_per_call=100))
    assert not meter.hold(4)
    assert meter.held_calls == 0 and meter.remaining("tokens") == 300.0


def test_a_grown_bound_grows_the_held_room_too() -> None:
    meter = Ledger(Budget(rollouts=100, tokens=1000, tokens_per_call=100))
    meter.hold(2)
    amounts = meter.per_call("rollouts")
    meter.reserve(amounts)
    meter.settle(amounts, {"rollouts": 1, "tokens": 300})
    assert meter.remaining("tokens") == 1000 - 300 - 2 * 300


def test_the_bound_round_trips_and_never_falls_below_the_budgets() -> None:
    meter = Ledger(Budget(tokens=1000, tokens_per_call=100))
    amounts = meter.per_call("rollouts")
    meter.reserve(amounts)
    meter.settle(amounts, {"rollouts": 1, "tokens": 180})
    other = Ledger(Budget(tokens=1000, tokens_per_call=100))
    other.load_state_dict(meter.state_dict())
    assert other.bound["tokens"] == 180.0
    other.load_state_dict({"used": meter.state_dict()["used"], "bound": {"tokens": 1.0, "cost": 0.0}})
    assert other.bound["tokens"] == 100.0
    with pytest.raises(StateDictError, match="bound"):
        other.load_state_dict({"used": meter.state_dict()["used"], "bound": {"tokens": -1, "cost": 0.0}})


def test_a_room_left_short_by_a_broken_bound_is_split_evenly() -> None:
    meter = Ledger(Budget(tokens=1000, tokens_per_call=100))
    assert meter.hold(4)
    taken = [meter.per_call("rollouts") for _ in range(6)]
    for amounts in taken:
        meter.reserve(amounts)
    for amounts in taken:
        meter.settle(amounts, {"rollouts": 1, "tokens": 110})  # each 10 over: the bound grows to 110
    assert meter.unhold(4) == {"tokens": pytest.approx((1000 - 660) / 4)}


@pytest.mark.parametrize(("budget", "message"), [
    (Budget(tokens=100), "tokens=100 is less than what one call reserves"),
    (Budget(cost=0.01), "cost=0.01 is less than what one call reserves"),
    (Budget(rollouts=0, gate_evals=10), "rollouts=0 allows no rollout"),
    (Budget(calls=0), "calls=0 allows no call of run"),
    (Budget(wall_time=0.0), "wall_time=0 leaves no time"),
])
def test_a_budget_that_cannot_pay_for_one_call_is_refused_before_anything_runs(tmp_path: Path, budget: Budget,
                                                                               message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        run(tmp_path / "run", agent(), budget=budget)
    assert not (tmp_path / "run").exists()
    assert Budget(tokens=100, tokens_per_call=50).cannot_pay() is None
