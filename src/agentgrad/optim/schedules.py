"""Schedules: a hyperparameter as a pure function of the step (for δ, the step is the artifact's version).

Like a torch scheduler, a schedule is a small object that only computes one number; it can be written as a
plain dict (`to_dict`) and read back (`schedule_from_dict`). `delta_schedule` checks that a schedule is a valid
acceptance risk δ: inside (0, 0.5) at every step.

>>> linear(0.1, 0.01, steps=9)(3)
0.07
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, Protocol, runtime_checkable

from agentgrad.core._checks import integer, is_number, number
from agentgrad.errors import ConfigError, StateDictError
from agentgrad.optim.stats import check_delta


@runtime_checkable
class Schedule(Protocol):
    """A number per step: `schedule(step)`, its range over all steps (`bounds`), and a JSON-ready `to_dict`."""

    def __call__(self, step: int) -> float: ...

    def bounds(self) -> tuple[float, float]: ...

    def to_dict(self) -> dict[str, Any]: ...


def _check_step(step: int) -> int:
    return integer(step, "a schedule step", low=0)


@dataclass(frozen=True)
class Constant:
    """The same value at every step."""

    value: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "value", number(self.value, "constant value"))

    def __call__(self, step: int) -> float:
        _check_step(step)
        return self.value

    def bounds(self) -> tuple[float, float]:
        return self.value, self.value

    def to_dict(self) -> dict[str, Any]:
        return {"name": "constant", "value": self.value}


@dataclass(frozen=True)
class Linear:
    """From `start` at step 0 to `end` at step `steps`, in a straight line, then `end` for ever."""

    start: float
    end: float
    steps: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "start", number(self.start, "linear start"))
        object.__setattr__(self, "end", number(self.end, "linear end"))
        integer(self.steps, "linear steps", low=1)

    def __call__(self, step: int) -> float:
        fraction = min(_check_step(step), self.steps) / self.steps
        return self.start + (self.end - self.start) * fraction

    def bounds(self) -> tuple[float, float]:
        return min(self.start, self.end), max(self.start, self.end)

    def to_dict(self) -> dict[str, Any]:
        return {"name": "linear", "start": self.start, "end": self.end, "steps": self.steps}


@dataclass(frozen=True)
class Exponential:
    """From `start` at step 0 towards `end`, halving the remaining distance every `half_life` steps."""

    start: float
    end: float
    half_life: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "start", number(self.start, "exponential start"))
        object.__setattr__(self, "end", number(self.end, "exponential end"))
        object.__setattr__(self, "half_life", number(self.half_life, "exponential half_life", above=0.0))

    def __call__(self, step: int) -> float:
        decay: float = 0.5 ** (_check_step(step) / self.half_life)
        return self.end + (self.start - self.end) * decay

    def bounds(self) -> tuple[float, float]:
        return min(self.start, self.end), max(self.start, self.end)

    def to_dict(self) -> dict[str, Any]:
        return {"name": "exponential", "start": self.start, "end": self.end, "half_life": self.half_life}


def constant(value: float) -> Constant:
    """A schedule that is `value` at every step."""
    return Constant(value)


def linear(start: float, end: float, steps: int) -> Linear:
    """A schedule going linearly from `start` (step 0) to `end` (step `steps` and after)."""
    return Linear(start, end, steps)


def exponential(start: float, end: float, half_life: float) -> Exponential:
    """A schedule decaying from `start` towards `end` with the given half-life in steps."""
    return Exponential(start, end, half_life)


def schedule_from_dict(data: Mapping[str, Any]) -> Schedule:
    """Rebuild a schedule from its `to_dict` output; raises `StateDictError` for anything else."""
    kinds: dict[str, type[Constant] | type[Linear] | type[Exponential]] = {
        "constant": Constant, "linear": Linear, "exponential": Exponential}
    if not isinstance(data, Mapping) or data.get("name") not in kinds:
        got = data.get("name") if isinstance(data, Mapping) else type(data).__name__
        raise StateDictError(f"unknown schedule {got!r}; expected one of {sorted(kinds)}")
    kind = kinds[data["name"]]
    expected = {f.name for f in fields(kind)}
    given = set(data) - {"name"}
    if given != expected:
        raise StateDictError(f"{data['name']} schedule needs fields {sorted(expected)}, got {sorted(given)}")
    try:
        return kind(**{k: data[k] for k in expected})
    except ValueError as exc:
        raise StateDictError(f"bad {data['name']} schedule: {exc}") from exc


def delta_schedule(delta: float | Schedule) -> Schedule:
    """`delta` as a schedule of the acceptance risk δ, checked to stay inside (0, 0.5) at every step."""
    schedule = Constant(delta) if is_number(delta, finite=False) else delta
    if not isinstance(schedule, Schedule):
        raise ConfigError(f"delta must be a number or a Schedule, got {type(delta).__name__}")
    low, high = schedule.bounds()
    try:
        check_delta(low)
        check_delta(high)
    except ValueError as exc:
        raise ConfigError(f"a delta schedule must stay inside (0, 0.5), but {schedule!r} spans [{low}, {high}]") \
            from exc
    return schedule
