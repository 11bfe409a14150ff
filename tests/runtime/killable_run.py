"""A run the kill -9 test starts in a subprocess: `evolve` on a small reference world with real, seeded latency.

Usage: ``python killable_run.py STORE_DIR MODE SEED [KIND:N]`` with MODE ``sync`` or ``async``. It prints
``ready`` once its imports are done (so the test's kill lands inside the run), then one JSON line when the run
finishes. With ``KIND:N`` the process sends itself SIGKILL right after its N-th event of that kind is logged: a
kill -9 at an exact point (e.g. ``step:1`` dies after a step's inputs are logged, before it commits).
"""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Callable, Mapping
from typing import Any

from agentgrad.runtime.budget import Budget
from agentgrad.runtime.evolve import evolve
from agentgrad.testing.agents import WorldAgent
from agentgrad.testing.world import ReferenceWorld, WorldConfig

BUDGET = Budget(rollouts=48, proposals=24, gate_evals=360)
MEDIAN_LATENCY = 0.004


def die_at(spec: str) -> Callable[[str, Mapping[str, Any]], None]:
    """A run callback that kills this process with SIGKILL right after the N-th event of KIND (``KIND:N``)."""
    kind, count = spec.split(":")
    seen = {"n": 0}

    def callback(event: str, payload: Mapping[str, Any]) -> None:
        if event == kind:
            seen["n"] += 1
            if seen["n"] == int(count):
                os.kill(os.getpid(), signal.SIGKILL)

    return callback


def main(argv: list[str]) -> int:
    store, mode, seed = argv[0], argv[1], int(argv[2])
    callbacks = [die_at(argv[3])] if len(argv) > 3 else []
    world = ReferenceWorld(WorldConfig(n_categories=4, tasks_per_category=40))
    agent = WorldAgent(world, median=MEDIAN_LATENCY, sigma=1.0)
    print("ready", flush=True)
    result = evolve(agent.splits(), agent.reward, agent=agent, strategy=world.strategy, artifact=world.artifact,
                    budget=BUDGET, workers=4, asynchronous=mode == "async", store=store, seed=seed,
                    callbacks=callbacks)
    print(json.dumps({"ok": result.ok, "error": None if result.error is None else str(result.error),
                      "versions": len(result.history) - 1}), flush=True)
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
