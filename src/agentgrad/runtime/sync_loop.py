"""The synchronous runtime: rounds with a barrier, deterministic under a seed.

Each round has four phases: every worker rolls out on its training task (concurrently), failed rollouts propose
an edit (concurrently), the gate scores the candidates (concurrently, or in worker order when the remaining gate
budget could run out mid-round, so that budget exhaustion never depends on timing), and one aggregator step
commits. Which task a worker gets, which worker gets the last units of a budget, and every diff id are functions
of (seed, round, worker), so a run with deterministic user functions is reproducible bit for bit.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import TypeVar

import anyio

from agentgrad.core.decision import Outcome
from agentgrad.optim.base import Candidate
from agentgrad.runtime.budget import OutOfBudget
from agentgrad.runtime.engine import Engine, Proposed, Rollout, held_outcomes, recheck

T = TypeVar("T")
R = TypeVar("R")


async def _gather(fns: Sequence[Callable[[], Awaitable[R]]], *, sequential: bool = False) -> list[R | None]:
    """Run the calls (concurrently unless `sequential`); a call that runs out of budget gives None."""
    out: list[R | None] = [None] * len(fns)

    async def one(index: int) -> None:
        try:
            out[index] = await fns[index]()
        except OutOfBudget:
            out[index] = None

    if sequential:
        for index in range(len(fns)):
            await one(index)
        return out
    async with anyio.create_task_group() as group:
        for index in range(len(fns)):
            group.start_soon(one, index)
    return out


def _affordable(engine: Engine, kind: str, wanted: int) -> int:
    remaining = engine.meter.remaining(kind)
    return wanted if remaining >= wanted else max(0, int(remaining + 1e-9))


async def run_round(engine: Engine, round_no: int, held: list[tuple[Candidate, Outcome]]) -> list[Candidate]:
    """Phases 1-3 of a round; returns the candidates for the aggregator in a fixed order."""
    workers = engine.config.workers.rollout
    snapshot = engine.head
    n = _affordable(engine, "rollouts", workers)
    rollouts = await _gather([
        partial(engine.rollout, f"worker-{w}", snapshot, engine.pick_task(round_no * workers + w))
        for w in range(n)])
    failing = [r for r in rollouts if r is not None and r.reward < 1.0]
    engine.counts["passed_rollouts"] += sum(1 for r in rollouts if r is not None and r.reward >= 1.0)
    k = _affordable(engine, "proposals", len(failing))
    proposed = await _gather([
        partial(engine.propose, r, f"r{round_no:05d}{r.worker.replace('worker-', 'w')}") for r in failing[:k]])
    todo: list[Callable[[], Awaitable[Candidate | None]]] = [partial(recheck, engine, c, o) for c, o in held]
    todo += [partial(engine.evaluate, p) for p in proposed if p is not None]
    worst = len(todo) * (1 + 2 * len(engine.val))
    sequential = engine.meter.remaining("gate_evals") < worst
    return [c for c in await _gather(todo, sequential=sequential) if c is not None]


def _can_continue(engine: Engine, held: int) -> bool:
    if engine.time_left() <= 0 or "gate_evals" in engine.meter.exhausted():
        return False
    exhausted = engine.meter.exhausted()
    return held > 0 or not ("rollouts" in exhausted or "proposals" in exhausted)


async def run_sync(engine: Engine) -> None:
    """Rounds until a budget runs out; each round ends with one aggregator step."""
    held: list[tuple[Candidate, Outcome]] = []
    round_no = engine.steps
    with anyio.move_on_after(max(0.0, engine.time_left())):
        while _can_continue(engine, len(held)):
            batch = await run_round(engine, round_no, held)
            held = []
            if batch:
                held = list(held_outcomes(engine.aggregate(batch)))
            elif engine.meter.remaining("rollouts") <= 0 or engine.meter.remaining("proposals") <= 0:
                break
            round_no += 1


__all__ = ["Proposed", "Rollout", "run_round", "run_sync"]
