"""DGM on the embedded local model (no key): an open-ended archive of programs, each child a code edit of its parent.

Each self-improvement draws a parent from the archive (likelier for a good score and for few children), shows the
local model the parent's code and a failure, asks for ONE improvement as an issue, then for search/replace edits
that implement it. The child runs in the sandbox (no network, resource limits); the engine's gate decides whether
it replaces the current program, and the archive keeps every child that ran. The program has no model of its own,
so pick a set a program can solve: `arithmetic` by default. With OPENAI_*/ANTHROPIC_* set, pass
--model openai:<name> for a stronger model.

    python examples/algorithms/dgm_local.py [--set arithmetic] [--calls 60] [--async]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from agentgrad import Budget, load_set
from agentgrad.agents.skill import scoring
from agentgrad.algorithms.dgm import dgm
from agentgrad.data.shipped import recommended_scorer


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", default="arithmetic", help="a shipped task set")
    parser.add_argument("--model", default="local", help="local, openai:<model> or anthropic:<model>")
    parser.add_argument("--calls", type=int, default=60, help="the call budget (sandboxed runs of programs)")
    parser.add_argument("--async", dest="asynchronous", action="store_true", help="the asynchronous runtime")
    args = parser.parse_args()
    store = Path(tempfile.mkdtemp(prefix="agentgrad-dgm-")) / "run"
    result = dgm(load_set(args.set), scoring(recommended_scorer(args.set)), model=args.model,
                 budget=Budget(calls=args.calls), asynchronous=args.asynchronous, store=store, stage=6,
                 eval_tasks=12, examples=2, params={"temperature": 0.7, "max_tokens": 700})
    print(result.summary())
    print("learned program:\n" + result.artifact.text)
    return 0 if result.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
