"""Pacing the rollouts under one budget of calls: explore only while the judging of what is in the pipeline is
covered (`runtime.split`) and the gate is not behind.

`Pacing` is the part of the engine that decides whether a rollout may start now (`explore_allowed`) and lets an
asynchronous rollout worker wait for a verdict to free calls (`explore_turn`).
"""

from __future__ import annotations

from typing import Any

import anyio

from agentgrad.runtime.accounts import Accounts
from agentgrad.runtime.config import RunConfig
from agentgrad.runtime.scheduler import DurationEstimator
from agentgrad.runtime.split import SplitFigures, may_explore

BACKLOG = 2  # under `Budget.calls`, rollouts wait while this many times the gate workers' work is waiting


class Pacing(Accounts):
    """Rollout pacing. State (set up by the engine): `exploring`, the rollouts in flight; `open`, the diffs without
    a final verdict; and an event set when one gets its verdict (`settled`)."""

    config: RunConfig
    estimator: DurationEstimator
    gate: Any
    open: dict[str, Any]
    exploring: int
    _settled: anyio.Event | None

    def settled(self) -> None:
        """A diff got its final verdict: wake the rollout workers waiting for calls."""
        if self._settled is not None:
            self._settled.set()
            self._settled = None

    def explore_allowed(self, extra: int = 0) -> bool:
        """True if one more rollout (beside `extra` about to start) fits the division of `Budget.calls` between
        exploring and judging (`runtime.split`), and the gate is not behind (fewer than `BACKLOG` times its workers
        of proposals waiting or on their way); always True when calls are not limited."""
        if self.meter.budget.calls is None:
            return True
        if len(self.open) + self.exploring + extra >= BACKLOG * self.config.workers.gate:
            return False  # the gate is behind: a proposal made now would wait, and be judged on a stale head
        figures = SplitFigures(self.counts["rollouts"], self.counts["proposals"], self.counts["judged"],
                               self.meter.used["gate_evals"], self.gate.prior_cost())
        return may_explore(figures, calls_left=self.meter.remaining("calls"), waiting=len(self.open),
                           exploring=self.exploring + extra)

    async def explore_turn(self) -> bool:
        """Wait until a rollout may start (`explore_allowed`): a verdict, or a while, may free the calls it needs;
        False once no call is left at all."""
        while not self.explore_allowed():
            if self.meter.remaining("calls") < 1:
                return False
            self.counts["explore_waits"] += 1
            if self._settled is None:
                self._settled = anyio.Event()
            with anyio.move_on_after(max(0.005, 4 * self.estimator.overall)):
                await self._settled.wait()
        return True
