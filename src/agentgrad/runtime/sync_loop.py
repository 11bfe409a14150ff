"""The synchronous runtime: rounds with a barrier, deterministic under a seed.

Each round has four phases: every worker rolls out on its training task (concurrently), failed rollouts propose
an edit (at most `Workers.propose` at once), the gate scores the candidates (at most `Workers.gate` at once; when
the remaining gate budget could run out mid-round, in waves of as many as it surely covers, so that budget
exhaustion never depends on timing), and one aggregator step commits. Which task a worker gets and which worker
gets the last units of a budget are functions of (seed, round, worker), and calls are dispatched in a fixed order
within each phase (so diff ids, the numbers of their propose calls, are too): a run with deterministic async user
functions and a fake clock is reproducible bit for bit, event log included. (A synchronous user function runs in a
worker thread; threads finish in no fixed order, which may reorder the log, though not the verdicts.)

When a round has more rollouts than `run` slots, they start longest first by the engine's duration estimates:
the barrier waits for the slowest, so it should not start last. Only the start order changes (each worker keeps
its task, results keep worker order); the estimates come from the run's clock, so under a fake clock the order
is fixed too, and under a real one only the rollouts' call numbers can vary, never a diff id or a verdict.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import TypeVar

import anyio

from agentgrad.core.decision import Outcome
from agentgrad.optim.base import Candidate
from agentgrad.runtime.budget import OutOfBudget
from agentgrad.runtime.engine import Engine
from agentgrad.runtime.policy import SYNC
from agentgrad.runtime.promote import maybe_promote
from agentgrad.runtime.stale import admit_and_evaluate, calls_spent, closing_looks, follow_ups, recheck, release_parked
from agentgrad.runtime.step import aggregate

R = TypeVar("R")
Work = list[tuple[Candidate, Outcome]]


async def _gather(fns: Sequence[Callable[[], Awaitable[R]]], *, limit: int,
                  order: Sequence[int] | None = None) -> list[R | None]:
    """Run the calls, at most `limit` at once, started in `order` (indices into `fns`; by default as given);
    results come back in the order of `fns`, and a call that runs out of budget gives None."""
    out: list[R | None] = [None] * len(fns)
    gate = anyio.Semaphore(max(1, limit))

    async def one(index: int) -> None:
        async with gate:
            try:
                out[index] = await fns[index]()
            except OutOfBudget:
                out[index] = None

    async with anyio.create_task_group() as group:
        for index in range(len(fns)) if order is None else order:
            group.start_soon(one, index)
    return out


def start_order(engine: Engine, task_ids: Sequence[str]) -> list[int]:
    """The order to start calls of `run` on `task_ids` (indices): longest expected first when they outnumber the
    run slots (stable: ties keep their order), else as given. Only the start order changes, never the calls."""
    if len(task_ids) <= engine.config.workers.run_slots:
        return list(range(len(task_ids)))
    rank = {t: i for i, t in enumerate(engine.estimator.longest_first(list(dict.fromkeys(task_ids))))}
    return sorted(range(len(task_ids)), key=lambda i: rank[task_ids[i]])


def _affordable(engine: Engine, kind: str, wanted: int) -> int:
    """How many of `wanted` calls of `kind` fit in the budgets (so the last units go to the first workers)."""
    while wanted > 0 and not engine.accounts.affordable(kind, wanted):
        wanted -= 1
    return wanted


def _picks(engine: Engine, round_no: int, n: int) -> list[tuple[int, str]]:
    """(worker, task) for the round's rollouts: up to `n` workers, each on a task no other rollout of the round has
    and that the head does not solve and no open work came from (`Pacing.free_task`). A worker with no such task
    sits the round out (its rollout would only repeat work), except the first, so that a round always rolls out."""
    picks: list[tuple[int, str]] = []
    for w in range(n):
        index, avoid = round_no * engine.config.workers.rollout + w, [task for _, task in picks]
        task, fallback = engine.pacing.scan(index, avoid=avoid, worker=w)
        if task is None and picks:
            continue
        picks.append((w, fallback if task is None else task))
    return picks


async def run_round(engine: Engine, round_no: int, held: Work) -> list[Candidate]:
    """Phases 1-3 of a round; returns the candidates for the aggregator in a fixed order."""
    workers = engine.config.workers
    snapshot = engine.head
    n = _affordable(engine, "rollouts", workers.rollout) if not engine.idle() else 0
    while n > 0 and not engine.pacing.explore_allowed(n - 1):  # the calls left are for judging
        n -= 1
    picks = _picks(engine, round_no, n)
    tasks = [task for _, task in picks]
    rollouts = await _gather([partial(engine.rollout, f"worker-{w}", snapshot, task) for w, task in picks],
                             limit=workers.rollout, order=start_order(engine, tasks))
    failing = [r for r in rollouts if r is not None and r.reward < 1.0]
    engine.journal.counts["passed_rollouts"] += sum(1 for r in rollouts if r is not None and r.reward >= 1.0)
    k = _affordable(engine, "proposals", len(failing))
    proposed = await _gather([partial(engine.propose, r) for r in failing[:k]], limit=workers.propose)
    todo: list[Callable[[], Awaitable[Candidate | None]]] = [partial(recheck, engine, c, o) for c, o in held]
    todo += [partial(admit_and_evaluate, engine, p) for p in proposed if p is not None]
    engine.freeze_known()  # every rollout of the round is in: plans see the same cache whatever the timing
    return [c for c in await _gate_in_waves(engine, todo) if c is not None]


async def _gate_in_waves(engine: Engine, todo: Sequence[Callable[[], Awaitable[Candidate | None]]]
                         ) -> list[Candidate | None]:
    """Evaluate candidates in order, as many at once as the gate budget surely covers (each may need its screen's
    calls and two calls per task of its plan), so that running out of budget never depends on timing; when not even
    one is surely covered, one at a time."""
    plan, pool = engine.config.gate.max_examples, len(engine.gate.pool)
    per_candidate = engine.gate.screen_cost() + 2 * (pool if plan is None else min(plan, pool))
    most = engine.config.workers.gate
    if engine.accounts.affordable("gate_evals", per_candidate * len(todo)):
        return await _gather(todo, limit=most)
    out: list[Candidate | None] = []
    while len(out) < len(todo):
        wave = min(most, len(todo) - len(out))
        while wave > 1 and not engine.accounts.affordable("gate_evals", per_candidate * wave):
            wave -= 1
        out += await _gather(todo[len(out):len(out) + wave], limit=wave)
    return out


def _rollouts(engine: Engine) -> int:
    """Rollouts so far, those served from the gate's kept outputs (which make no call) included."""
    return engine.journal.counts["rollouts"] + engine.journal.counts["reused_rollouts"]


def _can_continue(engine: Engine, held: int) -> bool:
    exhausted = engine.accounts.meter.exhausted()
    if engine.accounts.time_left() <= 0 or "gate_evals" in exhausted or "calls" in exhausted:
        return False
    if held > 0:
        return True
    return not ("rollouts" in exhausted or "proposals" in exhausted or engine.idle())


async def _step(engine: Engine, held: Work) -> tuple[list[Candidate], Work]:
    """One round and its aggregator step: (the round's candidates, the work held for the next round). A step that
    commits may be due a promotion check (`maybe_promote`)."""
    round_no = engine.journal.counts["rounds"]
    engine.journal.counts["rounds"] += 1
    batch = await run_round(engine, round_no, held)
    if not batch:
        return batch, []
    follow = follow_ups(engine, aggregate(engine, batch), batch)
    await maybe_promote(engine)
    return batch, follow


async def _final_looks(engine: Engine, held: Work) -> None:
    """With the calls spent, one last step for the candidates replicating, `held` for their next context or
    waiting for one: their closing look (the design ends at the contexts they have, `runtime.stale.closing_looks`),
    decided on the evidence they have where that needs no call, else left undecided."""
    held = [(c, o) for c, o in held if c.closing] + closing_looks(engine)
    if held:
        await _step(engine, held)


async def run_sync(engine: Engine, pending: Work | None = None) -> None:
    """Rounds until a budget runs out; each round ends with one aggregator step.

    `pending` is work a resumed run found in flight (held candidates, unevaluated proposals): the first round
    evaluates it again.
    """
    engine.policy = SYNC
    held: Work = list(pending or [])
    stalled = False  # parked work was released and made no call: release no more until something changes
    with anyio.move_on_after(max(0.0, engine.accounts.time_left())):
        while True:
            released = not held and not stalled
            if released:
                held = release_parked(engine)
            if not held and (not _can_continue(engine, 0) or engine.pacing.parked_blocks()):
                held = release_parked(engine, winding_down=True)  # the last chance of parked work before the end
                if not held and not _can_continue(engine, 0) and _can_continue(engine, 1):
                    held = closing_looks(engine)  # nothing else can make a context for the stranded ones
            if not _can_continue(engine, len(held)):
                break
            calls, had_work, rolled = engine.journal.calls, bool(held), _rollouts(engine)
            batch, held = await _step(engine, held)
            if not batch and engine.journal.calls == calls and not had_work and _rollouts(engine) == rolled:
                break  # nothing could be dispatched (e.g. the token or cost budget is spent)
            stalled = released and not batch and engine.journal.calls == calls
        if calls_spent(engine):
            await _final_looks(engine, held)
    if engine.idle():
        engine.note_idle_stop()


__all__ = ["run_round", "run_sync", "start_order"]
