"""Reflexion on the embedded local model: lessons for the shipped 'routing' set, learned from retries.

On a training ticket the local model (llama.cpp in this process; about a minute to load) answers with the
lessons; while its answer is wrong it writes a self-reflection and tries again with it, up to --trials tries. A
reflection after which a retry passed is proposed as a lesson and kept only if it helps on validation tasks.
Every attempt is written to ``reflexion_attempts.json`` in the run directory.

    python examples/algorithms/reflexion_local.py --calls 60 [--async] [--trials 3]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from agentgrad.agents.llm import LLMAgent
from agentgrad.agents.skill import resolve_model, scoring
from agentgrad.algorithms.reflexion import reflexion
from agentgrad.data.shipped import load_set, recommended_scorer
from agentgrad.runtime.budget import Budget


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=60, help="calls of the solver (rollouts and gate together)")
    parser.add_argument("--async", dest="asynchronous", action="store_true", help="the barrier-free runtime")
    parser.add_argument("--trials", type=int, default=3, help="the most tries per training task")
    parser.add_argument("--set", default="routing", help="shipped task set")
    parser.add_argument("--seconds", type=float, default=600.0, help="wall-time budget")
    parser.add_argument("--run-dir", type=Path, default=None)
    args = parser.parse_args()
    provider = resolve_model("local")
    solver = LLMAgent(provider, params={"temperature": 0.0, "max_tokens": 24}).run
    run_dir = args.run_dir or Path(tempfile.mkdtemp(prefix="reflexion-local-")) / "run"
    result = reflexion(load_set(args.set), scoring(recommended_scorer(args.set)), run=solver, reflector=provider,
                       budget=Budget(calls=args.calls, wall_time=args.seconds), asynchronous=args.asynchronous,
                       store=run_dir, trials=args.trials, params={"temperature": 0.3, "max_tokens": 120})
    print(result.summary())
    print("lessons:\n" + (result.rendered or "(empty)"))
    attempts = run_dir / "reflexion_attempts.json"
    if attempts.exists():
        rows = json.loads(attempts.read_text())
        print(f"{len(rows)} attempts; {sum(r['passed'] for r in rows)} passed")
    return 0 if result.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
