"""Schedules: values by step, round trips through plain dicts, and the δ range check."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentgrad.errors import StateDictError
from agentgrad.optim.schedules import (
    Constant,
    Schedule,
    constant,
    delta_schedule,
    exponential,
    linear,
    schedule_from_dict,
)

LAWS = settings(derandomize=True, max_examples=100, deadline=None)
deltas = st.floats(min_value=0.001, max_value=0.49)
steps = st.integers(min_value=0, max_value=10_000)


def test_constant_is_the_same_at_every_step() -> None:
    schedule = constant(0.05)
    assert [schedule(s) for s in (0, 1, 7, 10_000)] == [0.05] * 4


def test_linear_moves_from_start_to_end_then_stays() -> None:
    schedule = linear(0.2, 0.0, steps=4)
    assert [schedule(s) for s in range(6)] == pytest.approx([0.2, 0.15, 0.1, 0.05, 0.0, 0.0])


def test_exponential_halves_the_distance_to_the_end_every_half_life() -> None:
    schedule = exponential(0.1, 0.02, half_life=5)
    assert schedule(0) == pytest.approx(0.1)
    assert schedule(5) == pytest.approx(0.06)
    assert schedule(10) == pytest.approx(0.04)
    assert schedule(1000) == pytest.approx(0.02)


@LAWS
@given(start=deltas, end=deltas, length=st.integers(1, 500), step=steps)
def test_annealing_schedules_stay_within_their_bounds(start: float, end: float, length: int, step: int) -> None:
    for schedule in (linear(start, end, length), exponential(start, end, float(length))):
        low, high = schedule.bounds()
        assert low - 1e-15 <= schedule(step) <= high + 1e-15


@LAWS
@given(start=deltas, end=deltas, length=st.integers(1, 500), step=steps)
def test_every_schedule_round_trips_through_a_json_dict(start: float, end: float, length: int, step: int) -> None:
    for schedule in (constant(start), linear(start, end, length), exponential(start, end, float(length))):
        loaded = schedule_from_dict(json.loads(json.dumps(schedule.to_dict())))
        assert loaded == schedule
        assert loaded(step) == schedule(step)


@pytest.mark.parametrize("data", [
    {"name": "cosine", "start": 0.1},
    {"value": 0.1},
    {"name": "linear", "start": 0.1, "end": 0.01},
    {"name": "constant", "value": 0.1, "extra": 1},
    {"name": "linear", "start": 0.1, "end": 0.01, "steps": 0},
    {"name": "exponential", "start": 0.1, "end": 0.01, "half_life": -1.0},
])
def test_malformed_schedule_dicts_are_refused(data: dict[str, object]) -> None:
    with pytest.raises(StateDictError):
        schedule_from_dict(data)


@pytest.mark.parametrize("delta", [0.0, 0.5, 0.9, -0.01])
def test_a_delta_outside_open_zero_half_is_refused(delta: float) -> None:
    with pytest.raises(ValueError, match="delta"):
        delta_schedule(delta)


@pytest.mark.parametrize("schedule", [linear(0.2, 0.5, 10), exponential(0.0, 0.1, 3.0), constant(0.6)])
def test_a_delta_schedule_that_leaves_open_zero_half_is_refused(schedule: Schedule) -> None:
    with pytest.raises(ValueError, match="delta"):
        delta_schedule(schedule)


def test_a_float_delta_becomes_a_constant_schedule() -> None:
    assert delta_schedule(0.05) == Constant(0.05)
    annealing = linear(0.2, 0.01, 10)
    assert delta_schedule(annealing) is annealing


@pytest.mark.parametrize("step", [-1, True])
def test_negative_or_non_int_steps_are_refused(step: int) -> None:
    with pytest.raises(ValueError, match="step"):
        linear(0.2, 0.01, 10)(step)


def test_bad_schedule_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="steps"):
        linear(0.2, 0.01, 0)
    with pytest.raises(ValueError, match="half_life"):
        exponential(0.2, 0.01, 0.0)
    with pytest.raises(ValueError, match="finite"):
        constant(float("nan"))
