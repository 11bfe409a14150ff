"""The published `gepa` package next to agentgrad's evolve() on the reference world (issue 3).

Writes benchmarks/out/gepa_compare.json and gepa_compare.png. The world, its seeds and the latency model are
runtime_bench.py's (20% junk proposals, lognormal call latency with median 50 ms and σ 1.5); every system gets S
in-flight `run` slots (16 by default) and the same budget of run calls (training rollouts plus validation or gate
evaluations). No LLM is used anywhere: proposals come from the world's own proposer.

- gepa: `gepa.optimize` with its defaults (Pareto candidate selection, epoch-shuffled minibatches of 3, strict
  minibatch improvement, a full validation of every accepted candidate, no merge) and the adapter of
  world_systems.py (shared with learning_bench.py): `evaluate` runs the world agent's `run` on the batch with at most S
  calls in flight; the reflective dataset holds the failing examples; `propose_new_texts` asks the world's proposer
  about a failing example (all of them with --reflect-all) and merges the rule into the candidate (KeyedRules).
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
import importlib.metadata
import json
import statistics
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agentgrad.core.units import normalise
from agentgrad.runtime.budget import Budget
from agentgrad.strategies.keyed import entries
from agentgrad.testing.agents import WorldAgent
from agentgrad.testing.world import ReferenceWorld
from runtime_bench import MEAN_LATENCY, MEDIAN, SIGMA, junk, world
from world_systems import Trace, evolve_world, load_gepa, optimize_gepa, workers_for

OUT = Path(__file__).parent / "out"


def wrong_rules(w: ReferenceWorld, text: str) -> int:
    """Categories whose rule names a wrong method (they block the category)."""
    return sum(1 for key, value in entries(text).items()
               if key in w.methods and normalise(value) != f"use method {w.methods[key]}")


def trace_summary(trace: Trace, target: float) -> dict[str, Any]:
    """Time and calls to the target, and the text at the budget with its held-out reward and bad rules."""
    w = trace.world
    scored = [(t, c, w.score(text, "test")) for t, c, text in trace.points]
    reached = next(((t, c) for t, c, r in scored if r >= target), None)
    at_budget = trace.at_budget()
    return {"seconds_to_target": reached[0] if reached else None,
            "calls_to_target": reached[1] if reached else None,
            "test_reward_at_budget": w.score(at_budget, "test"),
            "seconds_at_budget": trace.budget_s, "junk_rules": junk(w, at_budget),
            "wrong_rules": wrong_rules(w, at_budget),
            "curve": [[round(t, 3), c, r] for t, c, r in scored]}


def measured(name: str, seed: int, slots: int, trace: Trace, agent: WorldAgent, wall: float,
             target: float) -> dict[str, Any]:
    """One row of results: what the trace and the agent saw over `wall` seconds."""
    limit, summary = slots / MEAN_LATENCY, trace_summary(trace, target)
    reached = summary["calls_to_target"] is not None
    return {"system": name, "seed": seed, "slots": slots, "calls": trace.calls, "wall_time": wall,
            "reached_budget": trace.calls >= trace.budget, "calls_per_s": trace.calls / wall,
            "utilisation": trace.calls / wall / limit, "slot_utilisation": agent.busy / (slots * wall),
            "utilisation_to_target": summary["calls_to_target"] / summary["seconds_to_target"] / limit
            if reached else None, "mean_in_flight": agent.busy / wall, "max_in_flight": agent.max_in_flight,
            "proposals": agent.proposals, **summary}


def run_gepa(seed: int, slots: int, budget: int, cap: float, target: float, *, reflect_all: bool) -> dict[str, Any]:
    """gepa.optimize on world `seed` until `budget` metric calls (or `cap` seconds)."""
    w = world(seed)
    agent, trace = WorldAgent(w, median=MEDIAN, sigma=SIGMA), Trace(w, budget)
    run = optimize_gepa(agent, trace, slots, budget, cap=cap, reflect_all=reflect_all)
    result, listener = run.result, run.listener
    row = measured("gepa_reflect_all" if reflect_all else "gepa", seed, slots, trace, agent, run.wall, target)
    return {**row, "gepa_metric_calls": result.total_metric_calls, "iterations": listener.iterations,
            "accepted": listener.accepted, "skipped_perfect_minibatch": listener.skipped,
            "full_val_evals": result.num_full_val_evals, "candidates": result.num_candidates,
            "hit_time_cap": run.wall >= cap}


def run_agentgrad(seed: int, slots: int, budget: int, limit: Budget, target: float, *,
                  asynchronous: bool) -> dict[str, Any]:
    """evolve() on world `seed` within `limit`; the trace is read at `budget` run calls."""
    w = world(seed)
    agent, trace = WorldAgent(w, median=MEDIAN, sigma=SIGMA), Trace(w, budget)
    run = evolve_world(agent, trace, limit, workers_for(slots, asynchronous), asynchronous=asynchronous)
    result = run.result
    name = ("agentgrad_async" if asynchronous else "agentgrad_sync") + ("_count" if limit.gate_evals else "")
    row = measured(name, seed, slots, trace, agent, run.wall, target)
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
