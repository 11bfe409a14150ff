"""OPRO on the embedded local model (no key): a meta-prompt of scored instructions, several candidates a step.

The local model both answers the shipped set's questions (with the skill as its system message) and, as the
optimizer, writes the new versions. A small model follows the recipe's reply format only part of the time (the
run counts the replies it cannot use), so expect small gains; with OPENAI_*/ANTHROPIC_* set, pass
--model openai:<name> for a stronger one.

    python examples/algorithms/opro_local.py [--set sentiment] [--calls 80] [--async]
"""

from __future__ import annotations

from recipe_example import arguments, run_recipe

from agentgrad.algorithms.opro import opro


def main() -> int:
    return run_recipe(opro, arguments(__doc__ or ""), name="opro", artifact="Answer with the label only.",
                      candidates=4, params={"max_tokens": 256})


if __name__ == "__main__":
    raise SystemExit(main())
