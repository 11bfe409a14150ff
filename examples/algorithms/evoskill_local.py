"""EvoSkill on the embedded local model: skill folders learned from failures on the shipped 'routing' set.

The local model (llama.cpp in this process; it takes about a minute to load) answers each ticket with the skill
library as its system prompt, and plays EvoSkill's proposer (create or edit a skill, from a batch of failures)
and its skill writer (the folder). Every folder is checked against the current library on validation tasks
before it is kept; the frontier of skill libraries the recipe built on is printed at the end.

    python examples/algorithms/evoskill_local.py --calls 60 [--async]
"""

from __future__ import annotations

import argparse
import tempfile
from dataclasses import replace
from pathlib import Path

from agentgrad.agents.llm import LLMAgent
from agentgrad.agents.skill import resolve_model, scoring
from agentgrad.algorithms.evoskill import EvoSkillAgent, recipe
from agentgrad.data.shipped import load_set, recommended_scorer
from agentgrad.runtime.budget import Budget


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=60, help="calls of the solver (rollouts and gate together)")
    parser.add_argument("--async", dest="asynchronous", action="store_true", help="the barrier-free runtime")
    parser.add_argument("--set", default="routing", help="shipped task set")
    parser.add_argument("--model", default="local", help="'local' (default), 'openai:<model>', ...")
    parser.add_argument("--frontier", type=int, default=3, help="K, the frontier size")
    parser.add_argument("--seconds", type=float, default=900.0, help="wall-time budget")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds one proposal may take (CPU model)")
    parser.add_argument("--run-dir", type=Path, default=None)
    args = parser.parse_args()
    provider = resolve_model(args.model)
    run_dir = args.run_dir or Path(tempfile.mkdtemp(prefix="evoskill-local-")) / "run"
    solver = LLMAgent(provider, params={"temperature": 0.0, "max_tokens": 24}).run
    method = recipe(solver, reflector=provider, frontier=args.frontier, category="queue_name",
                    params={"temperature": 0.3, "max_tokens": 300})
    method = replace(method, config=replace(method.config, timeout=args.timeout))
    result = method.evolve(load_set(args.set), scoring(recommended_scorer(args.set)),
                           budget=Budget(calls=args.calls, wall_time=args.seconds),
                           asynchronous=args.asynchronous, workers=2, store=run_dir)
    print(result.summary())
    print("skill library:\n" + (result.rendered or "(empty)"))
    agent = method.agent
    if isinstance(agent, EvoSkillAgent):
        print("frontier:", [(m.label, round(m.score, 3)) for m in agent.frontier.members])
        print("feedback:", [(e.label, e.action, e.skill, e.outcome) for e in agent.feedback])
    return 0 if result.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
