"""ADAS on the embedded local model (no key): a meta agent writes agents as Python programs, the sandbox runs them.

The local model is the meta agent: it reads the archive of programs found so far (code and fitness) and the
current best program's failures, writes a new program `run(task_input) -> str`, reflects on it, and debugs it when
it crashes in the sandbox. Each program is scored by the engine's gate and kept only if it beats the current one.
The program has no model of its own (the sandbox has no network), so pick a set a program can solve:
`arithmetic` ("What is 65 - 12?") by default. A 0.5B model writes weak programs; with OPENAI_*/ANTHROPIC_* set,
pass --model openai:<name> for a stronger meta agent.

    python examples/algorithms/adas_local.py [--set arithmetic] [--calls 60] [--async]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from agentgrad import Budget, load_set
from agentgrad.agents.skill import scoring
from agentgrad.algorithms.adas import adas
from agentgrad.data.shipped import recommended_scorer


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", default="arithmetic", help="a shipped task set")
    parser.add_argument("--model", default="local", help="the meta agent: local, openai:<model> or anthropic:<model>")
    parser.add_argument("--calls", type=int, default=60, help="the call budget (sandboxed runs of programs)")
    parser.add_argument("--async", dest="asynchronous", action="store_true", help="the asynchronous runtime")
    parser.add_argument("--reflections", type=int, default=0, help="self-reflection rounds (ADAS: 2; slow locally)")
    args = parser.parse_args()
    store = Path(tempfile.mkdtemp(prefix="agentgrad-adas-")) / "run"
    result = adas(load_set(args.set), scoring(recommended_scorer(args.set)), model=args.model,
                  budget=Budget(calls=args.calls), asynchronous=args.asynchronous, store=store, eval_tasks=12,
                  reflections=args.reflections, debug_max=1, params={"temperature": 0.7, "max_tokens": 600})
    print(result.summary())
    print("learned program:\n" + result.artifact.text)
    return 0 if result.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
