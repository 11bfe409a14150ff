"""Meta-Harness on the embedded local model: a harness searched from raw traces on the shipped 'routing' set.

The local model (llama.cpp in this process; it takes about a minute to load) answers each ticket with the harness
as its system prompt, and plays Meta-Harness's proposer: it reads earlier harnesses in full with their scores and
raw traces, states a hypothesis and writes a complete new harness. The harness is an L1 artifact: one candidate
is checked at a time, on the whole gate pool, before it lands. The archive is printed at the end.

    python examples/algorithms/meta_harness_local.py --calls 60 [--async]
"""

from __future__ import annotations

import argparse
import tempfile
from dataclasses import replace
from pathlib import Path

from agentgrad.agents.llm import LLMAgent
from agentgrad.agents.skill import resolve_model, scoring
from agentgrad.algorithms.meta_harness import MetaHarnessAgent, harness, recipe
from agentgrad.data.shipped import load_set, recommended_scorer
from agentgrad.runtime.budget import Budget


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=60, help="calls of the solver (rollouts and gate together)")
    parser.add_argument("--async", dest="asynchronous", action="store_true", help="the barrier-free runtime")
    parser.add_argument("--set", default="routing", help="shipped task set")
    parser.add_argument("--model", default="local", help="'local' (default), 'openai:<model>', ...")
    parser.add_argument("--harness", default="Answer with the code only.", help="the starting harness")
    parser.add_argument("--seconds", type=float, default=900.0, help="wall-time budget")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds one proposal may take (CPU model)")
    parser.add_argument("--run-dir", type=Path, default=None)
    args = parser.parse_args()
    provider = resolve_model(args.model)
    run_dir = args.run_dir or Path(tempfile.mkdtemp(prefix="meta-harness-local-")) / "run"
    solver = LLMAgent(provider, params={"temperature": 0.0, "max_tokens": 24}).run
    method = recipe(solver, reflector=provider, params={"temperature": 0.3, "max_tokens": 400})
    method = replace(method, config=replace(method.config, timeout=args.timeout))
    result = method.evolve(load_set(args.set), scoring(recommended_scorer(args.set)), artifact=harness(args.harness),
                           budget=Budget(calls=args.calls, wall_time=args.seconds),
                           asynchronous=args.asynchronous, workers=2, store=run_dir)
    print(result.summary())
    print("harness:\n" + (result.rendered or "(empty)"))
    agent = method.agent
    if isinstance(agent, MetaHarnessAgent):
        for entry in agent.archive.values():
            print(f"  {entry.name} ({entry.outcome}, built on {entry.base or '-'}): {entry.hypothesis[:90]}")
    return 0 if result.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
