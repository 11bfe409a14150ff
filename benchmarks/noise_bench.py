"""Pure-noise worlds (issue 9): nothing right to learn, so every commit is junk or harm. How many commits are harmful?

The proposer here never proposes a right rule: only junk tips (no effect) and contradictions (a wrong method for a
category, which blocks it: harmful wherever the category has easy tasks the base solves; no duplicates, which the
simulated proposer turns into a right rule while the skill is empty). Answers
flip with every edit at 0-10%. The goal: fewer than δ (0.05) of the committed changes are harmful, and the run's
held-out reward does not fall. `--flaky s` makes a share s of the tasks flaky (their answers flip at 30%: the
borderline inputs a model's answers shift on most, which the failures a run sees are mostly drawn from). Writes
benchmarks/out/noise_bench.json.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from itertools import product
from pathlib import Path
from typing import Any

from agentgrad.runtime.budget import Budget
from agentgrad.runtime.evolve import evolve
from agentgrad.store.sqlite import SQLiteStore
from agentgrad.testing.agents import WorldAgent
from agentgrad.testing.world import ReferenceWorld, WorldConfig

OUT = Path(__file__).parent / "out"
SHAPES = ((6, 8), (8, 12), (10, 24))  # (categories, tasks per category): 48 to 240 tasks
NOISE = (0.0, 0.05, 0.10)
FLAKY_NOISE = 0.3  # with --flaky s: a share s of the tasks flips at this rate (borderline inputs), the rest at NOISE


def _world(categories: int, per: int, noise: float, seed: int, flaky: float) -> ReferenceWorld:
    return ReferenceWorld(WorldConfig(n_categories=categories, tasks_per_category=per, noise=noise, base_rate=0.3,
                                      p_right=0.0, p_junk=0.5, p_contradict=0.5, p_duplicate=0.0, seed=seed,
                                      flaky_share=flaky, flaky_noise=FLAKY_NOISE))


def one_run(categories: int, per: int, noise: float, seed: int, asynchronous: bool,
            flaky: float = 0.0) -> dict[str, Any]:
    """One run on a pure-noise world: its commits, the harmful ones, and the held-out reward before and after."""
    world = _world(categories, per, noise, seed, flaky)
    agent = WorldAgent(world)
    with tempfile.TemporaryDirectory() as tmp:
        result = evolve(agent.splits(), agent.reward, agent=agent, strategy=world.strategy, artifact=world.artifact,
                        budget=Budget(calls=300), workers=4, asynchronous=asynchronous, store=tmp, seed=seed)
        store = SQLiteStore(tmp)
        try:
            ops = [op for v in store.history(world.artifact.id) if v.diff_id is not None
                   for op in store.diff(v.diff_id).ops]
        finally:
            store.close()
    harmful = sum(world.is_contradictory(op) for op in ops)
    return {"categories": categories, "per": per, "noise": noise, "seed": seed, "asynchronous": asynchronous,
            "ok": result.ok, "commits": len(result.history) - 1, "ops": len(ops), "harmful_ops": harmful,
            "junk_ops": sum(world.is_junk(op) for op in ops), "baseline": result.baseline_test_reward,
            "learned": result.test_reward}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--flaky", type=float, default=0.0, help="the share of tasks whose answers flip at "
                        f"{FLAKY_NOISE} (WorldConfig.flaky_share), the rest at the world's noise")
    parser.add_argument("--out", type=Path, default=OUT / "noise_bench.json", help="the JSON to write")
    args = parser.parse_args()
    if not 0.0 <= args.flaky <= 1.0:
        parser.error(f"--flaky must be in [0, 1], got {args.flaky}")
    started, rows = time.perf_counter(), []
    for (categories, per), noise, seed, asynchronous in product(SHAPES, NOISE, range(args.seeds), (False, True)):
        rows.append(one_run(categories, per, noise, seed, asynchronous, args.flaky))
    ops = sum(r["ops"] for r in rows)
    harmful = sum(r["harmful_ops"] for r in rows)
    summary = {"runs": len(rows), "committed_ops": ops, "harmful_ops": harmful,
               "junk_ops": sum(r["junk_ops"] for r in rows),
               "harmful_share": harmful / ops if ops else 0.0, "goal": "harmful_share < 0.05", "flaky": args.flaky,
               "runs_whose_reward_fell": sum(1 for r in rows if (r["learned"] or 0) < (r["baseline"] or 0)),
               "seconds": time.perf_counter() - started}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"summary": summary, "runs": rows}, indent=2))
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
