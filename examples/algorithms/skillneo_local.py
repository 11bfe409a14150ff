"""SkillNEO on the embedded local model (no key): a served skill and an exploration lineage kept apart.

The local model both answers the shipped set's questions (with the skill as its system message) and, as the
optimizer, writes the new versions. A small model follows the recipe's reply format only part of the time (the
run counts the replies it cannot use), so expect small gains; with OPENAI_*/ANTHROPIC_* set, pass
--model openai:<name> for a stronger one.

    python examples/algorithms/skillneo_local.py [--set routing] [--calls 80] [--async]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from agentgrad import Budget, load_set
from agentgrad.agents.skill import scoring
from agentgrad.algorithms.skillneo import skillneo
from agentgrad.data.shipped import recommended_scorer


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", default="routing", help="a shipped task set")
    parser.add_argument("--model", default="local", help="local, openai:<model> or anthropic:<model>")
    parser.add_argument("--calls", type=int, default=80, help="the call budget")
    parser.add_argument("--async", dest="asynchronous", action="store_true", help="the asynchronous runtime")
    args = parser.parse_args()
    store = Path(tempfile.mkdtemp(prefix="agentgrad-skillneo-")) / "run"
    result = skillneo(
        load_set(args.set), scoring(recommended_scorer(args.set)), model=args.model,
        artifact="Answer with the code only.", budget=Budget(calls=args.calls), asynchronous=args.asynchronous,
        store=store, params={"max_tokens": 256}, solve_params={"temperature": 0.0, "max_tokens": 16})
    print(result.summary())
    print("learned skill:\n" + result.artifact.text)
    return 0 if result.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
