"""GEPA on the embedded local model (no key): reflective rewrites of a prompt, a Pareto frontier of candidates.

The local model both answers the shipped set's questions (with the prompt as its system message) and, as the
reflector, rewrites the prompt from a minibatch of its own failures. A small model writes weak instructions, so
expect small gains; with OPENAI_*/ANTHROPIC_* set, pass --model openai:<name> for a stronger one.

    python examples/algorithms/gepa_local.py [--set sentiment] [--calls 60] [--async]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from agentgrad import Budget, load_set
from agentgrad.agents.skill import scoring
from agentgrad.algorithms.gepa import gepa
from agentgrad.data.shipped import recommended_scorer


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", default="sentiment", help="a shipped task set")
    parser.add_argument("--model", default="local", help="local, openai:<model> or anthropic:<model>")
    parser.add_argument("--calls", type=int, default=60, help="the call budget")
    parser.add_argument("--async", dest="asynchronous", action="store_true", help="the asynchronous runtime")
    args = parser.parse_args()
    store = Path(tempfile.mkdtemp(prefix="agentgrad-gepa-")) / "run"
    result = gepa(load_set(args.set), scoring(recommended_scorer(args.set)), model=args.model,
                  artifact="Answer with the label only.", budget=Budget(calls=args.calls),
                  asynchronous=args.asynchronous, workers=2, store=store,
                  params={"temperature": 0.7, "max_tokens": 200},  # the reflector's calls
                  solve_params={"temperature": 0.0, "max_tokens": 16})  # the solving calls
    print(result.summary())
    print("learned prompt:\n" + result.artifact.text)
    return 0 if result.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
