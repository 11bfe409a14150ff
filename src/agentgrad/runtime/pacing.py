"""Pacing the rollouts under one budget of calls: explore only while the judging of what is in the pipeline is
covered (`runtime.split`) and the gate is not behind.

`Pacing` is the part of the engine that picks a rollout's task (`pick_task`), decides whether a rollout may start
now (`explore_allowed`) and lets an asynchronous rollout worker wait for a verdict to free calls (`explore_turn`).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import anyio

from agentgrad.core.artifact import content_hash
from agentgrad.runtime.accounts import Accounts
from agentgrad.runtime.config import RunConfig
from agentgrad.runtime.records import Snapshot
from agentgrad.runtime.scheduler import DurationEstimator, seeded_order
from agentgrad.runtime.scorecache import ScoreCache
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
    train: list[str]
    cache: ScoreCache
    head: Snapshot
    _epoch: tuple[int, list[str]]

    def _task_at(self, index: int) -> str:
        epoch, position = divmod(index, len(self.train))
        if self._epoch[0] != epoch:
            self._epoch = (epoch, seeded_order(self.train, seed=self.config.seed, salt=f"epoch{epoch}"))
        return self._epoch[1][position]

    def pick_task(self, index: int, avoid: Collection[str] = ()) -> str:
        """The training task for rollout number `index` (epochs of a seeded shuffle), passing over the tasks the
        head is already known to solve (its score there is cached: a rollout would only repeat it) and those in
        `avoid`; the task at `index` itself when every one is passed over."""
        head = content_hash(self.head.text)
        for step in range(len(self.train)):
            task = self._task_at(index + step)
            if task not in avoid and self.cache.scores.get((head, task), 0.0) < 1.0:
                return task
        return self._task_at(index)

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
