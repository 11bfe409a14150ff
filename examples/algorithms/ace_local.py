"""ACE on the embedded local model: a playbook of numbered bullets for the shipped 'routing' set.

The local model (llama.cpp in this process; it takes about a minute to load) answers with the playbook inside
ACE's generator instructions, and plays reflector and curator. Every delta is checked against the current
playbook on validation tasks before it is kept; the bullets' helpful / harmful counters are written to
``ace_state.json`` in the run directory.

    python examples/algorithms/ace_local.py --calls 60 [--async] [--online]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from agentgrad.agents.skill import resolve_model, scoring
from agentgrad.algorithms.ace import ace, generator
from agentgrad.data.shipped import load_set, recommended_scorer
from agentgrad.runtime.budget import Budget


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=60, help="calls of the solver (rollouts and gate together)")
    parser.add_argument("--async", dest="asynchronous", action="store_true", help="the barrier-free runtime")
    parser.add_argument("--online", action="store_true", help="ACE's online mode (one pass) instead of offline")
    parser.add_argument("--set", default="routing", help="shipped task set")
    parser.add_argument("--seconds", type=float, default=600.0, help="wall-time budget")
    parser.add_argument("--run-dir", type=Path, default=None)
    args = parser.parse_args()
    provider = resolve_model("local")
    run_dir = args.run_dir or Path(tempfile.mkdtemp(prefix="ace-local-")) / "run"
    score = scoring(recommended_scorer(args.set))
    result = ace(load_set(args.set), score, run=generator(provider, {"temperature": 0.0, "max_tokens": 24}),
                 reflector=provider, budget=Budget(calls=args.calls, wall_time=args.seconds),
                 asynchronous=args.asynchronous, store=run_dir, mode="online" if args.online else "offline",
                 epochs=2, params={"temperature": 0.3, "max_tokens": 400})
    print(result.summary())
    print("playbook:\n" + (result.rendered or "(empty)"))
    state = run_dir / "ace_state.json"
    if state.exists():
        print("counters (helpful, harmful):", json.loads(state.read_text())["counters"])
    return 0 if result.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
