"""Scheduling helpers: an online duration estimate per task, longest-first order, straggler detection."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

from agentgrad.errors import StateDictError


class DurationEstimator:
    """Exponentially weighted mean call duration per task id, with a global mean for unseen tasks.

    Args:
        weight: how much a new observation moves the estimate (0 < weight <= 1).
        straggler_factor: a call slower than this many times its estimate counts as a straggler.
    """

    def __init__(self, *, weight: float = 0.3, straggler_factor: float = 3.0) -> None:
        self.weight, self.straggler_factor = weight, straggler_factor
        self.means: dict[str, float] = {}
        self.overall = 0.0
        self.seen = 0
        self.stragglers = 0

    def estimate(self, task_id: str) -> float:
        """The expected duration of a call on `task_id` (the overall mean for unseen tasks)."""
        return self.means.get(task_id, self.overall)

    def observe(self, task_id: str, seconds: float) -> bool:
        """Record a duration; True if it was a straggler against the estimate before it."""
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
        return {"means": dict(self.means), "overall": self.overall, "seen": self.seen,
                "stragglers": self.stragglers}

    def load_state_dict(self, data: Mapping[str, Any]) -> None:
        try:
            means = {str(k): float(v) for k, v in data["means"].items()}
            overall, seen, stragglers = float(data["overall"]), int(data["seen"]), int(data["stragglers"])
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise StateDictError(f"bad duration estimator state: {exc!r}") from exc
        self.means, self.overall, self.seen, self.stragglers = means, overall, seen, stragglers


def seeded_order(items: Sequence[str], *, seed: int, salt: str) -> list[str]:
    """A deterministic shuffle of `items`, keyed by (seed, salt): the same inputs always give the same order."""
    def key(item: str) -> str:
        return hashlib.sha256(f"{seed}\x00{salt}\x00{item}".encode()).hexdigest()
    return sorted(items, key=key)
