"""The published `gepa` package next to agentgrad's evolve() on the reference world (issue 3).

Writes benchmarks/out/gepa_compare.json and gepa_compare.png. The world, its seeds and the latency model are
runtime_bench.py's (20% junk proposals, lognormal call latency with median 50 ms and σ 1.5); every system gets S
in-flight `run` slots (16 by default) and the same budget of run calls (training rollouts plus validation or gate
evaluations). No LLM is used anywhere: proposals come from the world's own proposer.

- gepa: `gepa.optimize` with its defaults (Pareto candidate selection, epoch-shuffled minibatches of 3, strict
  minibatch improvement, a full validation of every accepted candidate, no merge) and an adapter written here:
  `evaluate` runs the world agent's `run` on the batch with at most S calls in flight; the reflective dataset
  holds the failing examples; `propose_new_texts` asks the world's proposer about a failing example (all of them
  with --reflect-all) and merges the rule into the candidate with the world's strategy (KeyedRules).
- agentgrad: evolve(), synchronous and asynchronous, with runtime_bench.py's pool sizes, for the wall time gepa
  took on the same seed (at most --seconds); with --count-budget, for `budget` gate evaluations instead
  (rollouts unlimited).

Measured per system and seed: wall time and run calls until the held-out (test) reward of the system's best text
(gepa: best mean validation score; agentgrad: the head) reaches the target; the held-out reward of the text it
had after exactly `budget` run calls; utilisation = achieved run calls/s ÷ (S ÷ mean latency) over the whole run;
slot utilisation = summed latency of the completed calls ÷ (S × wall time), which does not depend on how the
heavy-tailed sample mean of a short run falls (see runtime_bench.py); junk and wrong-method rules in the text at
the budget. Held-out rewards are computed offline (no calls). Needs gepa: install benchmarks/requirements-gepa.txt
in a separate env (make bench-gepa). `--quick`: one seed, a small budget, under two minutes.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import json
import statistics
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import anyio

from agentgrad.core.diff import apply_ops
from agentgrad.core.units import normalise
from agentgrad.data.splits import Splits
from agentgrad.data.task import Task
from agentgrad.runtime.budget import Budget
from agentgrad.runtime.config import Workers
from agentgrad.runtime.evolve import evolve
from agentgrad.store.sqlite import SQLiteStore
from agentgrad.strategies.keyed import entries
from agentgrad.testing.agents import WorldAgent
from agentgrad.testing.world import ReferenceWorld
from runtime_bench import MEAN_LATENCY, MEDIAN, SIGMA, junk, world

OUT = Path(__file__).parent / "out"
COMPONENT = "skill"
RUN_STAGES = ("rollouts", "gate_evals")
MISSING = "gepa is not importable: install benchmarks/requirements-gepa.txt in a separate env: make bench-gepa"


def load_gepa() -> ModuleType:
    """The `gepa` module, or exit with how to install it."""
    try:
        return importlib.import_module("gepa")
    except ImportError:
        raise SystemExit(MISSING) from None


def wrong_rules(w: ReferenceWorld, text: str) -> int:
    """Categories whose rule names a wrong method (they block the category)."""
    return sum(1 for key, value in entries(text).items()
               if key in w.methods and normalise(value) != f"use method {w.methods[key]}")


class Trace:
    """Run calls completed and the system's best text over wall time.

    State: `calls` so far, `budget_s` (seconds when call number `budget` completed) and `points`: (seconds, calls,
    text) each time the best text changed, starting with the seed text.
    """

    def __init__(self, w: ReferenceWorld, budget: int) -> None:
        self.world, self.budget, self.start, self.calls = w, budget, time.perf_counter(), 0
        self.budget_s: float | None = None
        self.points: list[tuple[float, int, str]] = [(0.0, 0, w.artifact.text)]

    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def call(self) -> None:
        self.calls += 1
        if self.calls == self.budget:
            self.budget_s = self.elapsed()

    def mark(self, text: str) -> None:
        if text != self.points[-1][2]:
            self.points.append((self.elapsed(), self.calls, text))

    def summary(self, target: float) -> dict[str, Any]:
        """Time and calls to the target, and the text at the budget with its held-out reward and bad rules."""
        scored = [(t, c, self.world.score(text, "test")) for t, c, text in self.points]
        reached = next(((t, c) for t, c, r in scored if r >= target), None)
        at_budget = [text for _, c, text in self.points if c <= self.budget][-1]
        return {"seconds_to_target": reached[0] if reached else None,
                "calls_to_target": reached[1] if reached else None,
                "test_reward_at_budget": self.world.score(at_budget, "test"),
                "seconds_at_budget": self.budget_s, "junk_rules": junk(self.world, at_budget),
                "wrong_rules": wrong_rules(self.world, at_budget),
                "curve": [[round(t, 3), c, r] for t, c, r in scored]}


def measured(name: str, seed: int, slots: int, trace: Trace, agent: WorldAgent, wall: float,
             target: float) -> dict[str, Any]:
    """One row of results: what the trace and the agent saw over `wall` seconds."""
    limit, summary = slots / MEAN_LATENCY, trace.summary(target)
    reached = summary["calls_to_target"] is not None
    return {"system": name, "seed": seed, "slots": slots, "calls": trace.calls, "wall_time": wall,
            "reached_budget": trace.calls >= trace.budget, "calls_per_s": trace.calls / wall,
            "utilisation": trace.calls / wall / limit, "slot_utilisation": agent.busy / (slots * wall),
            "utilisation_to_target": summary["calls_to_target"] / summary["seconds_to_target"] / limit
            if reached else None, "mean_in_flight": agent.busy / wall, "max_in_flight": agent.max_in_flight,
            "proposals": agent.proposals, **summary}


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

    def __init__(self, trace: Trace) -> None:
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


def run_gepa(seed: int, slots: int, budget: int, cap: float, target: float, *, reflect_all: bool) -> dict[str, Any]:
    """gepa.optimize on world `seed` until `budget` metric calls (or `cap` seconds)."""
    gepa = load_gepa()
    batch_type = importlib.import_module("gepa.core.adapter").EvaluationBatch
    timeout = importlib.import_module("gepa.utils").TimeoutStopCondition(cap)
    w = world(seed)
    agent, trace = WorldAgent(w, median=MEDIAN, sigma=SIGMA), Trace(w, budget)
    splits, listener, log = agent.splits(), GepaListener(trace), GepaLog()
    adapter = WorldAdapter(agent, slots, trace, batch_type, reflect_all=reflect_all)
    result = gepa.optimize(seed_candidate={COMPONENT: w.artifact.text}, trainset=list(splits.train),
                           valset=list(splits.val), adapter=adapter, max_metric_calls=budget,
                           stop_callbacks=[timeout], logger=log, callbacks=[listener], seed=0)
    wall = trace.elapsed()
    if log.errors:
        raise RuntimeError(f"gepa skipped work after an adapter error: {log.errors[0]}")
    if not listener.val or result.best_candidate[COMPONENT] != trace.points[-1][2]:
        raise RuntimeError("the gepa listener lost track of gepa's best candidate (a callback failed?)")
    row = measured("gepa_reflect_all" if reflect_all else "gepa", seed, slots, trace, agent, wall, target)
    return {**row, "gepa_metric_calls": result.total_metric_calls, "iterations": listener.iterations,
            "accepted": listener.accepted, "skipped_perfect_minibatch": listener.skipped,
            "full_val_evals": result.num_full_val_evals, "candidates": result.num_candidates,
            "hit_time_cap": wall >= cap}


def workers_for(slots: int, asynchronous: bool) -> Workers:
    """runtime_bench.py's pools: async weighted to rollouts; sync rolls out, proposes and gates with every worker."""
    if asynchronous:
        return Workers(rollout=slots, propose=max(1, slots // 2), gate=max(1, slots // 2), slots=slots)
    return Workers(rollout=slots, propose=slots, gate=slots, slots=slots)


def run_agentgrad(seed: int, slots: int, budget: int, limit: Budget, target: float, *,
                  asynchronous: bool) -> dict[str, Any]:
    """evolve() on world `seed` within `limit`; the trace is read at `budget` run calls."""
    w = world(seed)
    agent, trace = WorldAgent(w, median=MEDIAN, sigma=SIGMA), Trace(w, budget)
    splits, commits = agent.splits(), list[tuple[float, int, int]]()
    no_test = Splits(splits.train, splits.val, (), splits.protocol)  # scored offline: no calls after the run

    def listen(kind: str, payload: Mapping[str, Any]) -> None:
        if kind == "call" and payload["stage"] in RUN_STAGES:
            trace.call()
        elif kind == "commit":
            commits.append((trace.elapsed(), trace.calls, int(payload["version"])))

    with tempfile.TemporaryDirectory() as tmp:
        result = evolve(no_test, agent.reward, agent=agent, strategy=w.strategy, artifact=w.artifact,
                        budget=limit, workers=workers_for(slots, asynchronous),
                        asynchronous=asynchronous, store=Path(tmp) / "run", callbacks=[listen], seed=0)
        wall = trace.elapsed()
        with SQLiteStore(Path(tmp) / "run", git=False) as store:
            texts = {v.number: v.text for v in store.history(w.artifact.id)}
    if result.error is not None:
        raise RuntimeError(f"evolve failed: {result.error}")
    trace.points += [(t, c, texts[v]) for t, c, v in commits]
    name = ("agentgrad_async" if asynchronous else "agentgrad_sync") + ("_count" if limit.gate_evals else "")
    row = measured(name, seed, slots, trace, agent, wall, target)
    return {**row, "rollouts": result.usage.rollouts, "gate_evals": result.usage.gate_evals,
            "versions": len(result.history) - 1, "rounds": result.counts.get("rounds", 0),
            "decisions": {k: v for k, v in result.counts.items() if k.startswith("decision_")},
            "budget": limit.to_dict()}


def summarise(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per system: medians over seeds, and how many seeds reached the target within the budget."""
    out: dict[str, dict[str, Any]] = {}
    for name in dict.fromkeys(r["system"] for r in rows):
        mine = [r for r in rows if r["system"] == name]
        reached = [r for r in mine if r["calls_to_target"] is not None]
        med = {key: statistics.median(r[key] for r in mine) for key in
               ("test_reward_at_budget", "utilisation", "slot_utilisation", "mean_in_flight", "calls_per_s",
                "junk_rules", "wrong_rules")}
        med |= {key: statistics.median(r[key] for r in reached) if reached else None
                for key in ("seconds_to_target", "calls_to_target", "utilisation_to_target")}
        out[name] = {"seeds": len(mine), "reached_target": len(reached), **{f"median_{k}": v for k, v in med.items()}}
    return out


def plot(rows: list[dict[str, Any]], target: float, path: Path) -> bool:
    """Held-out reward of each system's best text against wall time (one line per system and seed)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, ax = plt.subplots(figsize=(7, 4.2))
    colours: dict[str, str] = {}
    for row in rows:
        name = row["system"]
        first = name not in colours
        colours.setdefault(name, f"C{len(colours)}")
        times = [p[0] for p in row["curve"]] + [row["wall_time"]]
        rewards = [p[2] for p in row["curve"]] + [row["curve"][-1][2]]
        ax.step(times, rewards, where="post", color=colours[name], alpha=0.9 if first else 0.45,
                label=name if first else None)
    ax.axhline(target, color="grey", linestyle=":", linewidth=1)
    ax.set_xlabel("wall time (s)")
    ax.set_ylabel("held-out (test) reward of the best text")
    ax.set_ylim(0, 1.02)
    ax.legend(loc="lower right")
    ax.set_title(f"reference world, {rows[0]['slots']} slots, lognormal latency (median 50 ms, σ 1.5)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    return True


def table(summary: Mapping[str, Mapping[str, Any]]) -> str:
    """The summary as aligned text, one system per line."""
    def cell(value: Any) -> str:
        return "-" if value is None else f"{value:.3g}" if isinstance(value, float) else str(value)
    keys = ("reached_target", "seconds_to_target", "calls_to_target", "test_reward_at_budget", "utilisation",
            "slot_utilisation", "utilisation_to_target", "junk_rules", "wrong_rules")
    lines = ["median of seeds".ljust(18) + "".join(k.replace("_to_", ">").replace("_at_", "@")[:13].rjust(14)
                                                  for k in keys)]
    lines += [name.ljust(18) + "".join(cell(s.get(k, s.get(f"median_{k}"))).rjust(14) for k in keys)
              for name, s in summary.items()]
    return "\n".join(lines)


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="one seed, a small budget: under two minutes")
    parser.add_argument("--slots", type=int, default=16, help="in-flight run calls for every system")
    parser.add_argument("--budget", type=int, help="run calls per system (default 1500, quick 400)")
    parser.add_argument("--seeds", type=int, help="world seeds 0..n-1 (default 2, quick 1)")
    parser.add_argument("--target", type=float, default=0.75, help="held-out reward to reach")
    parser.add_argument("--cap", type=float, default=240.0, help="wall-time cap of a gepa run, seconds")
    parser.add_argument("--seconds", type=float, default=60.0, help="most wall time of an agentgrad run")
    parser.add_argument("--count-budget", action="store_true", help="agentgrad: `budget` gate evaluations instead")
    parser.add_argument("--reflect-all", action="store_true", help="also run gepa proposing on every failing example")
    args = parser.parse_args()
    args.budget = args.budget or (400 if args.quick else 1500)
    args.seeds = args.seeds or (1 if args.quick else 2)
    return args


def run_seed(seed: int, args: argparse.Namespace) -> list[dict[str, Any]]:
    """gepa (and its --reflect-all variant), then agentgrad sync and async, on world `seed`."""
    common = (seed, args.slots, args.budget)
    rows = [run_gepa(*common, args.cap, args.target, reflect_all=False)]
    if args.reflect_all:
        rows.append(run_gepa(*common, args.cap, args.target, reflect_all=True))
    limit = Budget(gate_evals=args.budget, wall_time=args.cap) if args.count_budget \
        else Budget(wall_time=min(rows[0]["wall_time"], args.seconds))
    for asynchronous in (False, True):
        rows.append(run_agentgrad(*common, limit, args.target, asynchronous=asynchronous))
    return rows


def main() -> None:
    args = arguments()
    load_gepa()
    rows: list[dict[str, Any]] = []
    for seed in range(args.seeds):
        rows += run_seed(seed, args)
        print(f"seed {seed} done", flush=True)
    summary = summarise(rows)
    config = {"slots": args.slots, "budget_run_calls": args.budget, "seeds": list(range(args.seeds)),
              "target": args.target, "gepa_cap_s": args.cap, "agentgrad_max_s": args.seconds,
              "agentgrad_budget": "gate_evals" if args.count_budget else "gepa's wall time on the seed",
              "median_latency_s": MEDIAN, "sigma": SIGMA, "mean_latency_s": MEAN_LATENCY,
              "gepa_version": importlib.metadata.version("gepa")}
    OUT.mkdir(exist_ok=True)
    (OUT / "gepa_compare.json").write_text(json.dumps({"config": config, "summary": summary, "runs": rows},
                                                      indent=2))
    plotted = plot(rows, args.target, OUT / "gepa_compare.png")
    print(table(summary))
    print(f"wrote {OUT / 'gepa_compare.json'}" + (" and gepa_compare.png" if plotted else ""))


if __name__ == "__main__":
    main()
