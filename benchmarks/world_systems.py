"""The systems the world benchmarks compare, shared by gepa_compare.py and learning_bench.py.

- `Clock`: run calls completed and the system's best text over wall time (`Trace`: on a reference world).
- the published `gepa` package behind `WorldAdapter` (one component, the skill text; no LLM): `evaluate` runs the
  world agent's `run` on the batch with at most S calls in flight; the reflective dataset holds the failing
  examples; `propose_new_texts` asks the world's proposer about a failing example (all of them with
  `reflect_all`) and merges the rule into the candidate with the world's strategy (KeyedRules). `optimize_gepa`
  runs `gepa.optimize` with its defaults.
- agentgrad's `evolve()` (`evolve_world`), with every committed version and the verdict on every diff.

Held-out rewards are computed offline by the callers (no calls).
"""

from __future__ import annotations

import dataclasses
import importlib
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import anyio

from agentgrad.core.diff import apply_ops
from agentgrad.data.splits import Splits
from agentgrad.data.task import Task
from agentgrad.runtime.budget import Budget
from agentgrad.runtime.config import Workers
from agentgrad.runtime.evolve import evolve
from agentgrad.runtime.result import Result
from agentgrad.store.sqlite import SQLiteStore
from agentgrad.testing.agents import WorldAgent
from agentgrad.testing.world import ReferenceWorld

COMPONENT = "skill"
RUN_STAGES = ("rollouts", "gate_evals")
MISSING = "gepa is not importable: install benchmarks/requirements-gepa.txt in a separate env: make bench-gepa"


def load_gepa() -> ModuleType:
    """The `gepa` module, or exit with how to install it."""
    try:
        return importlib.import_module("gepa")
    except ImportError:
        raise SystemExit(MISSING) from None


def gepa_available() -> bool:
    """True if the `gepa` package can be imported here."""
    try:
        importlib.import_module("gepa")
    except ImportError:
        return False
    return True


def call_budget(calls: int) -> Budget:
    """A budget of `calls` run calls (rollouts plus gate evaluations together, GEPA's `max_metric_calls`):
    `Budget(calls=...)` where the runtime has it, else a fixed third of the calls for rollouts."""
    if "calls" in {f.name for f in dataclasses.fields(Budget)}:
        return Budget(calls=calls)  # type: ignore[call-arg,unused-ignore]
    return Budget(rollouts=calls // 3, gate_evals=calls - calls // 3)


def workers_for(slots: int, asynchronous: bool) -> Workers:
    """runtime_bench.py's pools: async weighted to rollouts; sync rolls out, proposes and gates with every worker."""
    if asynchronous:
        return Workers(rollout=slots, propose=max(1, slots // 2), gate=max(1, slots // 2), slots=slots)
    return Workers(rollout=slots, propose=slots, gate=slots, slots=slots)


class Clock:
    """Run calls completed and the system's best text over wall time, from the seed text `text`.

    State: `calls` so far, `budget_s` (seconds when call number `budget` completed) and `points`: (seconds, calls,
    text) each time the best text changed, starting with the seed text.
    """

    def __init__(self, text: str, budget: int) -> None:
        self.budget, self.start, self.calls = budget, time.perf_counter(), 0
        self.budget_s: float | None = None
        self.points: list[tuple[float, int, str]] = [(0.0, 0, text)]

    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def call(self) -> None:
        self.calls += 1
        if self.calls == self.budget:
            self.budget_s = self.elapsed()

    def mark(self, text: str) -> None:
        if text != self.points[-1][2]:
            self.points.append((self.elapsed(), self.calls, text))

    def at_budget(self) -> str:
        """The best text once `budget` run calls had completed (or when the run ended)."""
        return [text for _, c, text in self.points if c <= self.budget][-1]


class Trace(Clock):
    """A `Clock` on the reference world `w`, from its seed skill."""

    def __init__(self, w: ReferenceWorld, budget: int) -> None:
        super().__init__(w.artifact.text, budget)
        self.world = w


class WorldAdapter:
    """A `gepa.GEPAAdapter` for the reference world: one component (the skill text), no LLM.

    Args:
        agent: the world agent (its `run` and `propose`, with their simulated latency).
        slots: at most this many `run` calls in flight within one `evaluate`.
        trace: counts the run calls.
        batch_type: gepa's `EvaluationBatch`.
        reflect_all: propose on every failing example of the minibatch (else on the first).
    """

    def __init__(self, agent: WorldAgent, slots: int, trace: Trace, batch_type: Any, *, reflect_all: bool) -> None:
        self.agent, self.slots, self.trace, self.batch_type = agent, slots, trace, batch_type
        self.reflect_all = reflect_all

    async def _outputs(self, text: str, batch: Sequence[Task]) -> list[str]:
        outputs = [""] * len(batch)
        limiter = anyio.CapacityLimiter(self.slots)

        async def one(index: int) -> None:
            async with limiter:
                outputs[index] = await self.agent.run(self.agent.world.strategy.render(text), batch[index])
                self.trace.call()

        async with anyio.create_task_group() as group:
            for index in range(len(batch)):
                group.start_soon(one, index)
        return outputs

    def evaluate(self, batch: list[Task], candidate: dict[str, str], capture_traces: bool = False) -> Any:
        """Run the candidate's skill on the batch (S slots); 1.0 per solved task."""
        outputs = anyio.run(self._outputs, candidate[COMPONENT], batch)
        scores = [WorldAgent.reward(task, output) for task, output in zip(batch, outputs, strict=True)]
        traces = [{"task": t, "output": o, "score": s} for t, o, s in zip(batch, outputs, scores, strict=True)]
        return self.batch_type(outputs=outputs, scores=scores, trajectories=traces if capture_traces else None)

    def make_reflective_dataset(self, candidate: dict[str, str], eval_batch: Any,
                                components_to_update: list[str]) -> dict[str, list[dict[str, Any]]]:
        """The failing examples, for every component to update."""
        records = [{"Inputs": {"task_id": tr["task"].id, "prompt": tr["task"].input},
                    "Generated Outputs": tr["output"], "Feedback": "failed: the skill did not solve this task",
                    "score": tr["score"]} for tr in eval_batch.trajectories if tr["score"] < 1.0]
        return {name: records for name in components_to_update}

    async def _rules(self, text: str, records: Sequence[Mapping[str, Any]]) -> list[str]:
        rules = [""] * len(records)

        async def one(index: int) -> None:
            record = records[index]
            task = Task(record["Inputs"]["task_id"], record["Inputs"]["prompt"])  # as the world agent's splits
            rendered = self.agent.world.strategy.render(text)
            rules[index] = await self.agent.propose(rendered, task, record["Generated Outputs"], record["score"])

        async with anyio.create_task_group() as group:
            for index in range(len(records)):
                group.start_soon(one, index)
        return rules

    def propose_new_texts(self, candidate: dict[str, str], reflective_dataset: Mapping[str, Sequence[Any]],
                          components_to_update: list[str]) -> dict[str, str]:
        """The world's proposer on failing examples, its rules merged into the text; unchanged texts left out."""
        strategy, new = self.agent.world.strategy, {}
        for name in components_to_update:
            records = list(reflective_dataset.get(name, ()))[: None if self.reflect_all else 1]
            text = candidate[name]
            for rule in anyio.run(self._rules, text, records) if records else []:
                text = apply_ops(text, strategy.ops(rule, text))
            if text != candidate[name]:
                new[name] = text
        return new


class GepaListener:
    """A gepa callback: each validated candidate's mean validation score; marks gepa's best one on the trace."""

    def __init__(self, trace: Clock) -> None:
        self.trace = trace
        self.val: dict[int, tuple[float, str]] = {}
        self.iterations = self.accepted = self.skipped = 0

    def on_valset_evaluated(self, event: Mapping[str, Any]) -> None:
        self.val[int(event["candidate_idx"])] = (float(event["average_score"]), event["candidate"][COMPONENT])
        best = max(sorted(self.val), key=lambda i: self.val[i][0])  # the first of the best, as GEPAResult.best_idx
        self.trace.mark(self.val[best][1])

    def on_iteration_end(self, event: Mapping[str, Any]) -> None:
        self.iterations += 1
        self.accepted += bool(event["proposal_accepted"])

    def on_evaluation_skipped(self, event: Mapping[str, Any]) -> None:
        self.skipped += 1


class GepaLog:
    """A gepa logger keeping only the lines that report an exception (gepa logs and skips adapter errors)."""

    def __init__(self) -> None:
        self.errors: list[str] = []

    def log(self, message: str) -> None:
        if "Exception" in message or "failed" in message:
            self.errors.append(message)


@dataclass
class GepaRun:
    """What one gepa run left: its result, the listener (every validated candidate) and its wall time."""

    result: Any
    listener: GepaListener
    wall: float


def optimize_gepa(agent: WorldAgent, trace: Trace, slots: int, budget: int, *, cap: float, seed: int = 0,
                  reflect_all: bool = False) -> GepaRun:
    """gepa.optimize (its defaults) on the agent's world until `budget` metric calls (or `cap` seconds)."""
    gepa = load_gepa()
    batch_type = importlib.import_module("gepa.core.adapter").EvaluationBatch
    timeout = importlib.import_module("gepa.utils").TimeoutStopCondition(cap)
    splits, listener, log = agent.splits(), GepaListener(trace), GepaLog()
    adapter = WorldAdapter(agent, slots, trace, batch_type, reflect_all=reflect_all)
    result = gepa.optimize(seed_candidate={COMPONENT: agent.world.artifact.text}, trainset=list(splits.train),
                           valset=list(splits.val), adapter=adapter, max_metric_calls=budget,
                           stop_callbacks=[timeout], logger=log, callbacks=[listener], seed=seed)
    wall = trace.elapsed()
    if log.errors:
        raise RuntimeError(f"gepa skipped work after an adapter error: {log.errors[0]}")
    if not listener.val or result.best_candidate[COMPONENT] != trace.points[-1][2]:
        raise RuntimeError("the gepa listener lost track of gepa's best candidate (a callback failed?)")
    return GepaRun(result, listener, wall)


@dataclass
class EvolveRun:
    """What one evolve() run left: its result, every committed version's text, its wall time, and each diff's
    ops (as dicts) with its final verdicts (decision dicts)."""

    result: Result
    texts: dict[int, str]
    wall: float
    ops: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    verdicts: list[dict[str, Any]] = field(default_factory=list)


def evolve_world(agent: WorldAgent, trace: Trace, limit: Budget, workers: Workers, *, asynchronous: bool,
                 seed: int = 0) -> EvolveRun:
    """evolve() on the agent's world within `limit`; commits are marked on the trace (at the calls made so far)."""
    w = agent.world
    splits, commits = agent.splits(), list[tuple[float, int, int]]()
    no_test = Splits(splits.train, splits.val, (), splits.protocol)  # scored offline: no calls after the run
    ops: dict[str, list[dict[str, Any]]] = {}
    verdicts: list[dict[str, Any]] = []

    def listen(kind: str, payload: Mapping[str, Any]) -> None:
        if kind == "call" and payload["stage"] in RUN_STAGES:
            trace.call()
        elif kind == "commit":
            commits.append((trace.elapsed(), trace.calls, int(payload["version"])))
        elif kind == "proposal":
            ops[str(payload["diff"]["id"])] = list(payload["diff"].get("ops", []))
        elif kind == "decision":
            verdicts.append(dict(payload))

    with tempfile.TemporaryDirectory() as tmp:
        result = evolve(no_test, agent.reward, agent=agent, strategy=w.strategy, artifact=w.artifact,
                        budget=limit, workers=workers, asynchronous=asynchronous, store=Path(tmp) / "run",
                        callbacks=[listen], seed=seed)
        wall = trace.elapsed()
        with SQLiteStore(Path(tmp) / "run", git=False) as store:
            texts = {v.number: v.text for v in store.history(w.artifact.id)}
    if result.error is not None:
        raise RuntimeError(f"evolve failed: {result.error}")
    trace.points += [(t, c, texts[v]) for t, c, v in commits]
    return EvolveRun(result, texts, wall, ops, verdicts)
