"""Budgets counted exactly: every call reserves what it may spend before it is dispatched.

`Budget` is the limit (a value); `Ledger` is the running account (a stateful object with `state_dict`). A call
reserves its resources up front (`reserve`), then settles the actual spend (`settle`) or gives the reservation
back (`release`). Because nothing is dispatched without a reservation, a run never overshoots a count budget.
Token and cost budgets reserve a per-call bound (`Budget.tokens_per_call`, `cost_per_call`); a call that spends
more raises the bound to what it spent, so later reservations are larger; if the excess takes the total past the
limit, `settle` raises `BudgetOvershotError` (the run stops, loudly). `hold` sets aside room for calls that come
after the loop (the held-out evaluation): reservations cannot eat into it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from agentgrad.core._checks import integer, is_number, number
from agentgrad.errors import BudgetOvershotError, ConfigError, StateDictError


class OutOfBudget(Exception):
    """Raised inside the runtime when a reservation fails: the worker that hit it stops dispatching."""


KINDS = ("rollouts", "proposals", "gate_evals", "calls", "tokens", "cost", "wall_time")
BOUNDED = ("tokens", "cost")  # kinds a call reserves an upper bound of, when they are limited
COUNTED = ("rollouts", "proposals", "gate_evals", "calls", "tokens", "tokens_per_call")  # the int fields
RUN_CALLS = ("rollouts", "gate_evals")  # the kinds of call of the user's `run` that `Budget.calls` bounds together


@dataclass(frozen=True)
class Budget:
    """Limits of a run; None means unlimited, but at least one count or time limit must be set.

    Args:
        rollouts: calls of `run` on training tasks (a rollout served from the kept output of the same run the gate
            made is no call: `Result.counts["reused_rollouts"]` counts those).
        proposals: calls of `propose`.
        gate_evals: calls of `run` made by the acceptance gate (and by promotion checks).
        calls: calls of `run` over rollouts and gate evaluations together (GEPA's `max_metric_calls`); the
            held-out scoring at the end is not counted. Under it the runtime divides the calls between exploring
            and judging (`Accounts.explore_allowed`); per-kind limits, when also set, still hold exactly.
        tokens, cost: model usage, as reported by the user's functions (see `Usage`).
        wall_time: seconds of run time, summed over resumes.
        tokens_per_call, cost_per_call: the upper bound reserved for each call while tokens or cost are limited.
    """

    rollouts: int | None = None
    proposals: int | None = None
    gate_evals: int | None = None
    calls: int | None = None
    tokens: int | None = None
    cost: float | None = None
    wall_time: float | None = None
    tokens_per_call: int = 4096
    cost_per_call: float = 0.05

    def __post_init__(self) -> None:
        for item in fields(self):
            value = getattr(self, item.name)
            if value is None:
                continue
            if item.name in COUNTED:  # a number of calls or tokens: 2.5 rollouts is a mistake, not a limit
                integer(value, f"Budget.{item.name}", low=0)
            else:
                number(value, f"Budget.{item.name}", low=0)
        if all(getattr(self, k) is None for k in KINDS):
            raise ConfigError("a Budget needs at least one limit (rollouts, proposals, gate_evals, calls, tokens, "
                              "cost or wall_time); an unlimited run would never stop")

    def limit(self, kind: str) -> float:
        """The limit of `kind` (inf when unlimited)."""
        value = getattr(self, kind)
        return math.inf if value is None else float(value)

    def to_dict(self) -> dict[str, Any]:
        return {item.name: getattr(self, item.name) for item in fields(self)}

    def cannot_pay(self) -> str | None:
        """Why this budget cannot pay for one rollout and one proposal (so a run could learn nothing), or None."""
        for kind, what in (("rollouts", "rollout"), ("proposals", "proposal"), ("calls", "call of run")):
            value = getattr(self, kind)
            if value is not None and value < 1:
                return f"{kind}={value} allows no {what}"
        for kind in BOUNDED:
            limit, bound = getattr(self, kind), getattr(self, f"{kind}_per_call")
            if limit is not None and limit < bound:
                return (f"{kind}={limit:g} is less than what one call reserves ({kind}_per_call={bound:g}); raise "
                        f"{kind}, or lower {kind}_per_call to what one call of your model really spends")
        if self.wall_time is not None and self.wall_time <= 0:
            return "wall_time=0 leaves no time to run"
        return None

    def describe(self) -> str:
        """The limits that are set, e.g. ``calls=300, wall_time=60``."""
        return ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}"
                         for k, v in self.to_dict().items() if v is not None and k in KINDS) or "none"


# What `evolve()` and `evolve_skill()` spend when no budget is given: 300 calls of `run` (rollouts and gate
# evaluations together, GEPA's `max_metric_calls`): enough for the quickstart many times over, and for a few
# dozen tested proposals on a validation split of 30-100 tasks; a cost or token budget is the user's to add.
DEFAULT_BUDGET = Budget(calls=300)


class Ledger:
    """The account of a run against its `Budget`: used and reserved amounts per kind.

    Used only from the runtime's event loop (no locks needed). State: used and reserved amounts per kind, the
    per-call `bound` of tokens and cost, and `held_calls`, the calls set aside by `hold`. `state_dict()` keeps the
    used amounts and the bound; a resumed run starts with those, and reservations that were in flight when a
    process died count as used.
    """

    def __init__(self, budget: Budget) -> None:
        self.budget = budget
        self.used: dict[str, float] = dict.fromkeys(KINDS, 0.0)
        self.reserved: dict[str, float] = dict.fromkeys(KINDS, 0.0)
        self._floor = {"tokens": float(budget.tokens_per_call), "cost": float(budget.cost_per_call)}
        self._limited = tuple(k for k in BOUNDED if budget.limit(k) != math.inf)  # the budget never changes
        self.bound: dict[str, float] = dict(self._floor)
        self.held_calls = 0
        self.over_bound = 0  # calls that spent more than the bound reserved for them

    def per_call(self, kind: str | None) -> dict[str, float]:
        """What one call reserves: one of `kind` (None: no count; a call of `run` also counts one of `calls`) and
        the bound of each limited token/cost kind."""
        amounts = {} if kind is None else {kind: 1.0}
        if kind in RUN_CALLS:
            amounts["calls"] = 1.0
        amounts.update({k: self.bound[k] for k in self._limited})
        return amounts

    def _held(self, kind: str) -> float:
        return self.held_calls * self.bound[kind] if kind in self._limited else 0.0

    def hold(self, calls: int) -> bool:
        """Set aside the token and cost bound of `calls` later calls, if they fit; False (nothing held) if not."""
        self.held_calls = 0
        if not self.can_reserve({k: calls * amount for k, amount in self.per_call(None).items()}):
            return False
        self.held_calls = calls
        return True

    def unhold(self, calls: int) -> dict[str, float]:
        """Give the room set aside by `hold` back; return what each of the `calls` it was for may reserve: the
        bound, or an even split of the room when a call that broke the bound meanwhile left it short."""
        self.held_calls = 0
        return {kind: min(bound, max(0.0, self.remaining(kind)) / max(1, calls))
                for kind, bound in self.per_call(None).items()}

    def _check(self, amounts: Mapping[str, float]) -> None:
        for kind, amount in amounts.items():
            if kind not in self.used or not math.isfinite(amount) or amount < 0:
                raise ConfigError(f"unknown budget kind, or an amount that is not finite and >= 0: {kind}={amount!r}")

    def can_reserve(self, amounts: Mapping[str, float]) -> bool:
        """True if every amount fits next to what is used and reserved."""
        self._check(amounts)
        return all(self.used[k] + self.reserved[k] + self._held(k) + a <= self.budget.limit(k) + 1e-9
                   for k, a in amounts.items())

    def reserve(self, amounts: Mapping[str, float]) -> bool:
        """Reserve all `amounts` or nothing; False when any would exceed its limit."""
        if not self.can_reserve(amounts):
            return False
        for kind, amount in amounts.items():
            self.reserved[kind] += amount
        return True

    def release(self, amounts: Mapping[str, float]) -> None:
        """Give a reservation back unused (the call never started)."""
        self._check(amounts)
        for kind, amount in amounts.items():
            self.reserved[kind] = max(0.0, self.reserved[kind] - amount)

    def settle(self, reserved: Mapping[str, float], actual: Mapping[str, float]) -> None:
        """Turn a reservation into actual use. A token or cost amount above its bound raises the bound to it;
        `BudgetOvershotError` if the excess takes the total past the limit (the use is recorded first)."""
        self.release(reserved)
        self._check(actual)
        for kind, amount in actual.items():
            self.used[kind] += amount
        limited = [k for k in self._limited if k in actual]
        self.over_bound += any(actual[k] > reserved.get(k, 0.0) + 1e-12 for k in limited)
        for kind in limited:
            self.bound[kind] = max(self.bound[kind], actual[kind])
            if self.used[kind] > self.budget.limit(kind) + 1e-9:
                raise BudgetOvershotError(
                    f"one call spent {actual[kind]:g} {kind}, more than the {reserved.get(kind, 0.0):g} reserved for "
                    f"it, and took the {kind} budget past its limit ({self.used[kind]:g} > "
                    f"{self.budget.limit(kind):g}); set Budget.{kind}_per_call to the most one call can spend")

    def add_time(self, seconds: float) -> None:
        """Count elapsed run time."""
        self.used["wall_time"] += max(0.0, seconds)

    def remaining(self, kind: str) -> float:
        """What is left of `kind` after used, reserved and held amounts."""
        return self.budget.limit(kind) - self.used[kind] - self.reserved[kind] - self._held(kind)

    def exhausted(self) -> list[str]:
        """The kinds whose limit is fully used (nothing more can be reserved)."""
        return [k for k in KINDS if self.used[k] >= self.budget.limit(k) - 1e-9]

    def state_dict(self) -> dict[str, Any]:
        """Used amounts, with reservations in flight counted as used (they may have been spent); the bound."""
        return {"used": {k: self.used[k] + self.reserved[k] for k in KINDS}, "bound": dict(self.bound)}

    def load_state_dict(self, data: Mapping[str, Any]) -> None:
        """Restore used amounts (validated before anything changes)."""
        used = data.get("used")
        if isinstance(used, Mapping) and "calls" not in used and set(used) == set(KINDS) - {"calls"}:
            used = {**used, "calls": sum(used[k] for k in RUN_CALLS)}  # a checkpoint from before `calls`
        if not isinstance(used, Mapping) or set(used) != set(KINDS):
            raise StateDictError(f"meter state needs 'used' with keys {KINDS}, got {used!r}")
        if not all(is_number(used[k], finite=False) for k in KINDS):
            raise StateDictError(f"meter used amounts must be numbers, got {dict(used)!r}")
        values = {k: float(used[k]) for k in KINDS}
        if not all(is_number(v, low=0) for v in values.values()):
            raise StateDictError(f"meter used amounts must be finite and >= 0, got {values}")
        bound = self._bound_from(data.get("bound"))
        self.used = values
        self.reserved = dict.fromkeys(KINDS, 0.0)
        self.bound = bound

    def _bound_from(self, data: Any) -> dict[str, float]:
        """The per-call bound of a state dict (absent: the budget's), never below the budget's."""
        if data is None:
            data = self.bound
        if not isinstance(data, Mapping) or set(data) != set(BOUNDED) or \
                not all(is_number(v, low=0) for v in data.values()):
            raise StateDictError(f"meter bound must map {BOUNDED} to finite numbers >= 0, got {data!r}")
        return {k: max(float(data[k]), self._floor[k]) for k in BOUNDED}
