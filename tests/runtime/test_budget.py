"""Budgets: validation of limits, and the meter's reserve / settle / release accounting."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentgrad.errors import ConfigError, StateDictError
from agentgrad.runtime.budget import KINDS, Budget, Meter


def test_budget_without_any_limit_is_refused() -> None:
    with pytest.raises(ConfigError, match="at least one limit"):
        Budget()


@pytest.mark.parametrize("field", ["rollouts", "proposals", "gate_evals", "tokens", "cost", "wall_time",
                                   "tokens_per_call", "cost_per_call"])
@pytest.mark.parametrize("value", [-1, math.nan, math.inf, True, "10"])
def test_budget_refuses_negative_nan_infinite_and_non_numbers(field: str, value: Any) -> None:
    with pytest.raises(ConfigError, match=field):
        Budget(**{"wall_time": 60.0, field: value})


def test_budget_limit_is_infinite_when_unset() -> None:
    budget = Budget(rollouts=3)
    assert budget.limit("rollouts") == 3.0
    assert budget.limit("gate_evals") == math.inf


def test_reservation_is_all_or_nothing() -> None:
    meter = Meter(Budget(rollouts=5, tokens=100, tokens_per_call=60))
    assert meter.reserve({"rollouts": 1, "tokens": 60})
    assert not meter.reserve({"rollouts": 1, "tokens": 60})  # rollouts fit, tokens do not
    assert meter.reserved["rollouts"] == 1.0 and meter.reserved["tokens"] == 60.0


def test_reserved_amounts_count_against_the_limit_before_they_are_settled() -> None:
    meter = Meter(Budget(gate_evals=2))
    assert meter.reserve({"gate_evals": 1})
    assert meter.reserve({"gate_evals": 1})
    assert not meter.reserve({"gate_evals": 1})
    assert meter.remaining("gate_evals") == 0.0
    assert meter.exhausted() == []  # nothing is *used* yet


def test_settle_turns_a_reservation_into_the_actual_use() -> None:
    meter = Meter(Budget(rollouts=3, tokens=1000, tokens_per_call=400))
    meter.reserve({"rollouts": 1, "tokens": 400})
    meter.settle({"rollouts": 1, "tokens": 400}, {"rollouts": 1, "tokens": 123})
    assert meter.used["rollouts"] == 1.0 and meter.used["tokens"] == 123.0
    assert meter.reserved["rollouts"] == 0.0 and meter.reserved["tokens"] == 0.0
    assert meter.remaining("tokens") == 877.0


def test_release_gives_an_unused_reservation_back() -> None:
    meter = Meter(Budget(proposals=1))
    assert meter.reserve({"proposals": 1})
    meter.release({"proposals": 1})
    assert meter.used["proposals"] == 0.0
    assert meter.reserve({"proposals": 1})


def test_exhausted_lists_the_kinds_whose_limit_is_used_up() -> None:
    meter = Meter(Budget(rollouts=1, proposals=2))
    meter.reserve({"rollouts": 1})
    meter.settle({"rollouts": 1}, {"rollouts": 1})
    assert meter.exhausted() == ["rollouts"]


@pytest.mark.parametrize("amounts", [{"nonsense": 1.0}, {"rollouts": -1.0}, {"rollouts": math.nan}])
def test_unknown_kinds_and_bad_amounts_are_refused(amounts: dict[str, float]) -> None:
    meter = Meter(Budget(rollouts=5))
    with pytest.raises(ConfigError):
        meter.reserve(amounts)


def test_state_dict_counts_reservations_in_flight_as_used() -> None:
    meter = Meter(Budget(rollouts=5))
    meter.reserve({"rollouts": 1})
    meter.reserve({"rollouts": 1})
    meter.settle({"rollouts": 1}, {"rollouts": 1})
    assert meter.state_dict()["used"]["rollouts"] == 2.0


def test_state_dict_round_trips() -> None:
    meter = Meter(Budget(rollouts=5, cost=1.0))
    meter.reserve({"rollouts": 1, "cost": 0.05})
    meter.settle({"rollouts": 1, "cost": 0.05}, {"rollouts": 1, "cost": 0.01})
    other = Meter(Budget(rollouts=5, cost=1.0))
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
    meter = Meter(Budget(rollouts=5))
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
    meter = Meter(budget)
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
