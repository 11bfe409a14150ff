"""The asynchronous runtime: stage pools joined by bounded channels, no barrier between rounds.

    rollout workers --(rollouts)--> proposers --(proposals)--> gate workers --(candidates)--> aggregator
                                                                   ^                              |
                                                                   +-------- held (rechecks) -----+

Each pool has its own size; the user's `run` is bounded by the engine's slot semaphore. Channels are bounded, so
a slow gate or aggregator holds the proposers back (backpressure). A rollout worker refreshes its snapshot once
the head is more than `async_ratio` versions ahead. Every task lives in one task group; the loop ends when the
budgets run out and every channel has drained.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import anyio
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream as ObjectReceiveStream
from anyio.streams.memory import MemoryObjectSendStream as ObjectSendStream

from agentgrad.core.decision import Outcome
from agentgrad.optim.base import Candidate
from agentgrad.runtime.budget import OutOfBudget
from agentgrad.runtime.engine import Engine, Proposed, Rollout, Snapshot, held_outcomes, recheck

Work = tuple[Proposed | None, Candidate | None, Outcome | None]  # a new proposal, or a held candidate to recheck


@dataclass
class _Feedback:
    """The aggregator's own sender into the gate channel.

    `waiting` holds the ids of every diff between the proposers and the end of an aggregator step (queued, being
    evaluated, or held for a recheck). The sender closes once the proposers are done and nothing is waiting, which
    lets the gate workers, then the aggregator, finish.
    """

    send: ObjectSendStream[Work]
    upstream_done: bool = False
    waiting: set[str] = field(default_factory=set)
    closed: bool = False

    def maybe_close(self) -> None:
        if self.upstream_done and not self.waiting and not self.closed:
            self.closed = True
            self.send.close()


async def _rollout_worker(engine: Engine, index: int, out: ObjectSendStream[Rollout]) -> None:
    name = f"worker-{index}"
    snapshot = engine.head
    async with out:
        while True:
            if engine.head.version - snapshot.version > engine.config.staleness.async_ratio:
                snapshot = engine.head
            task = engine.pick_task(engine.counts["rollout_dispatch"])
            engine.counts["rollout_dispatch"] += 1
            try:
                rollout = await engine.rollout(name, snapshot, task)
            except OutOfBudget:
                return
            await out.send(rollout)


async def _proposer(engine: Engine, inbox: ObjectReceiveStream[Rollout], out: ObjectSendStream[Work],
                    feedback: _Feedback) -> None:
    async with inbox, out:
        async for rollout in inbox:
            diff_id = f"a{engine.counts['proposal_seq']:06d}"
            engine.counts["proposal_seq"] += 1
            try:
                proposed = await engine.propose(rollout, diff_id)
            except OutOfBudget:
                return
            if proposed is not None:
                feedback.waiting.add(proposed.diff.id)
                await out.send((proposed, None, None))


async def _gate_worker(engine: Engine, inbox: ObjectReceiveStream[Work], out: ObjectSendStream[Candidate],
                       feedback: _Feedback) -> None:
    async with inbox, out:
        async for proposed, held, outcome in inbox:
            try:
                if held is not None and outcome is not None:
                    candidate = await recheck(engine, held, outcome)
                else:
                    assert proposed is not None
                    fresh = engine.reanchor(proposed)
                    candidate = None if fresh is None else await engine.evaluate(fresh)
            except OutOfBudget:
                engine.counts["unfinished_evaluations"] += 1
                candidate = None
            if candidate is not None:
                await out.send(candidate)
            else:
                item = held.diff.id if held is not None else proposed.diff.id if proposed is not None else ""
                feedback.waiting.discard(item)
                feedback.maybe_close()


async def _aggregator(engine: Engine, inbox: ObjectReceiveStream[Candidate], feedback: _Feedback,
                      group: TaskGroup) -> None:
    async def send_back(item: Work) -> None:
        await feedback.send.send(item)

    async with inbox:
        async for first in inbox:
            batch = [first]
            while len(batch) < engine.config.max_batch:
                try:
                    batch.append(inbox.receive_nowait())
                except (anyio.WouldBlock, anyio.EndOfStream):
                    break
            result = engine.aggregate(batch)
            feedback.waiting.difference_update(c.diff.id for c in batch)
            for candidate, outcome in held_outcomes(result):
                feedback.waiting.add(candidate.diff.id)
                group.start_soon(send_back, (None, candidate, outcome))  # not awaited here: no cycle of waits
            feedback.maybe_close()


async def _supervise(engine: Engine, pools: list[Any], feedback: _Feedback) -> None:
    """Wait for the rollout and proposal pools, then let the feedback channel close when nothing is held."""
    async with anyio.create_task_group() as group:
        for pool in pools:
            group.start_soon(*pool)
    feedback.upstream_done = True
    feedback.maybe_close()


async def run_async(engine: Engine) -> None:
    """Run the stage pools until the budgets are spent and every channel is drained."""
    w = engine.config.workers
    roll_send, roll_recv = anyio.create_memory_object_stream[Rollout](max(1, w.propose) * 2)
    work_send, work_recv = anyio.create_memory_object_stream[Work](max(1, w.gate) * 2)
    cand_send, cand_recv = anyio.create_memory_object_stream[Candidate](engine.config.max_batch)
    feedback = _Feedback(work_send.clone())
    pools: list[Any] = []
    with anyio.move_on_after(max(0.0, engine.time_left())):
        async with anyio.create_task_group() as group, roll_send, roll_recv, work_send, work_recv, cand_send, \
                cand_recv:
            pools += [(_rollout_worker, engine, i, roll_send.clone()) for i in range(w.rollout)]
            pools += [(_proposer, engine, roll_recv.clone(), work_send.clone(), feedback) for _ in range(w.propose)]
            group.start_soon(_supervise, engine, pools, feedback)
            for _ in range(w.gate):
                group.start_soon(_gate_worker, engine, work_recv.clone(), cand_send.clone(), feedback)
            group.start_soon(_aggregator, engine, cand_recv.clone(), feedback, group)


__all__ = ["Snapshot", "run_async"]
