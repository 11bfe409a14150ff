"""The asynchronous runtime: stage pools joined by bounded channels, no barrier between rounds.

    rollout workers --(rollouts)--> proposers --(work)--> gate workers --(candidates)--> aggregator
                                                              ^                              |
                                                              +--- held, stale-to-repair ----+

Each pool has its own size; the user's `run` is bounded by the engine's run slots and `propose` (and `repair`)
by its propose slots. Channels are bounded, so a slow gate or aggregator holds the proposers back, and slow
proposers hold the rollout workers back (backpressure). A rollout worker refreshes its snapshot once the head is
more than `async_ratio` versions ahead, checked when its run slot is granted. Every task lives in one task group;
the loop ends when the budgets run out (or nothing more can be evaluated) and every channel has drained.

Under `Budget.calls` the rollouts go out in cohorts (`LoopPolicy.cohort`): a cohort's proposals are judged on one
head and its candidates taken by one aggregator step, as in a synchronous round, with no phase waiting for another.
"""

from __future__ import annotations

from contextlib import suppress
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream as ObjectReceiveStream
from anyio.streams.memory import MemoryObjectSendStream as ObjectSendStream

from agentgrad.core.decision import Outcome
from agentgrad.optim.base import Candidate
from agentgrad.runtime.budget import OutOfBudget
from agentgrad.runtime.engine import Engine
from agentgrad.runtime.policy import ASYNC
from agentgrad.runtime.promote import maybe_promote
from agentgrad.runtime.records import Proposed, Rollout, Snapshot
from agentgrad.runtime.stale import admit_and_evaluate, closing_looks, follow_ups, recheck, release_parked
from agentgrad.runtime.step import aggregate
from agentgrad.runtime.throttle import Throttle
from agentgrad.runtime.workqueue import WorkQueue

Work = tuple[Proposed | None, Candidate | None, Outcome | None]  # a new proposal, or a candidate sent back
_GONE = (anyio.BrokenResourceError, anyio.ClosedResourceError)


@dataclass
class _Feedback:
    """The aggregator's side of the gate's inbox.

    `waiting` holds the ids of every diff between the proposers and the end of an aggregator step (queued, being
    evaluated, or sent back). The aggregator's producer slot closes once the proposers are done and nothing is
    waiting, which lets the gate workers, then the aggregator, finish.
    """

    queue: WorkQueue[Work]
    upstream_done: bool = False
    waiting: set[str] = field(default_factory=set)
    sent_back: set[str] = field(default_factory=set)  # sent back, not yet returned to the aggregator
    closed: bool = False

    def maybe_close(self) -> None:
        if self.upstream_done and not self.waiting and not self.closed:
            self.closed = True
            self.queue.producer_done()

    def send_back(self, work: list[tuple[Candidate, Outcome]]) -> None:
        """Queue candidates for the gate again, ahead of new proposals (never blocks: no cycle of waits)."""
        for candidate, outcome in work:
            self.waiting.add(candidate.diff.id)
            self.sent_back.add(candidate.diff.id)
            self.queue.put_urgent((None, candidate, outcome))


def _starved(engine: Engine) -> bool:
    """True when nothing more could reach a verdict: the gate budget is spent, or rollouts bring nothing."""
    meter = engine.accounts.meter
    if meter.remaining("gate_evals") <= 0 or meter.remaining("calls") < 1:
        return True
    if engine.idle():
        engine.note_idle_stop()  # the rollout worker asking stops for good
        return True
    return False


def _wind_down(engine: Engine, feedback: _Feedback) -> None:
    """Send the parked candidates that can be placed now (earlier versions too) to the gate: the calls left are
    kept for them, so no rollout may move the head for them."""
    feedback.send_back(release_parked(engine, winding_down=True))


async def _rollout_worker(engine: Engine, index: int, out: ObjectSendStream[Rollout], throttle: Throttle,
                          feedback: _Feedback) -> None:
    name = f"worker-{index}"
    snapshot = engine.head
    starved, wind_down = partial(_starved, engine), partial(_wind_down, engine, feedback)

    def lag(current: Snapshot) -> Snapshot:
        """The lag budget, applied when the rollout's run slot is granted: refresh once the head is more than
        `async_ratio` versions ahead."""
        return engine.head if engine.head.version - current.version > engine.config.staleness.async_ratio else current
    try:
        async with out:
            while True:
                await throttle.turn(index)
                if _starved(engine) or engine.accounts.meter.remaining("proposals") <= 0:  # a rollout leads nowhere
                    return
                if not await engine.pacing.explore_turn(starved, worker=index, wind_down=wind_down):
                    return  # the calls left are kept to judge
                task = await engine.pacing.task_turn(engine.journal.counts["rollout_dispatch"], worker=index,
                                                     wind_down=wind_down)
                if task is None:
                    continue  # a verdict changed what a rollout may do: ask again
                engine.journal.counts["rollout_dispatch"] += 1
                try:
                    rollout = await engine.rollout(name, snapshot, task, refresh=lag)
                    snapshot = rollout.snapshot
                    if rollout.reward < 1.0:
                        engine.pacing.await_proposal(task)
                    await out.send(rollout)
                except (OutOfBudget, *_GONE):
                    return  # the budget is spent, or every proposer has stopped
    finally:
        throttle.release_all()  # a worker stops only when the run winds down: paused ones must see that too


async def _proposer(engine: Engine, inbox: ObjectReceiveStream[Rollout], out: WorkQueue[Work],
                    feedback: _Feedback, throttle: Throttle) -> None:
    try:
        async with inbox:
            async for rollout in inbox:
                try:
                    if _starved(engine):
                        return
                    proposed = await engine.propose(rollout)
                except OutOfBudget:
                    return
                finally:
                    if rollout.reward < 1.0:  # the rollout worker marked its task busy until now
                        engine.pacing.proposal_made(rollout.task_id)
                if proposed is not None:
                    feedback.waiting.add(proposed.diff.id)
                    if out.full:
                        throttle.backlogged()
                    await out.put((proposed, None, None))
    finally:
        out.producer_done()


async def _gate_one(engine: Engine, proposed: Proposed | None, held: Candidate | None,
                    outcome: Outcome | None) -> Candidate | None:
    work = held if held is not None else proposed
    assert work is not None
    try:
        if held is not None and outcome is not None:
            return await recheck(engine, held, outcome)
        assert proposed is not None
        return await admit_and_evaluate(engine, proposed)
    except OutOfBudget:
        engine.journal.counts["unfinished_evaluations"] += 1
        engine.open.shelve(work.diff.id)  # it stays open (the run's end records it); no worker holds it now
        return None


async def _gate_worker(engine: Engine, inbox: WorkQueue[Work], out: ObjectSendStream[Candidate],
                       feedback: _Feedback, throttle: Throttle) -> None:
    async with out:
        while True:
            if not len(inbox):
                throttle.starved()
            try:
                proposed, held, outcome = await inbox.get()
            except anyio.EndOfStream:
                return
            item = held.diff.id if held is not None else proposed.diff.id if proposed is not None else ""
            candidate = await _gate_one(engine, proposed, held, outcome)
            if candidate is not None:
                feedback.waiting.add(candidate.diff.id)  # a repair has a new id
                if candidate.diff.id != item:
                    feedback.waiting.discard(item)
                await out.send(candidate)
                feedback.sent_back.discard(item)
            else:
                feedback.sent_back.discard(item)
                feedback.waiting.discard(item)
                feedback.maybe_close()


def _fuse_wait(engine: Engine) -> float:
    """How long the aggregator waits for re-checked candidates to join a step (seconds): `RunConfig.fuse_wait`, or
    by default four mean call durations."""
    wait = engine.config.fuse_wait
    return 4 * engine.estimator.overall if wait is None else wait


async def _rest_of_cohort(engine: Engine, inbox: ObjectReceiveStream[Candidate], batch: list[Candidate],
                          feedback: _Feedback) -> None:
    """Add to `batch` the candidates still on their way to the aggregator (in cohort mode, `Pacing.cohorts`, the
    rest of the step's cohort), so that they are judged on one head and fused in one step. What is waiting is
    looked at again every mean call duration: a candidate the gate could not finish never comes."""
    while len(batch) < engine.config.max_batch and feedback.waiting.difference(c.diff.id for c in batch):
        with anyio.move_on_after(max(0.005, engine.estimator.overall)):
            try:
                batch.append(await inbox.receive())
            except anyio.EndOfStream:
                return


async def _gather(engine: Engine, inbox: ObjectReceiveStream[Candidate], first: Candidate,
                  feedback: _Feedback) -> list[Candidate]:
    """A step's batch: in cohort mode the rest of the cohort; what is ready now; and, while candidates sent back
    by the last step are still being re-checked, what arrives within the fusion wait (they share a head, so the
    step can fuse them)."""
    batch = [first]
    limit = engine.config.max_batch
    if engine.pacing.cohorts():
        await _rest_of_cohort(engine, inbox, batch, feedback)
    with anyio.move_on_after(_fuse_wait(engine)):
        while len(batch) < limit and feedback.sent_back:
            try:
                batch.append(await inbox.receive())
            except anyio.EndOfStream:
                break
    while len(batch) < limit:
        try:
            batch.append(inbox.receive_nowait())
        except (anyio.WouldBlock, anyio.EndOfStream):
            break
    return batch


async def _aggregator(engine: Engine, inbox: ObjectReceiveStream[Candidate], feedback: _Feedback,
                      promotions: ObjectSendStream[None]) -> None:
    async with inbox, promotions:
        async for first in inbox:
            batch = await _gather(engine, inbox, first, feedback)
            result = aggregate(engine, batch)
            feedback.waiting.difference_update(c.diff.id for c in batch)
            feedback.send_back(follow_ups(engine, result, batch))
            if engine.promotion_due:
                with suppress(anyio.WouldBlock):  # full: a check is already queued; it will see this head or later
                    promotions.send_nowait(None)
            _close(engine, feedback)


async def _promoter(engine: Engine, due: ObjectReceiveStream[None]) -> None:
    """Run promotion checks as the aggregator asks, beside it (a check never holds a step back)."""
    async with due:
        async for _ in due:
            await maybe_promote(engine)


async def _supervise(engine: Engine, pools: list[Any], feedback: _Feedback) -> None:
    """Wait for the rollout and proposal pools, then let the feedback channel close when nothing is waiting."""
    async with anyio.create_task_group() as group:
        for pool in pools:
            group.start_soon(*pool)
    feedback.send_back(release_parked(engine, winding_down=True))  # no rollout will move the head for them
    feedback.upstream_done = True
    _close(engine, feedback)


def _close(engine: Engine, feedback: _Feedback) -> None:
    """Once no proposal will come and nothing is in flight, send the stranded candidates for their closing look
    (`closing_looks`), then let the feedback channel close if nothing is waiting."""
    if feedback.upstream_done and not feedback.waiting and not feedback.closed:
        feedback.send_back(closing_looks(engine))
    feedback.maybe_close()


async def run_async(engine: Engine, pending: list[tuple[Candidate, Outcome]] | None = None) -> None:
    """Run the stage pools until the budgets are spent and every channel is drained.

    `pending` is work a resumed run found in flight; it goes to the gate first.
    """
    engine.policy = ASYNC
    w = engine.config.workers
    roll_send, roll_recv = anyio.create_memory_object_stream[Rollout](max(1, w.propose) * 2)
    work = WorkQueue[Work](max(1, w.gate) * 2, producers=w.propose + 1)  # the proposers and the aggregator
    cand_send, cand_recv = anyio.create_memory_object_stream[Candidate](engine.config.max_batch)
    promo_send, promo_recv = anyio.create_memory_object_stream[None](1)
    feedback = _Feedback(work)
    throttle = Throttle(w.rollout, enabled=w.adaptive)
    pools: list[Any] = []
    with anyio.move_on_after(max(0.0, engine.accounts.time_left())):
        # The original stream ends close as soon as the clones are handed out; the group then waits for its tasks.
        async with anyio.create_task_group() as group, roll_send, roll_recv, cand_send, cand_recv:
            pools += [(_rollout_worker, engine, i, roll_send.clone(), throttle, feedback) for i in range(w.rollout)]
            pools += [(_proposer, engine, roll_recv.clone(), work, feedback, throttle) for _ in range(w.propose)]
            feedback.send_back(list(pending or []))
            group.start_soon(_supervise, engine, pools, feedback)
            for _ in range(w.gate):
                group.start_soon(_gate_worker, engine, work, cand_send.clone(), feedback, throttle)
            group.start_soon(_aggregator, engine, cand_recv.clone(), feedback, promo_send)
            group.start_soon(_promoter, engine, promo_recv)
    engine.journal.counts.update({"rollout_workers_lowest": throttle.lowest, "rollout_worker_moves": throttle.moves})


__all__ = ["run_async"]
