"""A simulated agent on the reference world: `run`, `propose`, `reward` and `repair` for `evolve()`, with seeded
latency.

Latency is lognormal (median and σ configurable) and a pure function of (seed, task, text, call count), so runs
are reproducible; `sleep` is injectable (a fake clock's sleep makes a test instant). The agent counts how many of
its `run` and `propose` calls are in flight at once (`max_in_flight`, `max_propose_in_flight`), so tests can check
that a runtime never calls it with more concurrency than allowed.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import anyio

from agentgrad.core.artifact import content_hash
from agentgrad.data.splits import Splits
from agentgrad.data.task import Task
from agentgrad.testing.world import ReferenceWorld
from agentgrad.testing.worldconfig import draw_float

_NORMAL = statistics.NormalDist()


class WorldAgent:
    """Solves and proposes on a `ReferenceWorld`.

    Args:
        world: the world.
        median: median latency of a call in seconds (0 for none).
        sigma: log-scale spread of the latency.
        sleep: how to wait (anyio.sleep by default).
        fail_every: if > 0, every n-th run call raises (to exercise per-example failures).
        slow_proposer: how many times longer a `propose` call takes than a `run` call, in the median (a reflection
            model is often larger than the solver).
    """

    def __init__(self, world: ReferenceWorld, *, median: float = 0.0, sigma: float = 1.5,
                 sleep: Callable[[float], Awaitable[None]] = anyio.sleep, fail_every: int = 0,
                 slow_proposer: float = 1.0) -> None:
        self.world, self.median, self.sigma, self.sleep = world, median, sigma, sleep
        self.fail_every, self.slow_proposer = fail_every, slow_proposer
        self.calls: Counter[tuple[str, str]] = Counter()
        self.draws: Counter[tuple[str, str]] = Counter()
        self.runs = 0
        self.completed = 0
        self.busy = 0.0
        self.in_flight = 0
        self.max_in_flight = 0
        self.proposals = 0
        self.propose_in_flight = 0
        self.max_propose_in_flight = 0
        self.repairs: list[tuple[str, str]] = []

    def latency(self, task_id: str, text: str) -> float:
        """A lognormal latency, deterministic in (seed, task, text, how often this pair was run)."""
        key = (task_id, content_hash(text))
        self.calls[key] += 1
        if self.median <= 0:
            return 0.0
        u = min(max(draw_float(self.world.config.seed, "latency", *key, self.calls[key]), 1e-12), 1 - 1e-12)
        return float(self.median * 2.718281828459045 ** (self.sigma * _NORMAL.inv_cdf(u)))

    async def run(self, rendered: str, task: Task) -> str:
        """'solved' or 'failed', after a simulated model latency."""
        self.runs += 1
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if self.fail_every and self.runs % self.fail_every == 0:
                raise RuntimeError(f"simulated failure of call {self.runs}")
            latency = self.latency(task.id, rendered)
            await self.sleep(latency)
            self.completed += 1
            self.busy += latency
            return "solved" if self.world.solve(rendered, task.id) >= 1.0 else "failed"
        finally:
            self.in_flight -= 1

    async def propose(self, rendered: str, task: Task, output: str, reward: float) -> str:
        """The world's proposer, drawing anew each time the same (text, task) pair asks again."""
        key = (content_hash(rendered), task.id)
        self.draws[key] += 1
        draw = self.draws[key]
        self.proposals += 1
        self.propose_in_flight += 1
        self.max_propose_in_flight = max(self.max_propose_in_flight, self.propose_in_flight)
        try:
            await self.sleep(self.slow_proposer * self.latency(task.id, "propose:" + rendered))
        finally:
            self.propose_in_flight -= 1
        return self.world.propose(rendered, task.id, draw).text

    async def repair(self, diff: Mapping[str, Any], head_text: str) -> str:
        """Re-propose a stale diff's new units (``key: value`` lines) for the current head; remembers each call
        as (diff id, head text)."""
        self.repairs.append((str(diff.get("id", "")), head_text))
        lines = [op["new"].strip().lstrip("-* ").strip() for op in diff.get("ops", []) if op.get("new")]
        return "\n".join(lines)

    @staticmethod
    def reward(task: Task, output: str) -> float:
        """1.0 for 'solved', else 0.0."""
        return 1.0 if output == "solved" else 0.0

    def splits(self) -> Splits:
        """The world's tasks as `Task` values, split as the world splits them."""
        def tasks(ids: tuple[str, ...]) -> tuple[Task, ...]:
            return tuple(Task(i, self.world.tasks[i].prompt) for i in ids)
        return Splits(tasks(self.world.train), tasks(self.world.val), tasks(self.world.test),
                      f"reference world seed {self.world.config.seed}: train/val/test "
                      f"{len(self.world.train)}/{len(self.world.val)}/{len(self.world.test)}")
