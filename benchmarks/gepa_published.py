"""The published `gepa` package on the shipped ``routing`` set with the offline stand-in: the published-loop row of
algorithms.py (issue 12: a method's own loop beside the same method on agentgrad's two runtimes).

`gepa.optimize` with its defaults (Pareto candidate selection, epoch-shuffled minibatches of 3, strict minibatch
improvement, a full validation of every accepted candidate, no merge; its own reflective proposer and instruction
prompt) over routing_bench.py's `RoutingAdapter` (one component; the feedback of each record names the expected
code). The adapter answers with the solver algorithms.py gives the agentgrad recipe (the stand-in behind its
latency), `slots` calls in flight, each counted on a `world_systems.Clock`; the reflection LM is routing_bench.py's
`Reflector` around the recipe's scripted reflector (behind its latency). `AcceptTimes` keeps the second at which
gepa validated, and so accepted, each candidate, so that algorithms.py can time the held-out target the way it
does for the recipe's commits.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import anyio

from agentgrad.data.splits import Splits
from agentgrad.data.task import Task
from agentgrad.providers.base import Provider
from routing_bench import Reflector, RoutingAdapter
from world_systems import COMPONENT, Clock, GepaListener, GepaLog, load_gepa

Solver = Callable[[Any, Task], Any]  # async (rendered, task) -> answer, as algorithms.slow_solver makes
CAP_S = 900.0  # a wall-time cap of one run, seconds (the call budget ends it long before)


class AcceptTimes(GepaListener):
    """`GepaListener`, also keeping `times`: seconds on the clock when each candidate had been validated (gepa
    validates a candidate on the full validation split once it accepts it; index 0 is the seed)."""

    def __init__(self, clock: Clock) -> None:
        super().__init__(clock)
        self.times: dict[int, float] = {}

    def on_valset_evaluated(self, event: Mapping[str, Any]) -> None:
        self.times[int(event["candidate_idx"])] = self.trace.elapsed()
        super().on_valset_evaluated(event)

    def accepted_texts(self) -> list[tuple[float, str]]:
        """(seconds, text) of every accepted candidate after the seed, in the order gepa accepted them."""
        return [(self.times[i], self.val[i][1]) for i in sorted(self.times) if i > 0]


class Answers:
    """The adapter's `outputs`: `solver` on a batch, at most `slots` calls in flight, each counted on `clock`."""

    def __init__(self, solver: Solver, slots: int, clock: Clock) -> None:
        self.solver, self.slots, self.clock = solver, slots, clock

    async def _outputs(self, text: str, batch: Sequence[Task]) -> list[str]:
        outputs = [""] * len(batch)
        limiter = anyio.CapacityLimiter(self.slots)

        async def one(index: int) -> None:
            async with limiter:
                outputs[index] = str(await self.solver(text, batch[index]))
                self.clock.call()

        async with anyio.create_task_group() as group:
            for index in range(len(batch)):
                group.start_soon(one, index)
        return outputs

    def __call__(self, text: str, batch: list[Task]) -> list[str]:
        return anyio.run(self._outputs, text, batch)


@dataclass
class PublishedRun:
    """What one gepa run left: its result, the listener, the reflection LM (calls, tokens), solver calls, seconds."""

    result: Any
    listener: AcceptTimes
    reflector: Reflector
    calls: int
    wall: float


def optimize_routing(splits: Splits, start: str, solver: Solver, reward: Callable[[Task, Any], float],
                     reflector: Provider, *, calls: int, seed: int, slots: int) -> PublishedRun:
    """gepa.optimize (its defaults) from the text `start` on `splits` (train, val), `calls` metric calls."""
    gepa = load_gepa()
    batch_type = importlib.import_module("gepa.core.adapter").EvaluationBatch
    timeout = importlib.import_module("gepa.utils").TimeoutStopCondition(CAP_S)
    clock = Clock(start, calls)
    listener, log, reflection = AcceptTimes(clock), GepaLog(), Reflector(reflector, seed)
    adapter = RoutingAdapter(Answers(solver, slots, clock), batch_type, reward)
    result = gepa.optimize(seed_candidate={COMPONENT: start}, trainset=list(splits.train), valset=list(splits.val),
                           adapter=adapter, reflection_lm=reflection, max_metric_calls=calls,
                           stop_callbacks=[timeout], logger=log, callbacks=[listener], seed=seed)
    wall = clock.elapsed()
    if log.errors:
        raise RuntimeError(f"gepa skipped work after an error: {log.errors[0]}")
    return PublishedRun(result, listener, reflection, clock.calls, wall)


def published_row(run: PublishedRun, held_out: Callable[[str], float], start: str, seed: int,
                  target: float) -> dict[str, Any]:
    """algorithms.py's row for a gepa run: gepa's best candidate (by mean validation score) scored on the test
    split by `held_out` (no calls counted), and the first second an accepted candidate reached `target` there."""
    result, listener = run.result, run.listener
    baseline, learned = held_out(start), held_out(result.best_candidate[COMPONENT])
    reached = [t for t, text in listener.accepted_texts() if held_out(text) >= target]
    proposals = run.reflector.calls
    return {"method": "gepa", "runtime": "published", "system": "gepa_published", "asynchronous": False,
            "seed": seed, "ok": True, "error": None, "baseline": baseline, "learned": learned,
            "gain": learned - baseline, "calls": run.calls, "gepa_metric_calls": result.total_metric_calls,
            "proposals": proposals, "tokens": run.reflector.tokens, "loop_seconds": run.wall,
            "wall_seconds": run.wall, "commits": len(listener.accepted_texts()),
            "proposals_per_second": proposals / run.wall if run.wall else 0.0,
            "time_to_target": reached[0] if reached else None, "iterations": listener.iterations,
            "skipped_perfect_minibatch": listener.skipped, "hit_time_cap": run.wall >= CAP_S}
