"""GEPA on the embedded local model (no key): reflective rewrites of a prompt, a Pareto frontier of candidates.

The local model both answers the shipped set's questions (with the prompt as its system message) and, as the
reflector, rewrites the prompt from a minibatch of its own failures. A small model writes weak instructions, so
expect small gains; with OPENAI_*/ANTHROPIC_* set, pass --model openai:<name> for a stronger one.

    python examples/algorithms/gepa_local.py [--set sentiment] [--calls 60] [--async]
"""

from __future__ import annotations

from recipe_example import arguments, run_recipe

from agentgrad.algorithms.gepa import gepa


def main() -> int:
    return run_recipe(gepa, arguments(__doc__ or "", task_set="sentiment", calls=60), name="gepa",
                      artifact="Answer with the label only.", params={"temperature": 0.7, "max_tokens": 200})


if __name__ == "__main__":
    raise SystemExit(main())
