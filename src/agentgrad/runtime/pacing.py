"""Pacing the rollouts under one budget of calls: explore only while the judging of what is in the pipeline is
covered (`runtime.split`) and the gate is not behind.

`Pacing` is the part of the engine that picks a rollout's task (`pick_task`), decides whether a rollout may start
now (`explore_allowed`), lets an asynchronous rollout worker wait for a verdict to free calls (`explore_turn`), and
serves a rollout from the gate's own run of the same head on the same task when it has one (`reused_rollout`: the
same call, so none is made and no budget is drawn on; each kept output serves one rollout, and counts as
`reused_rollouts`).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import anyio

from agentgrad.core.artifact import content_hash
from agentgrad.runtime.accounts import Accounts
from agentgrad.runtime.config import RunConfig
from agentgrad.runtime.parking import Parking
from agentgrad.runtime.records import Rollout, Snapshot
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
    parking: Parking

    def _task_at(self, index: int) -> str:
        epoch, position = divmod(index, len(self.train))
        if self._epoch[0] != epoch:
            self._epoch = (epoch, seeded_order(self.train, seed=self.config.seed, salt=f"epoch{epoch}"))
        return self._epoch[1][position]

    def pick_task(self, index: int, avoid: Collection[str] = ()) -> str:
        """The training task for rollout number `index` (epochs of a seeded shuffle), passing over the tasks the
        head is already known to solve (its score there is cached: a rollout would only repeat it), the origins of
        candidates waiting to replicate (a rollout there would propose one of them again) and those in `avoid`; the
        task at `index` itself when every one is passed over."""
        head, waiting = content_hash(self.head.text), self.parking.origins
        for step in range(len(self.train)):
            task = self._task_at(index + step)
            if task not in avoid and task not in waiting and self.cache.scores.get((head, task), 0.0) < 1.0:
                return task
        return self._task_at(index)

    def reused_rollout(self, worker: str, snapshot: Snapshot, task_id: str) -> Rollout | None:
        """The rollout of `snapshot` on `task_id` from the output the gate already has of it, or None."""
        kept = self.cache.reusable(snapshot.text, task_id) if self.config.reuse_outputs else None
        if kept is None:
            return None
        reward, output = kept
        self.log_soon("rollout", {"task": task_id, "version": snapshot.version, "reward": reward, "worker": worker,
                                  "reused": True})
        self.counts["reused_rollouts"] += 1
        self.counts["idle_rollouts"] += 1
        return Rollout(worker, task_id, snapshot, output, reward, None)

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
        queued = len(self.open) - len(self.parking)  # parked candidates wait for a context, not for the gate
        if queued + self.exploring + extra >= BACKLOG * self.config.workers.gate:
            return False  # the gate is behind: a proposal made now would wait, and be judged on a stale head
        rollouts = self.counts["rollouts"] + self.counts["reused_rollouts"]
        figures = SplitFigures(rollouts, self.counts["proposals"], self.counts["judged"],
                               self.meter.used["gate_evals"], self.gate.prior_cost())
        return may_explore(figures, calls_left=self.meter.remaining("calls"), waiting=queued,
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
