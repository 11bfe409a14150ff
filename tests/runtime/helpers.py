"""Shared builders for the runtime tests: a small reference world, its agent, and `evolve` on it."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio

from agentgrad.core.decision import Outcome
from agentgrad.runtime.accounts import NEVER_STARTED
from agentgrad.runtime.budget import Budget
from agentgrad.runtime.config import RunConfig
from agentgrad.runtime.engine import Engine
from agentgrad.runtime.evaluator import UserFunctions
from agentgrad.runtime.evolve import _aggregator, _open_run, evolve
from agentgrad.runtime.result import Result
from agentgrad.runtime.resume import ReplayReport, replay
from agentgrad.store.events import EventLog
from agentgrad.store.sqlite import SQLiteStore
from agentgrad.testing.agents import WorldAgent
from agentgrad.testing.clock import FakeClock
from agentgrad.testing.world import ReferenceWorld, WorldConfig

# 10 validation tasks per category: one right rule is enough evidence to be accepted at δ = 0.05.
WORLD = ReferenceWorld(WorldConfig(n_categories=4, tasks_per_category=40))
BUDGET = Budget(rollouts=48, proposals=24, gate_evals=400)
CALLS = Budget(calls=100)  # one budget of calls, so the runtime paces rollouts against judging


def agent(*, median: float = 0.0, clock: FakeClock | None = None, **kwargs: Any) -> WorldAgent:
    """A `WorldAgent` on `WORLD`; with `clock`, its latency advances the fake clock instead of waiting."""
    if clock is not None:
        kwargs["sleep"] = clock.sleep
    return WorldAgent(WORLD, median=median, **kwargs)


def run(store: Path, bot: WorldAgent, *, budget: Budget = BUDGET, clock: FakeClock | None = None,
        **kwargs: Any) -> Result:
    """`evolve` on the small world with `bot`'s functions (any keyword overrides them)."""
    options: dict[str, Any] = {"agent": bot, "strategy": WORLD.strategy, "artifact": WORLD.artifact,
                               "budget": budget, "workers": 4, "store": store, "seed": 1}
    if clock is not None:
        options["clock"] = clock.now
    options.update(kwargs)
    return evolve(bot.splits(), options.pop("reward", bot.reward), **options)


def events(store: Path, kinds: list[str] | None = None) -> list[tuple[str, dict[str, Any]]]:
    """The run's events as (kind, payload), in order."""
    log = EventLog(store)
    try:
        return [(e.kind, dict(e.payload)) for e in log.read(kinds)]
    finally:
        log.close()


def dispatched(store: Path) -> Counter[str]:
    """How many calls of each budget kind the event log says were dispatched and started (a call cancelled while
    it waited for a slot is given its reservation back: it never ran)."""
    unrun = {p["call"] for _, p in events(store, ["done"]) if p["error"] == NEVER_STARTED}
    return Counter(p["kind"] for _, p in events(store, ["dispatch"]) if p["call"] not in unrun)


def check_commits(store: Path, artifact_id: str = WORLD.artifact.id) -> list[str]:
    """Assert the commit invariants of a run directory; return the committed diff ids in order.

    Versions are contiguous from 0; every committed diff appears once; the store's ACCEPTED decisions, the log's
    ACCEPTED verdicts and the log's commit events each name exactly the committed diffs, once each.
    """
    with SQLiteStore(store, git=False) as lib:
        history = lib.history(artifact_id)
        accepted = [d.diff_id for d in lib.decisions(outcome=Outcome.ACCEPTED)]
    assert [v.number for v in history] == list(range(len(history)))
    committed = [v.diff_id for v in history[1:]]
    assert all(d is not None for d in committed)
    ids = [str(d) for d in committed]
    assert len(set(ids)) == len(ids), f"a diff was committed twice: {ids}"
    assert sorted(accepted) == sorted(ids)
    logged_accepts = [p["diff_id"] for k, p in events(store, ["decision"]) if p["outcome"] == "accepted"]
    assert sorted(logged_accepts) == sorted(ids)
    logged_commits = [(p["version"], p["diff"]) for _, p in events(store, ["commit"])]
    assert sorted(logged_commits) == [(v.number, v.diff_id) for v in history[1:]]
    return ids


def build_engine(store: Path, bot: WorldAgent, *, config: RunConfig | None = None,
                 budget: Budget = BUDGET) -> Engine:
    """An engine on the small world, as `evolve` builds it (call inside a running event loop)."""
    config = config or RunConfig()
    splits = bot.splits()
    lib, _ = _open_run(store, WORLD.artifact, splits, config, budget, time.time)
    user = UserFunctions(bot.run, bot.propose, bot.reward, config.staleness.repair)
    return Engine(tasks={t.id: t for t in (*splits.train, *splits.val, *splits.test)},
                  train=[t.id for t in splits.train], val=[t.id for t in splits.val], artifact=WORLD.artifact,
                  strategy=WORLD.strategy, user=user, config=config, budget=budget, store=lib,
                  aggregator=_aggregator(config, WORLD.strategy), clock=time.monotonic)


def on_engine(store: Path, body: Callable[[Engine, WorldAgent], Awaitable[None]], *,
              budget: Budget = CALLS) -> None:
    """Run `body(engine, agent)` on a fresh engine of the small world (`build_engine`), in an event loop."""
    async def main() -> None:
        bot = agent()
        engine = build_engine(store, bot, budget=budget)
        try:
            await body(engine, bot)
        finally:
            engine.store.close()

    anyio.run(main)


def replay_store(store: Path) -> ReplayReport:
    """Replay the run in `store` with the default optimizer on `WORLD`."""
    log, lib = EventLog(store), SQLiteStore(store, git=False)
    try:
        return replay(log, lib, _aggregator(RunConfig(), WORLD.strategy), WORLD.artifact)
    finally:
        log.close()
        lib.close()


class Occupancy:
    """How many threads are inside a block at once: `now`, the most so far (`peak`) and how many entered."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.now = self.peak = self.entered = 0

    @contextmanager
    def inside(self) -> Iterator[int]:
        """Count this thread in while the block runs; yields its entry number (1 for the first)."""
        with self._lock:
            self.now += 1
            self.entered += 1
            self.peak = max(self.peak, self.now)
            number = self.entered
        try:
            yield number
        finally:
            with self._lock:
                self.now -= 1
