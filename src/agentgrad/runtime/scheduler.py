"""Scheduling helpers: an online duration estimate per task, longest-first order, straggler detection."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

from agentgrad.core._checks import integer, is_number, number
from agentgrad.errors import ConfigError, StateDictError


def _amount(value: Any, what: str) -> float:
    """`value` as a finite number >= 0; StateDictError naming `what` otherwise."""
    return number(value, f"bad duration estimator state: {what}", low=0, error=StateDictError)


def _counter(value: Any, what: str) -> int:
    return integer(value, f"bad duration estimator state: {what}", low=0, error=StateDictError)


class DurationEstimator:
    """Exponentially weighted mean call duration per task id, with a global mean for unseen tasks.

    Args:
        weight: how much a new observation moves the estimate (0 < weight <= 1).
        straggler_factor: a call slower than this many times its estimate counts as a straggler (> 1).
    State: the estimate per task id, the overall mean and how many calls it averages, and the straggler count.
    """

    def __init__(self, *, weight: float = 0.3, straggler_factor: float = 3.0) -> None:
        if not is_number(weight, above=0.0, high=1.0):
            raise ConfigError(f"DurationEstimator.weight must be in (0, 1], got {weight!r}")
        factor = number(straggler_factor, "DurationEstimator.straggler_factor", above=1.0)
        self.weight, self.straggler_factor = float(weight), factor
        self.means: dict[str, float] = {}
        self.overall = 0.0
        self.seen = 0
        self.stragglers = 0

    def estimate(self, task_id: str) -> float:
        """The expected duration of a call on `task_id` (the overall mean for unseen tasks)."""
        return self.means.get(task_id, self.overall)

    def observe(self, task_id: str, seconds: float) -> bool:
        """Record a duration; True if it was a straggler against the estimate before it (a task's first call, or
        one whose estimate is under a millisecond, never is)."""
        before = self.means.get(task_id)
        straggler = before is not None and before > 1e-3 and seconds > self.straggler_factor * before
        self.stragglers += int(straggler)
        self.means[task_id] = seconds if before is None else before + self.weight * (seconds - before)
        self.seen += 1
        self.overall += (seconds - self.overall) / self.seen
        return straggler

    def longest_first(self, task_ids: Sequence[str]) -> list[str]:
        """`task_ids` ordered by decreasing estimate (stable for ties), so stragglers start first."""
        return sorted(task_ids, key=lambda t: -self.estimate(t))

    def state_dict(self) -> dict[str, Any]:
        """A JSON-ready copy of the estimates and counters."""
        return {"means": dict(self.means), "overall": self.overall, "seen": self.seen,
                "stragglers": self.stragglers}

    def load_state_dict(self, data: Mapping[str, Any]) -> None:
        """Restore a `state_dict()`; StateDictError (and nothing changed) if it is malformed."""
        try:
            raw, overall, seen, stragglers = data["means"], data["overall"], data["seen"], data["stragglers"]
        except (KeyError, TypeError) as exc:
            raise StateDictError(f"bad duration estimator state: missing {exc!r}") from exc
        if not isinstance(raw, Mapping):
            raise StateDictError(f"bad duration estimator state: means must be a mapping, got {type(raw).__name__}")
        means = {str(k): _amount(v, f"means[{k!r}]") for k, v in raw.items()}
        loaded = (_amount(overall, "overall"), _counter(seen, "seen"), _counter(stragglers, "stragglers"))
        self.means = means
        self.overall, self.seen, self.stragglers = loaded


def seeded_order(items: Sequence[str], *, seed: int, salt: str) -> list[str]:
    """A deterministic shuffle of `items`, keyed by (seed, salt): the same inputs always give the same order."""
    def key(item: str) -> str:
        return hashlib.sha256(f"{seed}\x00{salt}\x00{item}".encode()).hexdigest()
    return sorted(items, key=key)
