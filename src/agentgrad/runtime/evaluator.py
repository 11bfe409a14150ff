"""Calling the user's `run`: one budgeted, slot-bounded call, hedged against stragglers, and its reward.

`Evaluator` is the engine's collaborator (`engine.evaluator`) for every call of `run`: rollouts, the gate's
scores (`score`, which the score cache calls on a miss) and held-out evaluations. It reads only what it is given:
the tasks, the strategy (to render a text), the user's functions, the budgets and the caller (`Accounts`), the run
slots, the duration estimates, the journal and the run's health; the loop's policy comes through `policy()`, as
a loop sets it when it starts. Nothing here knows the score cache, so the cache's loader and the cache are not a
cycle: the cache keeps the output `score` returns.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from agentgrad.runtime.accounts import Accounts
from agentgrad.runtime.calls import CallOutcome, Slots
from agentgrad.runtime.config import RunConfig
from agentgrad.runtime.health import RunHealth
from agentgrad.runtime.policy import LoopPolicy
from agentgrad.runtime.records import Recorder
from agentgrad.runtime.scheduler import DurationEstimator
from agentgrad.runtime.scorecache import Scored
from agentgrad.strategies.base import Strategy

ROLLOUT_PATIENCE = 4.0  # a rollout is cut off at this many times the gate's hedge patience


@dataclass(frozen=True)
class UserFunctions:
    """The user's integration points: `run`, `propose`, `reward`, and the optional stale-diff `repair`."""

    run: Callable[..., Any]
    propose: Callable[..., Any]
    reward: Callable[..., Any]
    repair: Callable[..., Any] | None = None


class Evaluator:
    """Calls of `run` and their rewards, for one run."""

    def __init__(self, *, tasks: Mapping[str, Any], strategy: Strategy, user: UserFunctions, config: RunConfig,
                 accounts: Accounts, slots: Slots, estimator: DurationEstimator, journal: Recorder,
                 health: RunHealth, policy: Callable[[], LoopPolicy]) -> None:
        self.tasks, self.strategy, self.user, self.config = tasks, strategy, user, config
        self.accounts, self.slots, self.estimator, self.journal = accounts, slots, estimator, journal
        self.health, self.policy = health, policy

    async def call_run(self, kind: str, text: str, task_id: str, late: Callable[[], str] | None = None,
                       patience: float | None = None) -> CallOutcome:
        """One budgeted, slot-bounded call of the user's `run` on `task_id` with `text` rendered (or, with `late`,
        the text `late()` gives once the slot is granted); a call cut off at its `patience` is returned as a
        straggler, not as evidence."""
        task = self.tasks[task_id]
        args = (self.strategy.render(text) if late is None else "", task)  # with `late`, replaced by its result
        lazy = None if late is None else (lambda: (self.strategy.render(late()), task))
        outcome = await self.accounts.budgeted(kind, self.user.run, args, self.slots, task_id, text_result=True,
                                               late=lazy, patience=patience)
        if outcome.straggler:
            return outcome
        if self.estimator.observe(task_id, outcome.seconds):
            self.journal.counts["stragglers"] += 1
        self.health.observe(None if outcome.ok else str(outcome.error))
        return outcome

    async def hedged_run(self, kind: str, text: str, task_id: str,
                         late: Callable[[], str] | None = None) -> CallOutcome:
        """`call_run`; in the asynchronous runtime, a call still running `RunConfig.hedge` times its task's
        expected duration (from slot grant) is cut off and started again once (a hedge against a stuck request:
        at the end of a run, one such call would hold the whole run). The cut-off call is charged, so under
        `Budget.calls` a gate call gets a rollout's patience too."""
        expected = self.estimator.estimate(task_id)
        if not self.policy().hedge or not self.config.hedge or expected <= 0:
            return await self.call_run(kind, text, task_id, late=late)
        # a slow rollout holds nothing back until the end of a run, and cutting one off wastes it: far more patience
        patient = kind == "rollouts" or self.accounts.meter.budget.calls is not None
        patience = self.config.hedge * expected * (ROLLOUT_PATIENCE if patient else 1.0)
        outcome = await self.call_run(kind, text, task_id, late=late, patience=patience)
        if not outcome.straggler:
            return outcome
        self.journal.counts["hedged_calls"] += 1
        return await self.call_run(kind, text, task_id, late=late)

    async def reward(self, task_id: str, outcome: CallOutcome) -> float:
        """The reward of a call's output (0 for a failed call)."""
        if not outcome.ok:
            return 0.0
        return float(await self.accounts.caller.reward(self.user.reward, self.tasks[task_id], task_id,
                                                       outcome.value))

    async def score(self, text: str, task_id: str) -> Scored:
        """A gate call: `text` on `task_id`, scored, with the output behind the score when it is a text."""
        outcome = await self.hedged_run("gate_evals", text, task_id)
        score = await self.reward(task_id, outcome)
        return Scored(score, outcome.value if outcome.ok and isinstance(outcome.value, str) else None)


__all__ = ["ROLLOUT_PATIENCE", "Evaluator", "UserFunctions"]
